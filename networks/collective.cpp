#include "networks/collective.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
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

Communicator Communicator::subset(const std::vector<int>& ranks) const {
  Communicator c;
  c.topo = topo;
  c.library = library;
  c.server_slots = server_slots;
  for (int r : ranks) {
    c.rank_vertex.push_back(rank_vertex[static_cast<std::size_t>(r)]);
    c.rank_slot.push_back(rank_slot[static_cast<std::size_t>(r)]);
  }
  return c;
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

Seconds closed_form_time(const Communicator& comm, const Schedule& schedule) {
  StepCoster coster(*comm.topo, comm.topo->cluster().network.transport);
  double t = 0;
  for (const auto& ph : schedule.phases) {
    const auto& costs = coster.costs(ph);
    double alpha = 0, alpha_sum = 0, wire = 0;
    int active = 0;
    for (const auto& c : costs) {
      if (!c.active()) continue;
      alpha = std::max(alpha, c.alpha);
      alpha_sum += c.alpha;
      ++active;
      wire = std::max(wire, c.wire);
    }
    if (ph.pipelined && active > 0) alpha = alpha_sum / active;
    const double reduce = ph.reduce_bytes / ph.reduce_bandwidth.value();
    const double body = ph.overlap_reduce ? std::max(wire, reduce) : wire + reduce;
    t += static_cast<double>(ph.repeat) * (alpha + body);
  }
  return Seconds(t);
}

const AlgorithmRegistry& collective_algorithms() {
  static const AlgorithmRegistry registry = [] {
    AlgorithmRegistry r("collective algorithm");
    detail::register_nccl(r);
    detail::register_halving_doubling(r);
    detail::register_hierarchical(r);
    detail::register_parameter_server(r);
    return r;
  }();
  return registry;
}

std::vector<std::string> algorithms_for(CollectiveOp op, const hardware::LibrarySpec& library) {
  std::vector<std::string> ok;
  for (const auto& n : collective_algorithms().names()) {
    if (collective_algorithms().at(n).make()->supports(op, library)) ok.push_back(n);
  }
  return ok;
}

CollectiveResult run_collective(const CollectiveRequest& req, const Communicator& comm,
                                const std::string& name) {
  const auto algo = collective_algorithms().at(name).make();
  if (!algo->supports(req.op, *comm.library)) {
    fail_at({}, "algorithm",
            fmt::format("'{}' does not implement {} with {}; algorithms that do: {}", name,
                        to_string(req.op), comm.library->about.name,
                        fmt::join(algorithms_for(req.op, *comm.library), ", ")));
  }
  if (req.size.value() < 0) fail_at({}, "bytes", "must not be negative");
  CollectiveResult r;
  r.cost = algo->cost(req, comm);
  const auto schedule = algo->schedule(req, comm);
  r.execution = execute(schedule, *comm.topo, comm.topo->cluster().network.transport);
  r.time = r.execution.time;
  r.steps = schedule.steps();
  r.algbw = r.time.value() > 0 ? req.size.value() / r.time.value() : 0.0;
  r.busbw = r.algbw * busbw_factor(req.op, comm.size());
  return r;
}

namespace detail {

Bandwidth gpu_memory_bandwidth(const Communicator& comm) {
  return comm.topo->node(comm.rank_slot.front()).gpu.memory_bandwidth;
}

void schedule_cost(const CollectiveAlgorithm& algo, const CollectiveRequest& req,
                   const Communicator& comm, CollectiveCost& c) {
  c.time = closed_form_time(comm, algo.schedule(req, comm));
  CollectiveRequest tiny = req;
  tiny.size = Bytes(1);
  tiny.ps.tensors = {1.0};
  c.latency = closed_form_time(comm, algo.schedule(tiny, comm));
}

std::int64_t chunks(double bytes, Bytes segment) {
  if (!(segment.value() > 0)) return 1;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(bytes / segment.value())));
}

}  // namespace detail
}  // namespace dlsim::networks
