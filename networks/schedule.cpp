#include "networks/schedule.hpp"

#include <algorithm>

namespace dlsim::networks {

std::int64_t Schedule::steps() const {
  std::int64_t n = 0;
  for (const auto& p : phases) n += p.repeat;
  return n;
}

StepCoster::StepCoster(const Topology& topo, const hardware::ProtocolSpec& proto,
                       const hardware::TransportSpec& transport)
    : topo_(topo), proto_(proto), transport_(transport), load_(topo.link_count(), 0.0) {}

const std::vector<TransferCost>& StepCoster::costs(const Phase& phase) {
  routes_.clear();
  begin_.clear();
  for (const auto& t : phase.transfers) {
    begin_.push_back(routes_.size());
    if (t.src == t.dst || t.bytes <= 0) continue;
    route_.clear();
    topo_.route(t.src, t.dst, t.rail, route_);
    for (int id : route_) {
      if (load_[id] == 0) touched_.push_back(id);
      load_[id] += t.bytes;
    }
    routes_.insert(routes_.end(), route_.begin(), route_.end());
  }
  begin_.push_back(routes_.size());
  const auto cap = topo_.per_flow_cap();
  out_.assign(phase.transfers.size(), TransferCost{});
  for (std::size_t i = 0; i < phase.transfers.size(); ++i) {
    if (begin_[i] == begin_[i + 1]) continue;
    route_.assign(routes_.begin() + static_cast<std::ptrdiff_t>(begin_[i]),
                  routes_.begin() + static_cast<std::ptrdiff_t>(begin_[i + 1]));
    const auto cls = topo_.path_class(route_);
    auto& c = out_[i];
    c.alpha = proto_.step_latency(cls).value();
    if (cls == hardware::PathClass::kNetwork) c.alpha += transport_.message_overhead.value();
    for (int id : route_) {
      const auto& l = topo_.link(id);
      c.alpha += l.latency.value();
      const double busy = load_[id] / (l.bandwidth.value() * proto_.bandwidth_fraction);
      if (c.bottleneck < 0 || busy > c.wire) {
        c.wire = busy;
        c.bottleneck = id;
      }
    }
    if (cap && cls == hardware::PathClass::kNetwork) {
      const double capped = phase.transfers[i].bytes / (cap->value() * proto_.bandwidth_fraction);
      if (capped > c.wire) {
        c.wire = capped;
        c.bottleneck = TransferCost::kCapped;
      }
    }
  }
  for (int id : touched_) load_[id] = 0;
  touched_.clear();
  return out_;
}

Execution execute(const Schedule& schedule, const Topology& topo,
                  const hardware::ProtocolSpec& proto, const hardware::TransportSpec& transport) {
  Execution out;
  out.time = proto.base_latency;
  StepCoster coster(topo, proto, transport);
  for (const auto& phase : schedule.phases) {
    const double reduce = phase.reduce_bytes / phase.reduce_bandwidth.value();
    double step = 0;
    std::string bottleneck;
    const auto& costs = coster.costs(phase);
    // A pipelined phase: every transfer's step is charged the mean alpha (see Phase::pipelined).
    double mean_alpha = 0;
    int active = 0;
    for (const auto& c : costs) {
      if (!c.active()) continue;
      mean_alpha += c.alpha;
      ++active;
    }
    if (active > 0) mean_alpha /= active;
    for (const auto& c : costs) {
      if (!c.active()) continue;
      const double alpha = phase.pipelined ? mean_alpha : c.alpha;
      const double time = alpha + (phase.overlap_reduce ? std::max(c.wire, reduce) : c.wire);
      if (time <= step) continue;
      step = time;
      if (phase.overlap_reduce && reduce > c.wire) {
        bottleneck = "reduction";
      } else if (c.bottleneck == TransferCost::kCapped) {
        bottleneck = "per-flow cap";
      } else {
        bottleneck = topo.vertex_name(topo.link(c.bottleneck).from) + " -> " +
                     topo.vertex_name(topo.link(c.bottleneck).to);
      }
    }
    if (!phase.overlap_reduce && reduce > 0) {
      step += reduce;
      if (bottleneck.empty()) bottleneck = "reduction";
    }
    const Seconds step_time(step);
    out.phases.push_back({phase.label, phase.repeat, step_time,
                          step_time * static_cast<double>(phase.repeat), bottleneck});
    out.time += out.phases.back().time;
  }
  return out;
}

}  // namespace dlsim::networks
