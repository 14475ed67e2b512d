// Parameter server (docs/networks.md, "Parameter server"): every worker pushes its gradients to
// the servers holding each shard, each server sums what it received, and every worker pulls
// the updated parameters back (Li et al. 2014, "Scaling distributed machine learning with the
// parameter server", OSDI; TensorFlow's and MXNet's kvstore). Shards: `split` cuts every tensor
// evenly over the servers (MXNet's big arrays); `round_robin` puts whole tensors on servers in
// turn (TensorFlow's default device placement); `greedy` puts each tensor, largest first, on
// the least-loaded server. Servers run on dedicated nodes after the workers' or on the workers'
// own nodes, summing in host memory (CPU) or on a GPU.

#include <fmt/format.h>
#include <algorithm>
#include <numeric>

#include "networks/algorithms.hpp"

namespace dlsim::networks::detail {
namespace {

class ParameterServer : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override { return op == CollectiveOp::kAllReduce; }

  struct Server {
    int vertex = 0;
    Bandwidth memory;  // of the device that sums
    double bytes = 0;  // shard held
  };

  static std::vector<Server> servers(const CollectiveRequest& req, const Communicator& comm) {
    const auto& ps = req.ps;
    const auto& topo = *comm.topo;
    if (ps.servers < 1) fail_at({}, "--ps-servers", "must be at least 1");
    if (!ps.colocated && static_cast<int>(comm.server_slots.size()) < ps.servers) {
      fail_at({}, "--ps-servers",
              fmt::format("{} dedicated servers need {} free nodes, but the cluster has {} left "
                          "after the workers' (or use colocated servers)",
                          ps.servers, ps.servers, comm.server_slots.size()));
    }
    const int worker_nodes = comm.node_count();
    std::vector<Server> out;
    const auto nodes = comm.ranks_by_node();
    for (int s = 0; s < ps.servers; ++s) {
      const int slot =
          ps.colocated ? comm.rank_slot[nodes[s % worker_nodes].front()] : comm.server_slots[s];
      Server sv;
      if (ps.on_gpu) {
        // A colocated server shares a GPU with a worker: the node's s-th GPU in turn.
        const int gpus = topo.node(slot).gpus;
        sv.vertex = topo.gpu_vertex(slot, ps.colocated ? (s / worker_nodes) % gpus : 0);
        sv.memory = topo.node(slot).gpu.memory_bandwidth;
      } else {
        sv.vertex = topo.host_vertex(slot);
        sv.memory = topo.node(slot).host.memory_bandwidth;
      }
      out.push_back(sv);
    }
    const auto shards = ps_shard_bytes(ps, req.size.value());
    for (std::size_t s = 0; s < out.size(); ++s) out[s].bytes = shards[s];
    return out;
  }

  Schedule schedule(const CollectiveRequest& req, const Communicator& comm,
                    const hardware::ProtocolSpec&) const override {
    Schedule s;
    s.algorithm = "ps";
    const auto svs = servers(req, comm);
    s.channels = static_cast<int>(svs.size());
    Phase push, sum, pull;
    push.label = "push gradients";
    pull.label = "pull parameters";
    sum.label = "sum on servers";
    const int W = comm.size();
    const Server* slowest = &svs.front();
    for (const auto& sv : svs) {
      for (int w = 0; w < W; ++w) {
        push.transfers.push_back({comm.rank_vertex[w], sv.vertex, sv.bytes, -1});
        pull.transfers.push_back({sv.vertex, comm.rank_vertex[w], sv.bytes, -1});
      }
      if (reduce_traffic(sv.bytes, W) / sv.memory.value() >
          reduce_traffic(slowest->bytes, W) / slowest->memory.value()) {
        slowest = &sv;
      }
    }
    // Summing W pushed copies into the shard reads W + 1 buffers and writes one; the slowest
    // server ends the step.
    sum.reduce_bytes = reduce_traffic(slowest->bytes, W);
    sum.reduce_bandwidth = slowest->memory;
    sum.overlap_reduce = false;
    s.phases = {push, sum, pull};
    return s;
  }

  ClosedForm closed_form(const CollectiveRequest& req, const Communicator& comm,
                         const hardware::ProtocolSpec& proto) const override {
    // Push and pull: the server NIC takes W shards while each worker sends S in all.
    const Seconds t = closed_form_time(comm, schedule(req, comm, proto), proto);
    return {t, "b + 2(a + max(S, W S_s) B) + (W+2) S_s / M_s"};
  }
};
}  // namespace

void register_parameter_server(AlgorithmRegistry& r) {
  r.add("ps", "parameter server: push to S servers, sum, pull (Li et al. 2014)",
        [] { return std::make_unique<ParameterServer>(); });
}

}  // namespace dlsim::networks::detail

namespace dlsim::networks {

std::vector<double> ps_shard_bytes(const PsOptions& ps, double bytes) {
  std::vector<double> out(static_cast<std::size_t>(std::max(ps.servers, 1)), 0.0);
  std::vector<double> tensors = ps.tensors;
  if (tensors.empty()) tensors.push_back(bytes);
  const double total = std::accumulate(tensors.begin(), tensors.end(), 0.0);
  if (ps.sharding == "split") {
    for (auto& b : out) b = total / static_cast<double>(out.size());
  } else if (ps.sharding == "round_robin") {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      out[(i + static_cast<std::size_t>(ps.server_offset)) % out.size()] += tensors[i];
    }
  } else if (ps.sharding == "greedy") {
    std::sort(tensors.begin(), tensors.end(), std::greater<>());
    for (double t : tensors) *std::min_element(out.begin(), out.end()) += t;
  } else {
    fail_at({}, "--ps-sharding",
            fmt::format("unknown sharding '{}' (split, round_robin, greedy)", ps.sharding));
  }
  return out;
}

}  // namespace dlsim::networks
