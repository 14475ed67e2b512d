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
      Phase rs;
      for (const auto& r : p.intra) {
        Rings used{{r.orders.begin(), r.orders.begin() + p.c}};
        auto part = ring_phase(comm, used, block, true);
        rs.transfers.insert(rs.transfers.end(), part.transfers.begin(), part.transfers.end());
      }
      Phase ag = rs;
      rs.label = "intra-node reduce-scatter";
      rs.repeat = p.g - 1;
      rs.reduce_bytes = reduce_traffic(block);
      rs.reduce_bandwidth = mem;
      ag.label = "intra-node all-gather";
      ag.repeat = p.g - 1;
      s.phases.push_back(rs);
      inter(s, comm, p, S / p.g, mem);
      s.phases.push_back(ag);
    } else {
      inter(s, comm, p, S, mem);
    }
    return s;
  }

  ClosedForm closed_form(const CollectiveRequest& req, const Communicator& comm,
                         const hardware::ProtocolSpec& proto) const override {
    double t = proto.base_latency.value();
    if (comm.size() < 2) return {Seconds(t), "b (one rank)"};
    const auto p = plan(comm);
    const double S = req.size.value();
    const double gamma = 1.0 / gpu_memory_bandwidth(comm).value();
    // Alpha and beta (with the sharing factor L) of each level from its own step.
    const auto sched = schedule(req, comm, proto);
    for (const auto& ph : sched.phases) {
      const auto c = step_cost(comm, ph, proto);
      const double body = std::max(c.wire, ph.reduce_bytes > 0 ? ph.reduce_bytes * gamma : 0.0);
      t += static_cast<double>(ph.repeat) * (c.alpha + body);
    }
    (void)p;
    (void)S;
    return {Seconds(t), "b + 2(g-1)(a_i + L_i S/(gc) B_i) + 2(N-1)(a_e + L_e S/(gN) B_e)"};
  }

 private:
  // Ring allreduce across nodes, one ring per local GPU index, on `bytes` each.
  static void inter(Schedule& s, const Communicator& comm, const Plan& p, double bytes,
                    Bandwidth mem) {
    if (p.nodes < 2) return;
    const double block = bytes / p.nodes;
    Phase ph;
    for (const auto& col : p.columns) {
      for (std::size_t i = 0; i < col.size(); ++i) {
        ph.transfers.push_back(
            {comm.rank_vertex[col[i]], comm.rank_vertex[col[(i + 1) % col.size()]], block, -1});
      }
    }
    Phase ag = ph;
    ph.label = "inter-node reduce-scatter";
    ph.repeat = p.nodes - 1;
    ph.reduce_bytes = reduce_traffic(block);
    ph.reduce_bandwidth = mem;
    ag.label = "inter-node all-gather";
    ag.repeat = p.nodes - 1;
    s.phases.push_back(ph);
    s.phases.push_back(ag);
  }
};

}  // namespace

void register_hierarchical(AlgorithmRegistry& r) {
  r.add("hierarchical",
        "intra-node reduce-scatter, inter-node ring allreduce, intra-node all-gather",
        [] { return std::make_unique<Hierarchical>(); });
}

}  // namespace dlsim::networks::detail
