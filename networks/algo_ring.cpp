// Point-to-point ring algorithms of an MPI library (docs/networks.md, "MPI ring"): allreduce as
// a reduce-scatter followed by an all-gather, n-1 steps each (Patarasuk & Yuan 2009, "Bandwidth
// optimal all-reduce algorithms for clusters of workstations", JPDC 69(2)); all-gather and
// reduce-scatter as one half of it; broadcast and reduce as a chain along the ring pipelined in
// the library's segments (Open MPI's pipeline broadcast); all-to-all as n-1 pairwise shifts
// (Thakur, Rabenseifner & Gropp 2005, sec. 4.4), which NCCL's all-to-all also runs. The ring
// builder (edge-disjoint NVLink cycles) is shared with NCCL's search (networks/nccl.cpp).

#include <fmt/format.h>
#include <algorithm>

#include <functional>
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

}  // namespace

namespace {

// NVLink lanes between the node's ranks (indices into `ranks`) and every directed Hamiltonian
// cycle over them that starts at 0 (up to `limit`).
struct CycleSearch {
  std::vector<std::vector<int>> lanes;
  std::vector<std::vector<int>> candidates;
};
CycleSearch search_cycles(const Communicator& comm, const std::vector<int>& ranks,
                          std::size_t limit) {
  CycleSearch out;
  const int n = static_cast<int>(ranks.size());
  const int slot = comm.rank_slot[ranks.front()];
  const auto& topo = *comm.topo;
  std::vector<int> gpu(n);
  for (int i = 0; i < n; ++i) gpu[i] = comm.rank_vertex[ranks[i]] - topo.gpu_vertex(slot, 0);
  out.lanes.assign(n, std::vector<int>(n, 0));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b) out.lanes[a][b] = topo.nvlink_lanes(slot, gpu[a], gpu[b]);
    }
  }
  std::vector<int> path{0};
  std::vector<bool> used(n, false);
  used[0] = true;
  long budget = 2'000'000;  // search steps; NVLink islands are at most a few dozen GPUs
  enumerate_cycles(out.lanes, path, used, out.candidates, limit, budget);
  return out;
}

}  // namespace

std::vector<std::vector<int>> nvlink_cycles(const Communicator& comm, const std::vector<int>& ranks,
                                            int max_channels) {
  if (ranks.size() < 2) return {};
  const auto found = search_cycles(comm, ranks, 512);
  const auto& candidates = found.candidates;
  std::vector<std::vector<int>> best;
  for (std::size_t first = 0; first < candidates.size(); ++first) {
    auto cap = found.lanes;
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

std::vector<std::vector<int>> nvlink_paths(const Communicator& comm, const std::vector<int>& ranks,
                                           const std::vector<std::pair<int, int>>& ends) {
  std::vector<std::vector<int>> out(ends.size());
  if (ranks.size() < 2) return out;
  const auto found = search_cycles(comm, ranks, 4096);
  const auto n = ranks.size();
  // The cycles that close through a lane between a channel's two GPUs, either way round: the
  // ring may enter at either of them (NCCL tries both).
  std::vector<std::vector<std::pair<const std::vector<int>*, int>>> options(ends.size());
  for (std::size_t c = 0; c < ends.size(); ++c) {
    const auto [a, b] = ends[c];
    for (const auto& cyc : found.candidates) {
      const auto at = static_cast<std::size_t>(std::find(cyc.begin(), cyc.end(), b) - cyc.begin());
      if (cyc[(at + 1) % n] == a) options[c].emplace_back(&cyc, a);  // ... b -> a: enter at a
      const auto at2 = static_cast<std::size_t>(std::find(cyc.begin(), cyc.end(), a) - cyc.begin());
      if (cyc[(at2 + 1) % n] == b) options[c].emplace_back(&cyc, b);  // enter at b, leave at a
    }
  }
  // Depth first: every channel on lanes of its own if there is such a choice.
  std::vector<std::pair<const std::vector<int>*, int>> pick(ends.size(), {nullptr, 0});
  auto cap = found.lanes;
  long budget = 200'000;
  std::function<bool(std::size_t)> place = [&](std::size_t c) {
    if (c == ends.size()) return true;
    for (const auto& o : options[c]) {
      if (--budget < 0) return false;
      if (!fits(*o.first, cap)) continue;
      take(*o.first, cap);
      pick[c] = o;
      if (place(c + 1)) return true;
      for (std::size_t i = 0; i < n; ++i) ++cap[(*o.first)[i]][(*o.first)[(i + 1) % n]];
    }
    return false;
  };
  if (!place(0)) {
    // No lane-disjoint choice: each channel its first option (lanes shared).
    for (std::size_t c = 0; c < ends.size(); ++c) {
      pick[c] = options[c].empty() ? std::pair<const std::vector<int>*, int>{nullptr, 0}
                                   : options[c].front();
    }
  }
  for (std::size_t c = 0; c < ends.size(); ++c) {
    if (!pick[c].first) continue;
    auto order = *pick[c].first;
    std::rotate(order.begin(), std::find(order.begin(), order.end(), pick[c].second), order.end());
    out[c] = order;
  }
  return out;
}

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
      p.transfers.push_back({comm.rank_vertex[order[i]], comm.rank_vertex[order[(i + 1) % n]],
                             bytes, rings.channels() > 1 ? c : -1});
    }
  }
  return p;
}

namespace {

// Pairwise shifts in rank order: step k sends rank i's block to rank i+k.
Schedule alltoall_shifts(const CollectiveRequest& req, const Communicator& comm) {
  Schedule s;
  s.algorithm = "shifts";
  const int n = comm.size();
  const double S = req.size.value();
  for (int k = 1; k < n; ++k) {
    Phase p;
    p.label = fmt::format("shift {}", k);
    for (int i = 0; i < n; ++i) {
      p.transfers.push_back({comm.rank_vertex[i], comm.rank_vertex[(i + k) % n], S / n});
    }
    s.phases.push_back(std::move(p));
  }
  return s;
}

class MpiRing : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp, const hardware::LibrarySpec&) const override { return true; }

 private:
  // Rings depend on the communicator, not on the message: built once per communicator and kept
  // while this object lives (a sweep over sizes plans hundreds of collectives on one).
  using LayoutKey = std::tuple<const Topology*, const hardware::LibrarySpec*, std::vector<int>>;
  mutable std::map<LayoutKey, Rings> rings_;

  const Rings& rings(const Communicator& comm) const {
    auto [it, added] = rings_.try_emplace({comm.topo, comm.library, comm.rank_vertex});
    if (added) it->second = build_rings(comm, 1);
    return it->second;
  }

 public:
  Schedule schedule(const CollectiveRequest& req, const Communicator& comm) const override {
    Schedule s;
    s.algorithm = "ring";
    const int n = comm.size();
    if (n < 2) return s;
    if (req.op == CollectiveOp::kAllToAll) return alltoall_shifts(req, comm);
    const double S = req.size.value();
    const Bandwidth mem = gpu_memory_bandwidth(comm);
    auto ring = rings(comm);
    const double block = S / n;
    auto add = [&](const char* label, bool reduce) {
      Phase p = ring_phase(comm, ring, block, true);
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
        // A chain from the root along the ring (towards it for reduce), k segments pipelined
        // over n-1 hops: k+n-2 steps. Filling and draining steps are costed as full ones.
        const bool reduce = req.op == CollectiveOp::kReduce;
        for (auto& order : ring.orders) {
          std::rotate(order.begin(), std::find(order.begin(), order.end(), req.root), order.end());
          if (reduce) std::reverse(order.begin(), order.end());
        }
        const std::int64_t k = chunks(S, comm.library->segment);
        const double chunk = S / static_cast<double>(k);
        Phase p = ring_phase(comm, ring, chunk, false);
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

  CollectiveCost cost(const CollectiveRequest& req, const Communicator& comm) const override {
    CollectiveCost c;
    c.algorithm = req.op == CollectiveOp::kAllToAll ? "shifts" : "ring";
    if (comm.size() < 2) {
      c.formula = "0 (one rank)";
      return c;
    }
    schedule_cost(*this, req, comm, c);
    switch (req.op) {
      case CollectiveOp::kAllReduce:
        c.formula = "(n-1)(a + max(L S/n B, 3S/n G)) + (n-1)(a + L S/n B)";
        break;
      case CollectiveOp::kReduceScatter:
        c.formula = "(n-1)(a + max(L S/n B, 3S/n G))";
        break;
      case CollectiveOp::kAllGather:
        c.formula = "(n-1)(a + L S/n B)";
        break;
      case CollectiveOp::kBroadcast:
        c.formula = "(k+n-2)(a + L S/k B), k = ceil(S / segment)";
        break;
      case CollectiveOp::kReduce:
        c.formula = "(k+n-2)(a + max(L S/k B, 3S/k G)), k = ceil(S / segment)";
        break;
      case CollectiveOp::kAllToAll:
        c.formula = "sum over n-1 shifts of (a + L S/n B)";
        break;
    }
    c.why =
        "MPI ring: one ring over the ranks in node order, each step a point-to-point "
        "transfer to the next rank";
    return c;
  }
};

}  // namespace

std::unique_ptr<CollectiveAlgorithm> make_mpi_ring() { return std::make_unique<MpiRing>(); }
Schedule shifts_schedule(const CollectiveRequest& req, const Communicator& comm) {
  return alltoall_shifts(req, comm);
}

}  // namespace dlsim::networks::detail
