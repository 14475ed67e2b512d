#include "networks/schedule.hpp"

#include <algorithm>

namespace dlsim::networks {

std::int64_t Schedule::steps() const {
  std::int64_t n = 0;
  for (const auto& p : phases) n += p.repeat;
  return n;
}

Execution execute(const Schedule& schedule, const Topology& topo,
                  const hardware::ProtocolSpec& proto, const hardware::TransportSpec& transport) {
  Execution out;
  out.time = proto.base_latency;
  std::vector<double> load(topo.link_count(), 0.0);
  std::vector<int> touched;
  std::vector<int> route;
  std::vector<std::size_t> begin;  // each transfer's links in `routes`
  std::vector<int> routes;
  const auto cap = topo.per_flow_cap();
  for (const auto& phase : schedule.phases) {
    routes.clear();
    begin.clear();
    for (const auto& t : phase.transfers) {
      begin.push_back(routes.size());
      if (t.src == t.dst || t.bytes <= 0) continue;
      route.clear();
      topo.route(t.src, t.dst, t.rail, route);
      for (int id : route) {
        if (load[id] == 0) touched.push_back(id);
        load[id] += t.bytes;
      }
      routes.insert(routes.end(), route.begin(), route.end());
    }
    begin.push_back(routes.size());
    const double reduce = phase.reduce_bytes / phase.reduce_bandwidth.value();
    double step = 0;
    std::string bottleneck;
    for (std::size_t i = 0; i < phase.transfers.size(); ++i) {
      const auto& t = phase.transfers[i];
      if (begin[i] == begin[i + 1]) continue;
      route.assign(routes.begin() + static_cast<std::ptrdiff_t>(begin[i]),
                   routes.begin() + static_cast<std::ptrdiff_t>(begin[i + 1]));
      const auto cls = topo.path_class(route);
      double alpha = proto.step_latency(cls).value();
      if (cls == hardware::PathClass::kNetwork) alpha += transport.message_overhead.value();
      double wire = 0;
      int worst = -1;
      for (int id : route) {
        const auto& l = topo.link(id);
        alpha += l.latency.value();
        const double busy = load[id] / (l.bandwidth.value() * proto.bandwidth_fraction);
        if (busy > wire) {
          wire = busy;
          worst = id;
        }
      }
      if (cap && cls == hardware::PathClass::kNetwork) {
        const double capped = t.bytes / (cap->value() * proto.bandwidth_fraction);
        if (capped > wire) {
          wire = capped;
          worst = -2;
        }
      }
      const double body = phase.overlap_reduce ? std::max(wire, reduce) : wire;
      const double time = alpha + body;
      if (time > step) {
        step = time;
        if (phase.overlap_reduce && reduce > wire) {
          bottleneck = "reduction";
        } else if (worst == -2) {
          bottleneck = "per-flow cap";
        } else {
          bottleneck = topo.vertex_name(topo.link(worst).from) + " -> " +
                       topo.vertex_name(topo.link(worst).to);
        }
      }
    }
    if (!phase.overlap_reduce && reduce > 0) {
      step += reduce;
      if (bottleneck.empty()) bottleneck = "reduction";
    }
    for (int id : touched) load[id] = 0;
    touched.clear();
    const Seconds step_time(step);
    out.phases.push_back({phase.label, phase.repeat, step_time,
                          step_time * static_cast<double>(phase.repeat), bottleneck});
    out.time += out.phases.back().time;
  }
  return out;
}

}  // namespace dlsim::networks
