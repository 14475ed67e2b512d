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
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "networks/algorithms.hpp"
#include "networks/nccl.hpp"

namespace dlsim::networks::detail {
namespace {

class ParameterServer : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op, const hardware::LibrarySpec&) const override {
    return op == CollectiveOp::kAllReduce;
  }

  Schedule schedule(const CollectiveRequest& req, const Communicator& comm) const override {
    Schedule s;
    s.algorithm = "ps";
    const auto svs = ps_servers(req, comm);
    s.channels = static_cast<int>(svs.size());
    const double S = req.size.value();
    // Who pushes: every GPU, or (summing inside the node first, as TensorFlow's and MXNet's
    // workers do) each node's host once.
    const auto nodes = comm.ranks_by_node();
    std::vector<int> pushers;
    Phase gather, scatter;
    const bool local = req.ps.aggregation != PsAggregation::kNone;
    if (local) {
      gather.label = "sum inside each node";
      scatter.label = "copy to each GPU";
      double worst = 0;
      // The node's SHM rate, once per node type and GPU set (thousands of partitions schedule).
      std::map<std::pair<std::string, std::vector<int>>, double> shm_of;
      for (const auto& ranks : nodes) {
        const auto a = ps_aggregator(req.ps, comm, ranks);
        pushers.push_back(a.vertex);
        const int g = static_cast<int>(ranks.size());
        // Summed and spread by NCCL through host memory: a reduce-scatter and an all-gather,
        // each (g - 1) / g x S over the node's SHM rate (docs/networks.md, "BytePS").
        double shm = 0;
        if (req.ps.library_in_node) {
          const int slot = comm.rank_slot[ranks.front()];
          std::vector<int> gpus;
          for (int r : ranks) gpus.push_back(comm.rank_vertex[r] - comm.topo->gpu_vertex(slot, 0));
          auto [it, added] = shm_of.try_emplace({comm.topo->node(slot).about.name, gpus}, 0.0);
          if (added) it->second = node_shm_rate(comm, ranks);
          shm = it->second;
        }
        const double cap = shm > 0 ? shm * g / (g - 1) : std::numeric_limits<double>::infinity();
        for (int r : ranks) {
          gather.transfers.push_back({comm.rank_vertex[r], a.vertex, S, -1, cap});
          scatter.transfers.push_back({a.pull_vertex, comm.rank_vertex[r], S, -1, cap});
        }
        if (g > 1 && reduce_traffic(S, g) / a.memory.value() > worst) {
          worst = reduce_traffic(S, g) / a.memory.value();
          gather.reduce_bytes = reduce_traffic(S, g);
          gather.reduce_bandwidth = a.memory;
        }
      }
      gather.overlap_reduce = false;
    } else {
      pushers = comm.rank_vertex;
    }
    Phase push, sum, pull;
    push.label = "push gradients";
    pull.label = "pull parameters";
    sum.label = "sum on servers";
    const int W = static_cast<int>(pushers.size());
    // Servers on one device (a host's memory, or a GPU's) share its memory bandwidth: summing W
    // pushed copies into a shard reads W + 1 buffers and writes one (3 W buffers where each push
    // is applied on its own); the busiest device ends the step.
    std::map<int, std::pair<double, Bandwidth>> device;  // vertex -> (bytes, bandwidth)
    std::vector<int> pullers = pushers;
    if (local) {
      for (std::size_t j = 0; j < nodes.size(); ++j) {
        pullers[j] = ps_aggregator(req.ps, comm, nodes[j]).pull_vertex;
      }
    }
    // Receiving sockets (PsOptions::shared_receive): server s's, then worker w's.
    push.shared_receive = pull.shared_receive = req.ps.shared_receive;
    const int n_servers = static_cast<int>(svs.size());
    for (std::size_t s_i = 0; s_i < svs.size(); ++s_i) {
      const auto& sv = svs[s_i];
      if (sv.bytes <= 0) continue;  // a server holding nothing of this exchange sends nothing
      for (std::size_t w = 0; w < pushers.size(); ++w) {
        Transfer in{pushers[w], sv.vertex, sv.bytes};
        in.socket = static_cast<int>(s_i);
        push.transfers.push_back(in);
        Transfer out{sv.vertex, pullers[w], sv.bytes};
        out.socket = n_servers + static_cast<int>(w);
        pull.transfers.push_back(out);
      }
      auto& d = device[sv.vertex];
      d.first += ps_server_traffic(req.ps.apply_each, sv.bytes, W);
      d.second = sv.memory;
    }
    double worst = -1;
    for (const auto& [v, d] : device) {
      if (d.first / d.second.value() > worst) {
        worst = d.first / d.second.value();
        sum.reduce_bytes = d.first;
        sum.reduce_bandwidth = d.second;
      }
    }
    sum.overlap_reduce = false;
    if (local) s.phases.push_back(std::move(gather));
    s.phases.push_back(std::move(push));
    s.phases.push_back(std::move(sum));
    s.phases.push_back(std::move(pull));
    if (local) s.phases.push_back(std::move(scatter));
    return s;
  }

  CollectiveCost cost(const CollectiveRequest& req, const Communicator& comm) const override {
    // Push and pull: the server NIC takes W shards while each worker sends S in all.
    CollectiveCost c;
    c.algorithm = "ps";
    c.channels = req.ps.servers;
    schedule_cost(*this, req, comm, c);
    const char* server = req.ps.apply_each ? "3 N S_s" : "(N+2) S_s";
    c.formula =
        req.ps.aggregation != PsAggregation::kNone
            ? fmt::format(
                  "2(a + g S B_n) + (g+2) S / M_h + 2(a + max(S, N S_s) B) + sum_d {} / M_d",
                  server)
            : "2(a + max(S, W S_s) B) + sum over a device's servers of (W+2) S_s / M_d";
    c.why = fmt::format("{} parameter server(s), {}, summing on the {}", req.ps.servers,
                        req.ps.colocated ? "colocated" : "dedicated",
                        req.ps.on_gpu ? "GPU" : "host CPU");
    return c;
  }
};
}  // namespace

void register_parameter_server(AlgorithmRegistry& r) {
  r.add("ps", "parameter server: push to S servers, sum, pull (Li et al. 2014)",
        [] { return std::make_unique<ParameterServer>(); });
}

}  // namespace dlsim::networks::detail

namespace dlsim::networks {

namespace {
// Server processes one worker node can host beside its workers: BytePS's advice is one or a few
// per machine (docs/best-practice.md, "more BytePS server instances on the server machines");
// a node's cores bound it long before this.
constexpr int kMaxColocatedServersPerNode = 64;
}  // namespace

std::vector<PsServer> ps_servers(const CollectiveRequest& req, const Communicator& comm) {
  const auto& ps = req.ps;
  const auto& topo = *comm.topo;
  if (ps.servers < 1) fail_at({}, "ps_servers", "must be at least 1");
  if (!ps.colocated && static_cast<int>(comm.server_slots.size()) < ps.servers) {
    fail_at({}, "ps_servers",
            fmt::format("{} dedicated servers need {} free nodes, but the cluster has {} left "
                        "after the workers' (or use colocated servers)",
                        ps.servers, ps.servers, comm.server_slots.size()));
  }
  // The workers' nodes, for colocated servers only: thousands of exchanges ask for servers.
  const auto nodes = ps.colocated ? comm.ranks_by_node() : std::vector<std::vector<int>>{};
  const int worker_nodes = static_cast<int>(nodes.size());
  if (ps.colocated && ps.servers > kMaxColocatedServersPerNode * worker_nodes) {
    fail_at({}, "ps_servers",
            fmt::format("{} colocated servers on {} worker node(s): at most {} per node",
                        ps.servers, worker_nodes, kMaxColocatedServersPerNode));
  }
  std::vector<PsServer> out;
  out.reserve(static_cast<std::size_t>(ps.servers));
  for (int s = 0; s < ps.servers; ++s) {
    const int slot =
        ps.colocated ? comm.rank_slot[nodes[s % worker_nodes].front()] : comm.server_slots[s];
    PsServer sv;
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

PsAggregator ps_aggregator(const PsOptions& ps, const Communicator& comm,
                           const std::vector<int>& ranks) {
  const auto& topo = *comm.topo;
  const int slot = comm.rank_slot[ranks.front()];
  PsAggregator a;
  a.pull_vertex = topo.host_vertex(slot);
  if (ps.aggregation == PsAggregation::kGpu) {
    // One of the node's GPUs in turn by variable (tf_cnn_benchmarks: variable i on GPU i mod g).
    const auto pick = static_cast<std::size_t>(ps.variable) % ranks.size();
    a.vertex = comm.rank_vertex[ranks[pick]];
    a.memory = topo.node(slot).gpu.memory_bandwidth;
  } else {
    a.vertex = a.pull_vertex;
    a.memory = topo.node(slot).host.memory_bandwidth;
  }
  return a;
}

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
    fail_at({}, "ps_sharding",
            fmt::format("unknown sharding '{}' (split, round_robin, greedy)", ps.sharding));
  }
  return out;
}

}  // namespace dlsim::networks
