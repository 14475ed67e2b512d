// NCCL's collectives (docs/networks.md, "NCCL's choices"): `auto` is what NCCL's tuner picks for
// the size (networks/nccl.cpp); `ring`, `tree` and `nvls` force the algorithm as NCCL_ALGO does,
// the protocol still chosen by the tuner. The cost is the tuner's own time, latency + bytes /
// algorithm bandwidth (src/graph/tuning.cc). The schedule the simulator executes is one phase of
// flows, one per channel and hop of the algorithm's graph: ring hops along the rings NCCL's
// search built (one per NIC across nodes), the edges of its double binary tree between nodes and
// of the chain inside each node, or each GPU's NVLinks to the NVSwitch (NVLS). Every flow carries
// the bytes NCCL moves over that hop and is capped at bytes / (S / algBw), so on a quiet network
// the collective takes the tuner's time, and under contention it takes what max-min sharing
// leaves. With an MPI library, `auto` and `ring` are its point-to-point ring.

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <tuple>

#include "networks/algorithms.hpp"
#include "networks/nccl.hpp"

namespace dlsim::networks::detail {
namespace {

// NCCL's in-order binary tree over 0..n-1 (src/graph/trees.cc): rank 0 is the root with one
// child; odd ranks are leaves. parent[r] is -1 for the root.
std::vector<int> btree_parents(int n) {
  std::vector<int> parent(n, -1);
  for (int rank = 1; rank < n; ++rank) {
    int bit = 1;
    while (bit < n && !(bit & rank)) bit <<= 1;
    int up = (rank ^ bit) | (bit << 1);
    if (up >= n) up = rank ^ bit;
    parent[rank] = up;
  }
  return parent;
}

// The second tree: mirrored when n is even, shifted by one when odd (NCCL's double binary tree),
// so that leaves of one tree are inner nodes of the other.
std::vector<int> second_tree(const std::vector<int>& first) {
  const int n = static_cast<int>(first.size());
  std::vector<int> parent(n, -1);
  for (int r = 0; r < n; ++r) {
    if (first[r] < 0) continue;
    if (n % 2 == 0) {
      parent[n - 1 - r] = n - 1 - first[r];
    } else {
      parent[(r + 1) % n] = (first[r] + 1) % n;
    }
  }
  return parent;
}

class Nccl : public CollectiveAlgorithm {
 public:
  explicit Nccl(std::string forced) : forced_(std::move(forced)) {}

  bool supports(CollectiveOp op, const hardware::LibrarySpec& library) const override {
    if (!library.nccl()) return forced_.empty() || forced_ == "ring";
    if (forced_.empty() || forced_ == "ring") return true;
    const auto& offered = library.tuner.algorithms;
    return op == CollectiveOp::kAllReduce &&
           std::find(offered.begin(), offered.end(), forced_) != offered.end();
  }

  CollectiveCost cost(const CollectiveRequest& req, const Communicator& comm) const override {
    if (!comm.library->nccl()) return mpi().cost(req, comm);
    CollectiveCost c;
    if (req.op == CollectiveOp::kAllToAll) {
      c.algorithm = "shifts";
      c.time = closed_form_time(comm, shifts_schedule(req, comm)) + launch(req, comm);
      c.latency = launch(req, comm);
      c.formula = "sum over n-1 shifts of (a + L S/n B)";
      c.why =
          "NCCL runs all-to-all as grouped point-to-point sends (ncclSend/ncclRecv), not "
          "through its tuner";
      return c;
    }
    if (comm.size() < 2) {
      c.algorithm = forced_.empty() ? "ring" : forced_;
      c.formula = "0 (one rank)";
      return c;
    }
    const auto& topo = search(comm);
    const auto choice = nccl_tune(*comm.library, topo, req.op, req.size.value(), forced_, req.root);
    const auto& b = choice.best;
    c.algorithm = b.algorithm;
    c.protocol = b.protocol;
    c.channels = choice.launched_channels;
    c.latency = Seconds(b.latency) + launch(req, comm);
    c.time = Seconds(choice.time + fill(req, comm, choice)) + launch(req, comm);
    c.bus_bw = b.bus_bw;
    c.formula = b.algorithm == "ring"   ? "lat + S / (busBw n / nsteps)"
                : b.algorithm == "tree" ? "lat + S / (busBw / 2 x correction(S))"
                                        : "lat + S / (busBw x 5/6)";
    if (req.op == CollectiveOp::kBroadcast || req.op == CollectiveOp::kReduce) {
      c.formula += " + (n-2) chunk / (algBw / channels)";
    }
    if (req.gpus_per_thread > 1) c.formula += " + G launch";
    // The runner-up, so the choice shows its margin.
    const NcclCost* next = nullptr;
    for (const auto& e : choice.table) {
      if (!e.enabled || (e.algorithm == b.algorithm && e.protocol == b.protocol)) continue;
      if (!forced_.empty() && e.algorithm != forced_) continue;
      if (!next || e.time < next->time) next = &e;
    }
    c.why = fmt::format(
        "NCCL {} tuner: {}/{} ({}{} channels, {:.1f} us by its model{}); graph: {}{}{}",
        comm.library->tuner.version, b.algorithm, b.protocol,
        forced_.empty() ? "" : "algorithm forced, ", choice.launched_channels, b.time * 1e6,
        next ? fmt::format(", next {}/{} {:.1f} us", next->algorithm, next->protocol,
                           next->time * 1e6)
             : "",
        topo.summary,
        choice.transport_bound ? fmt::format("; bound by the transport: {} rank(s) sending between "
                                             "nodes of {:.2f} GB/s each",
                                             topo.ring.rings.size(), topo.flow_cap / 1e9)
                               : "",
        choice.shm_bound ? fmt::format("; bound by host memory: GPUs beyond NCCL's P2P level "
                                       "exchange through its SHM transport at {:.2f} GB/s "
                                       "(host.shm_bandwidth)",
                                       topo.shm_cap / 1e9)
                         : "");
    return c;
  }

  Schedule schedule(const CollectiveRequest& req, const Communicator& comm) const override {
    if (!comm.library->nccl()) return mpi().schedule(req, comm);
    if (req.op == CollectiveOp::kAllToAll) {
      auto s = shifts_schedule(req, comm);
      if (!s.phases.empty()) s.phases.front().latency = launch(req, comm).value();
      return s;
    }
    Schedule s;
    const int n = comm.size();
    if (n < 2) return s;
    const auto& topo = search(comm);
    const auto choice = nccl_tune(*comm.library, topo, req.op, req.size.value(), forced_, req.root);
    const auto& b = choice.best;
    s.algorithm = b.algorithm;
    s.channels = choice.launched_channels;
    const double S = req.size.value();
    const double t_bw = choice.alg_bw > 0 ? S / choice.alg_bw : 0.0;
    Phase p;
    p.label = fmt::format("NCCL {}/{} {}, {} channels", b.algorithm, b.protocol, to_string(req.op),
                          choice.launched_channels);
    p.latency = b.latency + fill(req, comm, choice) + launch(req, comm).value();
    p.route_latency = false;
    auto add = [&](int src_rank, int dst_rank, double bytes, int rail) {
      if (bytes <= 0) return;
      Transfer t{comm.rank_vertex[static_cast<std::size_t>(src_rank)],
                 comm.rank_vertex[static_cast<std::size_t>(dst_rank)], bytes, rail};
      if (t_bw > 0) t.cap = bytes / t_bw;
      p.transfers.push_back(t);
    };
    if (b.algorithm == "ring") {
      const auto& g = topo.ring;
      const double nch = static_cast<double>(g.rings.size());
      double hop = S / nch;
      if (req.op == CollectiveOp::kAllReduce) hop *= 2.0 * (n - 1) / n;
      if (req.op == CollectiveOp::kReduceScatter || req.op == CollectiveOp::kAllGather) {
        hop *= static_cast<double>(n - 1) / n;
      }
      const bool rooted = req.op == CollectiveOp::kBroadcast || req.op == CollectiveOp::kReduce;
      if (rooted && (req.root < 0 || req.root >= n)) {
        fail_at({}, "root", fmt::format("rank {} is not in 0..{}", req.root, n - 1));
      }
      for (std::size_t c = 0; c < g.rings.size(); ++c) {
        auto order = g.rings[c];
        if (rooted) {
          // A chain from the root along the ring (towards it for reduce).
          std::rotate(order.begin(), std::find(order.begin(), order.end(), req.root), order.end());
          if (req.op == CollectiveOp::kReduce) std::reverse(order.begin(), order.end());
        }
        for (int i = 0; i < (rooted ? n - 1 : n); ++i) {
          add(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % n)], hop,
              g.rail[c]);
        }
      }
    } else if (b.algorithm == "tree") {
      // Per channel: the chain inside each node in the channel's ring order from the GPU next
      // to its NIC, and between the nodes' chain heads one of the two binary trees (alternating
      // by channel); every edge carries S / channels up (reduce) and down (broadcast).
      const auto& g = topo.tree;
      const auto nodes = comm.ranks_by_node();
      const int N = static_cast<int>(nodes.size());
      const auto first = btree_parents(N);
      const std::vector<std::vector<int>> trees = {first, second_tree(first)};
      // The kernel's channels alternate between the two trees (at least one channel each).
      const std::size_t channels = std::max<std::size_t>(2, g.rings.size());
      const double bytes = S / static_cast<double>(channels);
      std::vector<int> node_of(static_cast<std::size_t>(n));
      for (int j = 0; j < N; ++j) {
        for (int r : nodes[static_cast<std::size_t>(j)]) node_of[static_cast<std::size_t>(r)] = j;
      }
      for (std::size_t c = 0; c < channels; ++c) {
        std::vector<std::vector<int>> chain(static_cast<std::size_t>(N));
        for (int r : g.rings[c % g.rings.size()]) {
          chain[static_cast<std::size_t>(node_of[static_cast<std::size_t>(r)])].push_back(r);
        }
        for (const auto& ch : chain) {
          for (std::size_t i = 0; i + 1 < ch.size(); ++i) {
            add(ch[i + 1], ch[i], bytes, -1);
            add(ch[i], ch[i + 1], bytes, -1);
          }
        }
        const auto& parent = trees[c % 2];
        for (int j = 0; j < N; ++j) {
          const int up = parent[static_cast<std::size_t>(j)];
          if (up < 0) continue;
          const int child = chain[static_cast<std::size_t>(j)].front();
          const int head = chain[static_cast<std::size_t>(up)].front();
          add(child, head, bytes, g.rail[c % g.rail.size()]);
          add(head, child, bytes, g.rail[c % g.rail.size()]);
        }
      }
    } else {
      // NVLS: every GPU sends its buffer into the NVSwitch, which reduces it, and receives the
      // result multicast back.
      const int slot = comm.rank_slot.front();
      const int sw = comm.topo->nvswitch_vertex(slot);
      for (int r = 0; r < n; ++r) {
        const int v = comm.rank_vertex[static_cast<std::size_t>(r)];
        for (auto [a, b2] : {std::pair{v, sw}, std::pair{sw, v}}) {
          Transfer t{a, b2, S, -1};
          if (t_bw > 0) t.cap = S / t_bw;
          p.transfers.push_back(t);
        }
      }
    }
    s.phases.push_back(std::move(p));
    return s;
  }

 private:
  std::string forced_;
  using Key = std::tuple<const Topology*, const hardware::LibrarySpec*, std::vector<int>>;
  mutable std::map<Key, NcclTopology> searched_;
  mutable std::unique_ptr<CollectiveAlgorithm> mpi_;

  // The search depends on the communicator, not the message: run once per communicator.
  const NcclTopology& search(const Communicator& comm) const {
    auto [it, added] = searched_.try_emplace({comm.topo, comm.library, comm.rank_vertex});
    if (added) it->second = nccl_search(comm);
    return it->second;
  }
  const CollectiveAlgorithm& mpi() const {
    if (!forced_.empty() && forced_ != "ring") {
      fail_at({}, "algorithm",
              fmt::format("'{}' is one of NCCL's algorithms; this library is MPI "
                          "(use ring, hd, hierarchical or ps)",
                          forced_));
    }
    if (!mpi_) mpi_ = make_mpi_ring();
    return *mpi_;
  }
  // A chain (broadcast, reduce) moves a channel's data in chunks of the protocol's pipeline
  // step: the last chunk leaves the root n-2 chunk times after the first reached the chain's
  // end, which the tuner's bytes / algBw leaves out.
  static double fill(const CollectiveRequest& req, const Communicator& comm,
                     const NcclChoice& choice) {
    const int n = comm.size();
    if ((req.op != CollectiveOp::kBroadcast && req.op != CollectiveOp::kReduce) || n < 3 ||
        choice.alg_bw <= 0) {
      return 0;
    }
    const double channels = std::max(1, choice.launched_channels);
    const double chunk = std::min(comm.library->protocol(choice.best.protocol)->chunk.value(),
                                  req.size.value() / channels);
    return (n - 2) * chunk / (choice.alg_bw / channels);
  }
  // nccl-tests -g G: one thread launches its G GPUs' kernels one after another.
  static Seconds launch(const CollectiveRequest& req, const Communicator& comm) {
    if (req.gpus_per_thread <= 1) return Seconds(0);
    return comm.topo->node(comm.rank_slot.front()).gpu.kernel_launch *
           static_cast<double>(req.gpus_per_thread);
  }
};

}  // namespace

void register_nccl(AlgorithmRegistry& r) {
  r.add("auto", "what the library picks: NCCL's tuner by size, or MPI's ring",
        [] { return std::make_unique<Nccl>(""); });
  r.add("ring", "NCCL's rings, one per NIC across nodes (NCCL_ALGO=Ring); MPI's ring",
        [] { return std::make_unique<Nccl>("ring"); });
  r.add("tree", "NCCL's double binary tree allreduce (NCCL_ALGO=Tree)",
        [] { return std::make_unique<Nccl>("tree"); });
  r.add("nvls", "NCCL's NVLink SHARP allreduce on Hopper NVSwitch nodes (NCCL_ALGO=NVLS)",
        [] { return std::make_unique<Nccl>("nvls"); });
}

}  // namespace dlsim::networks::detail
