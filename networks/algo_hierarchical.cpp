// Hierarchical allreduce (docs/networks.md, "Hierarchical"): a reduce-scatter inside each node,
// an allreduce across nodes among the GPUs with the same local index (each on its share, S/g),
// and an all-gather inside each node: Horovod's hierarchical allreduce and NCCL's own structure
// across nodes (Sergeev & Del Balso 2018, "Horovod: fast and easy distributed deep learning in
// TensorFlow", arXiv:1802.05799). Each level is the library's own collective on that
// sub-communicator (`auto`: NCCL's tuner, or MPI's ring), the nodes (or columns) running theirs
// at the same time.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>

#include "networks/algorithms.hpp"

namespace dlsim::networks::detail {
namespace {

class Hierarchical : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op, const hardware::LibrarySpec&) const override {
    return op == CollectiveOp::kAllReduce;
  }

  CollectiveCost cost(const CollectiveRequest& req, const Communicator& comm) const override {
    CollectiveCost c;
    c.algorithm = "hierarchical";
    c.formula = "max_node T_rs(S) + max_column T_ar(S/g) + max_node T_ag(S)";
    if (comm.size() < 2) return c;
    std::vector<std::string> parts;
    for (const auto& level : levels(req, comm)) {
      Seconds worst, worst_lat;
      std::string why;
      for (const auto& sub : level.comms) {
        const auto sc = inner().cost(level.request, sub);
        if (sc.time > worst) {
          worst = sc.time;
          why = fmt::format("{} {}/{}", level.name, sc.algorithm, sc.protocol);
        }
        worst_lat = std::max(worst_lat, sc.latency);
      }
      c.time += worst;
      c.latency += worst_lat;
      parts.push_back(why);
    }
    c.why = fmt::format("three levels, each the library's own choice: {}", fmt::join(parts, "; "));
    return c;
  }

  Schedule schedule(const CollectiveRequest& req, const Communicator& comm) const override {
    Schedule s;
    s.algorithm = "hierarchical";
    if (comm.size() < 2) return s;
    for (const auto& level : levels(req, comm)) {
      // The sub-communicators of a level run at once: their phases side by side.
      std::vector<Schedule> subs;
      for (const auto& sub : level.comms) subs.push_back(inner().schedule(level.request, sub));
      std::size_t phases = 0;
      for (const auto& sub : subs) phases = std::max(phases, sub.phases.size());
      for (std::size_t i = 0; i < phases; ++i) {
        Phase merged;
        bool first = true;
        for (const auto& sub : subs) {
          if (i >= sub.phases.size()) continue;
          const auto& p = sub.phases[i];
          if (first) {
            merged = p;
            merged.label = level.name + ": " + p.label;
            first = false;
            continue;
          }
          merged.transfers.insert(merged.transfers.end(), p.transfers.begin(), p.transfers.end());
          merged.latency = std::max(merged.latency, p.latency);
          merged.repeat = std::max(merged.repeat, p.repeat);
          merged.reduce_bytes = std::max(merged.reduce_bytes, p.reduce_bytes);
        }
        s.phases.push_back(std::move(merged));
      }
      s.channels = std::max(s.channels, subs.empty() ? 1 : subs.front().channels);
    }
    return s;
  }

 private:
  struct Level {
    std::string name;
    CollectiveRequest request;
    std::vector<Communicator> comms;
  };

  std::vector<Level> levels(const CollectiveRequest& req, const Communicator& comm) const {
    const auto nodes = comm.ranks_by_node();
    const int g = static_cast<int>(nodes.front().size());
    for (const auto& ranks : nodes) {
      if (static_cast<int>(ranks.size()) != g) {
        fail_at({}, "gpus",
                fmt::format("hierarchical allreduce needs the same number of GPUs on every node; "
                            "this job has {} on its first node and {} on another (use "
                            "--gpus-per-node)",
                            g, ranks.size()));
      }
    }
    std::vector<Level> out;
    auto intra = [&](const char* name, CollectiveOp op) {
      Level l{name, req, {}};
      l.request.op = op;
      for (const auto& ranks : nodes) l.comms.push_back(comm.subset(ranks));
      out.push_back(std::move(l));
    };
    if (g > 1) intra("intra-node reduce-scatter", CollectiveOp::kReduceScatter);
    if (nodes.size() > 1) {
      Level l{"inter-node allreduce", req, {}};
      l.request.size = req.size / static_cast<double>(g);
      for (int j = 0; j < g; ++j) {
        std::vector<int> column;
        for (const auto& ranks : nodes) column.push_back(ranks[static_cast<std::size_t>(j)]);
        l.comms.push_back(comm.subset(column));
      }
      out.push_back(std::move(l));
    }
    if (g > 1) intra("intra-node all-gather", CollectiveOp::kAllGather);
    return out;
  }

  const CollectiveAlgorithm& inner() const {
    if (!inner_) inner_ = collective_algorithms().at("auto").make();
    return *inner_;
  }
  mutable std::unique_ptr<CollectiveAlgorithm> inner_;
};

}  // namespace

void register_hierarchical(AlgorithmRegistry& r) {
  r.add("hierarchical",
        "intra-node reduce-scatter, inter-node allreduce per local GPU index, intra-node "
        "all-gather, each the library's own choice",
        [] { return std::make_unique<Hierarchical>(); });
}

}  // namespace dlsim::networks::detail
