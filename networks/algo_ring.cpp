// Ring algorithms (docs/networks.md, "Ring"): allreduce as a reduce-scatter followed by an
// all-gather, n-1 steps each (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms
// for clusters of workstations", JPDC 69(2)); all-gather and reduce-scatter as one half of it;
// broadcast and reduce as a pipelined chain along the ring (NCCL); all-to-all as n-1 pairwise
// shifts (Thakur, Rabenseifner & Gropp 2005, sec. 4.4). Several channels split the data over
// edge-disjoint rings, as NCCL does on NVLink.

#include <fmt/format.h>
#include <algorithm>

#include <map>
#include <tuple>

#include "networks/algorithms.hpp"

namespace dlsim::networks::detail {
namespace {

// Every directed Hamiltonian cycle through GPUs 0..n-1 that starts at 0, over links with at
// least one lane (depth-first, peers in index order; stops after `limit` cycles).
void enumerate_cycles(const std::vector<std::vector<int>>& lanes, std::vector<int>& path,
                      std::vector<bool>& used, std::vector<std::vector<int>>& out,
                      std::size_t limit, long& budget) {
  if (out.size() >= limit || --budget < 0) return;
  const int n = static_cast<int>(lanes.size());
  const int last = path.back();
  if (static_cast<int>(path.size()) == n) {
    if (lanes[last][path.front()] > 0) out.push_back(path);
    return;
  }
  for (int next = 0; next < n; ++next) {
    if (used[next] || lanes[last][next] == 0) continue;
    used[next] = true;
    path.push_back(next);
    enumerate_cycles(lanes, path, used, out, limit, budget);
    path.pop_back();
    used[next] = false;
  }
}

bool fits(const std::vector<int>& cycle, const std::vector<std::vector<int>>& cap) {
  const std::size_t n = cycle.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (cap[cycle[i]][cycle[(i + 1) % n]] == 0) return false;
  }
  return true;
}

void take(const std::vector<int>& cycle, std::vector<std::vector<int>>& cap) {
  const std::size_t n = cycle.size();
  for (std::size_t i = 0; i < n; ++i) --cap[cycle[i]][cycle[(i + 1) % n]];
}

// Cycles over the ranks of one node (indices into `ranks`), each lane carrying one ring per
// direction: for each candidate first cycle, the others are added greedily in enumeration
// order; the largest set wins (the first found among equals). Empty if NVLink has none.
std::vector<std::vector<int>> nvlink_cycles(const Communicator& comm, const std::vector<int>& ranks,
                                            int max_channels) {
  const int n = static_cast<int>(ranks.size());
  if (n < 2) return {};
  const int slot = comm.rank_slot[ranks.front()];
  const auto& topo = *comm.topo;
  std::vector<int> gpu(n);
  for (int i = 0; i < n; ++i) gpu[i] = comm.rank_vertex[ranks[i]] - topo.gpu_vertex(slot, 0);
  std::vector<std::vector<int>> lanes(n, std::vector<int>(n, 0));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b) lanes[a][b] = topo.nvlink_lanes(slot, gpu[a], gpu[b]);
    }
  }
  std::vector<std::vector<int>> candidates;
  std::vector<int> path{0};
  std::vector<bool> used(n, false);
  used[0] = true;
  long budget = 2'000'000;  // search steps; NVLink islands are at most a few dozen GPUs
  enumerate_cycles(lanes, path, used, candidates, 512, budget);
  std::vector<std::vector<int>> best;
  for (std::size_t first = 0; first < candidates.size(); ++first) {
    auto cap = lanes;
    std::vector<std::vector<int>> chosen;
    for (std::size_t i = 0; i < candidates.size() && static_cast<int>(chosen.size()) < max_channels;
         ++i) {
      const auto& c = candidates[(first + i) % candidates.size()];
      while (static_cast<int>(chosen.size()) < max_channels && fits(c, cap)) {
        take(c, cap);
        chosen.push_back(c);
      }
    }
    if (chosen.size() > best.size()) best = chosen;
  }
  return best;
}

}  // namespace

Rings build_node_rings(const Communicator& comm, const std::vector<int>& ranks, int max_channels) {
  Rings rings;
  for (const auto& cycle : nvlink_cycles(comm, ranks, max_channels)) {
    std::vector<int> order;
    for (int i : cycle) order.push_back(ranks[i]);
    rings.orders.push_back(order);
  }
  if (rings.orders.empty()) rings.orders.push_back(ranks);
  return rings;
}

Rings build_rings(const Communicator& comm, int max_channels) {
  const auto nodes = comm.ranks_by_node();
  std::vector<Rings> per_node;
  int channels = max_channels;
  bool any_multi = false;
  // Nodes of one type using the same GPUs have the same rings: search each pattern once, as
  // positions in the node's rank list.
  std::map<std::pair<std::string, std::vector<int>>, std::vector<std::vector<std::size_t>>> seen;
  const auto& topo = *comm.topo;
  for (const auto& ranks : nodes) {
    const int slot = comm.rank_slot[ranks.front()];
    std::vector<int> gpus;
    for (int r : ranks) gpus.push_back(comm.rank_vertex[r] - topo.gpu_vertex(slot, 0));
    auto [it, added] = seen.try_emplace({topo.node(slot).about.name, gpus});
    if (added) {
      for (const auto& order : build_node_rings(comm, ranks, max_channels).orders) {
        std::vector<std::size_t> pos;
        for (int r : order) {
          pos.push_back(
              static_cast<std::size_t>(std::find(ranks.begin(), ranks.end(), r) - ranks.begin()));
        }
        it->second.push_back(pos);
      }
    }
    Rings local;
    for (const auto& pos : it->second) {
      std::vector<int> order;
      for (auto i : pos) order.push_back(ranks[i]);
      local.orders.push_back(order);
    }
    per_node.push_back(local);
    if (ranks.size() > 1) {
      channels = std::min(channels, per_node.back().channels());
      any_multi = true;
    }
  }
  if (!any_multi) channels = 1;
  Rings rings;
  for (int c = 0; c < channels; ++c) {
    std::vector<int> order;
    for (const auto& r : per_node) {
      const auto& local = r.orders[static_cast<std::size_t>(c) % r.orders.size()];
      order.insert(order.end(), local.begin(), local.end());
    }
    rings.orders.push_back(order);
  }
  return rings;
}

Phase ring_phase(const Communicator& comm, const Rings& rings, double bytes, bool closed) {
  Phase p;
  p.pipelined = true;
  for (int c = 0; c < rings.channels(); ++c) {
    const auto& order = rings.orders[c];
    const int n = static_cast<int>(order.size());
    for (int i = 0; i < (closed ? n : n - 1); ++i) {
      p.transfers.push_back(
          {comm.rank_vertex[order[i]], comm.rank_vertex[order[(i + 1) % n]], bytes, c});
    }
  }
  return p;
}

StepCost ring_step_cost(const Communicator& comm, const Rings& rings,
                        const hardware::ProtocolSpec& proto) {
  return step_cost(comm, ring_phase(comm, rings, 1.0, true), proto);
}

namespace {

class Ring : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp) const override { return true; }

 private:
  // Rings and their per-protocol step cost depend on the communicator, not on the message:
  // built once per communicator and kept while this object lives (a sweep over sizes plans
  // hundreds of collectives on one communicator).
  struct Layout {
    Rings rings;
    std::map<const hardware::ProtocolSpec*, StepCost> step;
  };
  using LayoutKey = std::tuple<const Topology*, const hardware::LibrarySpec*, std::vector<int>>;
  mutable std::map<LayoutKey, Layout> layouts_;

  Layout& layout(const Communicator& comm) const {
    auto [it, added] = layouts_.try_emplace({comm.topo, comm.library, comm.rank_vertex});
    if (added) it->second.rings = build_rings(comm, comm.library->max_channels);
    return it->second;
  }
  StepCost step(const Communicator& comm, Layout& l, const hardware::ProtocolSpec& proto) const {
    auto [it, added] = l.step.try_emplace(&proto);
    if (added) it->second = ring_step_cost(comm, l.rings, proto);
    return it->second;
  }

 public:
  Schedule schedule(const CollectiveRequest& req, const Communicator& comm,
                    const hardware::ProtocolSpec& proto) const override {
    Schedule s;
    s.algorithm = "ring";
    const int n = comm.size();
    if (n < 2) return s;
    const double S = req.size.value();
    const Bandwidth mem = gpu_memory_bandwidth(comm);
    if (req.op == CollectiveOp::kAllToAll) {
      // Pairwise shifts in rank order: step k sends rank i's block to rank i+k.
      for (int k = 1; k < n; ++k) {
        Phase p;
        p.label = fmt::format("shift {}", k);
        for (int i = 0; i < n; ++i) {
          p.transfers.push_back({comm.rank_vertex[i], comm.rank_vertex[(i + k) % n], S / n, -1});
        }
        s.phases.push_back(std::move(p));
      }
      return s;
    }
    auto rings = layout(comm).rings;
    const double c = rings.channels();
    s.channels = rings.channels();
    const double block = S / (n * c);
    auto add = [&](const char* label, bool reduce) {
      Phase p = ring_phase(comm, rings, block, true);
      p.label = label;
      p.repeat = n - 1;
      if (reduce) {
        p.reduce_bytes = reduce_traffic(block);
        p.reduce_bandwidth = mem;
      }
      s.phases.push_back(std::move(p));
    };
    switch (req.op) {
      case CollectiveOp::kAllReduce:
        add("reduce-scatter", true);
        add("all-gather", false);
        break;
      case CollectiveOp::kReduceScatter:
        add("reduce-scatter", true);
        break;
      case CollectiveOp::kAllGather:
        add("all-gather", false);
        break;
      case CollectiveOp::kBroadcast:
      case CollectiveOp::kReduce: {
        // A chain from the root along each ring (towards it for reduce), k chunks pipelined
        // over n-1 hops: k+n-2 steps. Filling and draining steps are costed as full ones.
        const bool reduce = req.op == CollectiveOp::kReduce;
        for (auto& order : rings.orders) {
          std::rotate(order.begin(), std::find(order.begin(), order.end(), req.root), order.end());
          if (reduce) std::reverse(order.begin(), order.end());
        }
        const std::int64_t k = chunks(S / c, proto);
        const double chunk = S / (c * static_cast<double>(k));
        Phase p = ring_phase(comm, rings, chunk, false);
        p.label = reduce ? "pipelined reduce" : "pipelined broadcast";
        p.repeat = k + n - 2;
        if (reduce) {
          p.reduce_bytes = reduce_traffic(chunk);
          p.reduce_bandwidth = mem;
        }
        s.phases.push_back(std::move(p));
        break;
      }
      case CollectiveOp::kAllToAll:
        break;
    }
    return s;
  }

  ClosedForm closed_form(const CollectiveRequest& req, const Communicator& comm,
                         const hardware::ProtocolSpec& proto) const override {
    const int n = comm.size();
    const double S = req.size.value();
    const double base = proto.base_latency.value();
    if (n < 2) return {Seconds(base), "b (one rank)"};
    const double gamma = 1.0 / gpu_memory_bandwidth(comm).value();
    if (req.op == CollectiveOp::kAllToAll) {
      return {closed_form_time(comm, schedule(req, comm, proto), proto),
              "b + sum over n-1 shifts of (a + L S/n B)"};
    }
    auto& l = layout(comm);
    const double c = l.rings.channels();
    const auto rc = step(comm, l, proto);
    const double block = S / (n * c);
    const double reduce_step = rc.alpha + std::max(block * rc.beta, reduce_traffic(block) * gamma);
    const double copy_step = rc.alpha + block * rc.beta;
    switch (req.op) {
      case CollectiveOp::kAllReduce:
        return {Seconds(base + (n - 1) * (reduce_step + copy_step)),
                "b + (n-1)(a + max(L S/(nc) B, 3S/(nc) G)) + (n-1)(a + L S/(nc) B)"};
      case CollectiveOp::kReduceScatter:
        return {Seconds(base + (n - 1) * reduce_step), "b + (n-1)(a + max(L S/(nc) B, 3S/(nc) G))"};
      case CollectiveOp::kAllGather:
        return {Seconds(base + (n - 1) * copy_step), "b + (n-1)(a + L S/(nc) B)"};
      default: {
        const double k = static_cast<double>(chunks(S / c, proto));
        const double chunk = S / (c * k);
        const bool reduce = req.op == CollectiveOp::kReduce;
        const double step =
            rc.alpha +
            (reduce ? std::max(chunk * rc.beta, reduce_traffic(chunk) * gamma) : chunk * rc.beta);
        return {
            Seconds(base + (k + n - 2) * step),
            reduce ? "b + (k+n-2)(a + max(L S/(ck) B, 3S/(ck) G))" : "b + (k+n-2)(a + L S/(ck) B)"};
      }
    }
  }
};

}  // namespace

void register_ring(AlgorithmRegistry& r) {
  r.add("ring", "ring: reduce-scatter + all-gather over NCCL-style rings (Patarasuk & Yuan 2009)",
        [] { return std::make_unique<Ring>(); });
}

}  // namespace dlsim::networks::detail
