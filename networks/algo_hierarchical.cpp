// Hierarchical allreduce (docs/networks.md, "Hierarchical"): reduce-scatter inside each node
// over its NVLink rings, a ring allreduce across nodes among the GPUs with the same local index
// (each on its own share, S/g, using its nearest NIC), and an all-gather inside each node; as
// NCCL across nodes and Horovod's hierarchical allreduce (Sergeev & Del Balso 2018, "Horovod:
// fast and easy distributed deep learning in TensorFlow", arXiv:1802.05799).

#include <fmt/format.h>
#include <algorithm>

#include "networks/algorithms.hpp"

namespace dlsim::networks::detail {
namespace {

class Hierarchical : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override { return op == CollectiveOp::kAllReduce; }

  struct Plan {
    int g = 1;  // GPUs per node
    int nodes = 1;
    std::vector<Rings> intra;               // per node
    int c = 1;                              // intra-node channels (the smallest over nodes)
    std::vector<std::vector<int>> columns;  // [local index] -> ranks across nodes
  };

  static Plan plan(const Communicator& comm) {
    Plan p;
    const auto nodes = comm.ranks_by_node();
    p.nodes = static_cast<int>(nodes.size());
    p.g = static_cast<int>(nodes.front().size());
    for (const auto& ranks : nodes) {
      if (static_cast<int>(ranks.size()) != p.g) {
        fail_at({}, "--gpus",
                fmt::format("hierarchical allreduce needs the same number of GPUs on every node; "
                            "this job has {} on its first node and {} on another (use "
                            "--gpus-per-node)",
                            p.g, ranks.size()));
      }
    }
    p.c = comm.library->max_channels;
    for (const auto& ranks : nodes) {
      p.intra.push_back(build_node_rings(comm, ranks, comm.library->max_channels));
      if (p.g > 1) p.c = std::min(p.c, p.intra.back().channels());
    }
    if (p.g == 1) p.c = 1;
    p.columns.assign(p.g, {});
    for (const auto& ranks : nodes) {
      for (int j = 0; j < p.g; ++j) p.columns[j].push_back(ranks[j]);
    }
    return p;
  }

  Schedule schedule(const CollectiveRequest& req, const Communicator& comm,
                    const hardware::ProtocolSpec&) const override {
    Schedule s;
    s.algorithm = "hierarchical";
    if (comm.size() < 2) return s;
    const auto p = plan(comm);
    s.channels = p.c;
    const double S = req.size.value();
    const Bandwidth mem = gpu_memory_bandwidth(comm);
    if (p.g > 1) {
      const double block = S / (p.g * p.c);
      Phase ring;
      ring.pipelined = true;
      for (const auto& r : p.intra) {
        Rings used{{r.orders.begin(), r.orders.begin() + p.c}};
        auto part = ring_phase(comm, used, block, true);
        ring.transfers.insert(ring.transfers.end(), part.transfers.begin(), part.transfers.end());
      }
      auto [rs, ag] = reduce_scatter_all_gather(std::move(ring), "intra-node", p.g - 1, block, mem);
      s.phases.push_back(std::move(rs));
      inter(s, comm, p, S / p.g, mem);
      s.phases.push_back(std::move(ag));
    } else {
      inter(s, comm, p, S, mem);
    }
    return s;
  }

  ClosedForm closed_form(const CollectiveRequest& req, const Communicator& comm,
                         const hardware::ProtocolSpec& proto) const override {
    if (comm.size() < 2) return {proto.base_latency, "b (one rank)"};
    // Alpha and beta (with the sharing factor L) of each level from its own step.
    const Seconds t = closed_form_time(comm, schedule(req, comm, proto), proto);
    return {t, "b + 2(g-1)(a_i + L_i S/(gc) B_i) + 2(N-1)(a_e + L_e S/(gN) B_e)"};
  }

 private:
  // Ring allreduce across nodes, one ring per local GPU index, on `bytes` each.
  static void inter(Schedule& s, const Communicator& comm, const Plan& p, double bytes,
                    Bandwidth mem) {
    if (p.nodes < 2) return;
    const double block = bytes / p.nodes;
    Phase ph;
    ph.pipelined = true;
    for (const auto& col : p.columns) {
      for (std::size_t i = 0; i < col.size(); ++i) {
        ph.transfers.push_back(
            {comm.rank_vertex[col[i]], comm.rank_vertex[col[(i + 1) % col.size()]], block, -1});
      }
    }
    auto [rs, ag] = reduce_scatter_all_gather(std::move(ph), "inter-node", p.nodes - 1, block, mem);
    s.phases.push_back(std::move(rs));
    s.phases.push_back(std::move(ag));
  }

  // The two halves of a ring allreduce over the same transfers: `steps` reduce-scatter steps
  // (each reducing `block` bytes) and as many all-gather steps.
  static std::pair<Phase, Phase> reduce_scatter_all_gather(Phase ring, const std::string& level,
                                                           std::int64_t steps, double block,
                                                           Bandwidth mem) {
    Phase ag = ring;
    ring.label = level + " reduce-scatter";
    ring.repeat = steps;
    ring.reduce_bytes = reduce_traffic(block);
    ring.reduce_bandwidth = mem;
    ag.label = level + " all-gather";
    ag.repeat = steps;
    return {std::move(ring), std::move(ag)};
  }
};

}  // namespace

void register_hierarchical(AlgorithmRegistry& r) {
  r.add("hierarchical",
        "intra-node reduce-scatter, inter-node ring allreduce, intra-node all-gather",
        [] { return std::make_unique<Hierarchical>(); });
}

}  // namespace dlsim::networks::detail
