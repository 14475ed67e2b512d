#include "networks/collective.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "networks/algorithms.hpp"

namespace dlsim::networks {

const std::vector<CollectiveOp>& all_ops() {
  static const std::vector<CollectiveOp> ops = {
      CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
      CollectiveOp::kBroadcast, CollectiveOp::kReduce,    CollectiveOp::kAllToAll};
  return ops;
}

std::string to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "allreduce";
    case CollectiveOp::kAllGather:
      return "allgather";
    case CollectiveOp::kReduceScatter:
      return "reducescatter";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kReduce:
      return "reduce";
    case CollectiveOp::kAllToAll:
      return "alltoall";
  }
  return "allreduce";
}

std::optional<CollectiveOp> parse_op(const std::string& s) {
  for (auto op : all_ops()) {
    if (to_string(op) == s) return op;
  }
  return std::nullopt;
}

double busbw_factor(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return static_cast<double>(n - 1) / n;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
      return 1.0;
  }
  return 1.0;
}

int Communicator::node_count() const {
  int count = 0;
  int last = -1;
  for (int s : rank_slot) {
    if (s != last) ++count;
    last = s;
  }
  return count;
}

std::vector<std::vector<int>> Communicator::ranks_by_node() const {
  std::vector<std::vector<int>> out;
  int last = -1;
  for (int r = 0; r < size(); ++r) {
    if (rank_slot[r] != last) out.emplace_back();
    out.back().push_back(r);
    last = rank_slot[r];
  }
  return out;
}

Communicator make_communicator(const Topology& topo, const Placement& placement,
                               std::vector<int> server_slots) {
  Communicator c;
  c.topo = &topo;
  c.library = &topo.cluster().library;
  for (const auto& r : placement.ranks) {
    c.rank_vertex.push_back(topo.gpu_vertex(r.node, r.gpu));
    c.rank_slot.push_back(r.node);
  }
  c.server_slots = std::move(server_slots);
  return c;
}

RouteCost route_cost(const Communicator& comm, int src, int dst, int rail,
                     const hardware::ProtocolSpec& proto) {
  const auto& topo = *comm.topo;
  std::vector<int> route;
  topo.route(src, dst, rail, route);
  const auto cls = topo.path_class(route);
  RouteCost c;
  c.alpha = proto.step_latency(cls).value();
  if (cls == hardware::PathClass::kNetwork) {
    c.alpha += topo.cluster().network.transport.message_overhead.value();
  }
  double bw = std::numeric_limits<double>::infinity();
  for (int id : route) {
    c.alpha += topo.link(id).latency.value();
    bw = std::min(bw, topo.link(id).bandwidth.value());
  }
  if (const auto cap = topo.per_flow_cap(); cap && cls == hardware::PathClass::kNetwork) {
    bw = std::min(bw, cap->value());
  }
  c.beta = route.empty() ? 0.0 : 1.0 / (bw * proto.bandwidth_fraction);
  return c;
}

StepCost step_cost(const Communicator& comm, const Phase& phase,
                   const hardware::ProtocolSpec& proto) {
  const auto& topo = *comm.topo;
  std::vector<std::vector<int>> routes;
  std::map<int, double> load;
  for (const auto& t : phase.transfers) {
    routes.emplace_back();
    if (t.src == t.dst || t.bytes <= 0) continue;
    topo.route(t.src, t.dst, t.rail, routes.back());
    for (int id : routes.back()) load[id] += t.bytes;
  }
  StepCost c;
  const auto cap = topo.per_flow_cap();
  for (std::size_t i = 0; i < routes.size(); ++i) {
    if (routes[i].empty()) continue;
    const auto& t = phase.transfers[i];
    const auto cls = topo.path_class(routes[i]);
    double alpha = proto.step_latency(cls).value();
    if (cls == hardware::PathClass::kNetwork) {
      alpha += topo.cluster().network.transport.message_overhead.value();
    }
    double wire = 0;
    for (int id : routes[i]) {
      alpha += topo.link(id).latency.value();
      wire =
          std::max(wire, load[id] / (topo.link(id).bandwidth.value() * proto.bandwidth_fraction));
    }
    if (cap && cls == hardware::PathClass::kNetwork) {
      wire = std::max(wire, t.bytes / (cap->value() * proto.bandwidth_fraction));
    }
    c.alpha = std::max(c.alpha, alpha);
    c.wire = std::max(c.wire, wire);
    c.beta = std::max(c.beta, wire / t.bytes);
  }
  return c;
}

const AlgorithmRegistry& collective_algorithms() {
  static const AlgorithmRegistry registry = [] {
    AlgorithmRegistry r("collective algorithm");
    detail::register_ring(r);
    detail::register_tree(r);
    detail::register_halving_doubling(r);
    detail::register_hierarchical(r);
    detail::register_parameter_server(r);
    return r;
  }();
  return registry;
}

CollectiveResult run_collective(const CollectiveRequest& req, const Communicator& comm,
                                const std::string& name) {
  const auto& entry = collective_algorithms().at(name);
  const auto algo = entry.make();
  if (!algo->supports(req.op)) {
    std::vector<std::string> ok;
    for (const auto& n : collective_algorithms().names()) {
      if (collective_algorithms().at(n).make()->supports(req.op)) ok.push_back(n);
    }
    fail_at({}, "--algo",
            fmt::format("'{}' does not implement {}; algorithms that do: {}", name,
                        to_string(req.op), fmt::join(ok, ", ")));
  }
  if (req.size.value() < 0) fail_at({}, "--bytes", "must not be negative");
  CollectiveResult best;
  bool first = true;
  for (const auto& proto : comm.library->protocols) {
    const auto schedule = algo->schedule(req, comm, proto);
    auto exec = execute(schedule, *comm.topo, proto, comm.topo->cluster().network.transport);
    if (first || exec.time < best.time) {
      const auto model = algo->closed_form(req, comm, proto);
      best.protocol = proto.name;
      best.time = exec.time;
      best.model_time = model.time;
      best.formula = model.formula;
      best.execution = std::move(exec);
      best.channels = schedule.channels;
      best.steps = schedule.steps();
      first = false;
    }
  }
  best.algbw = best.time.value() > 0 ? req.size.value() / best.time.value() : 0.0;
  best.busbw = best.algbw * busbw_factor(req.op, comm.size());
  return best;
}

namespace detail {

Bandwidth gpu_memory_bandwidth(const Communicator& comm) {
  return comm.topo->node(comm.rank_slot.front()).gpu.memory_bandwidth;
}

std::int64_t chunks(double bytes, const hardware::ProtocolSpec& proto) {
  return std::max<std::int64_t>(1,
                                static_cast<std::int64_t>(std::ceil(bytes / proto.chunk.value())));
}

}  // namespace detail
}  // namespace dlsim::networks
