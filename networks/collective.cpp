#include "networks/collective.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "networks/algorithms.hpp"

namespace dlsim::networks {

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

StepCost step_cost(const Communicator& comm, const Phase& phase,
                   const hardware::ProtocolSpec& proto) {
  StepCoster coster(*comm.topo, proto, comm.topo->cluster().network.transport);
  const auto& costs = coster.costs(phase);
  StepCost c;
  double alpha_sum = 0;
  int active = 0;
  for (std::size_t i = 0; i < costs.size(); ++i) {
    if (!costs[i].active()) continue;
    c.alpha = std::max(c.alpha, costs[i].alpha);
    alpha_sum += costs[i].alpha;
    ++active;
    c.wire = std::max(c.wire, costs[i].wire);
    c.beta = std::max(c.beta, costs[i].wire / phase.transfers[i].bytes);
  }
  if (phase.pipelined && active > 0) c.alpha = alpha_sum / active;
  return c;
}

Seconds closed_form_time(const Communicator& comm, const Schedule& schedule,
                         const hardware::ProtocolSpec& proto) {
  double t = proto.base_latency.value();
  for (const auto& ph : schedule.phases) {
    const auto c = step_cost(comm, ph, proto);
    const double reduce = ph.reduce_bytes / ph.reduce_bandwidth.value();
    const double body = ph.overlap_reduce ? std::max(c.wire, reduce) : c.wire + reduce;
    t += static_cast<double>(ph.repeat) * (c.alpha + body);
  }
  return Seconds(t);
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
