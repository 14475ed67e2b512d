#include "networks/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace dlsim::networks {

std::int64_t Schedule::steps() const {
  std::int64_t n = 0;
  for (const auto& p : phases) n += p.repeat;
  return n;
}

StepCoster::StepCoster(const Topology& topo, const hardware::TransportSpec& transport)
    : topo_(topo), transport_(transport), load_(topo.link_count(), 0.0) {}

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
  // One receiving socket per process: its network bytes share one stream (shared_receive).
  const auto& stream = transport_.stream_bandwidth;
  const bool sockets = phase.shared_receive && stream.has_value();
  if (sockets) {
    for (std::size_t i = 0; i < phase.transfers.size(); ++i) {
      const auto& t = phase.transfers[i];
      if (t.socket < 0 || begin_[i] == begin_[i + 1]) continue;
      route_.assign(routes_.begin() + static_cast<std::ptrdiff_t>(begin_[i]),
                    routes_.begin() + static_cast<std::ptrdiff_t>(begin_[i + 1]));
      if (topo_.path_class(route_) != hardware::PathClass::kNetwork) continue;
      const auto k = static_cast<std::size_t>(t.socket);
      if (k >= socket_load_.size()) socket_load_.resize(k + 1, 0.0);
      socket_load_[k] += t.bytes;
    }
  }
  out_.assign(phase.transfers.size(), TransferCost{});
  for (std::size_t i = 0; i < phase.transfers.size(); ++i) {
    if (begin_[i] == begin_[i + 1]) continue;
    route_.assign(routes_.begin() + static_cast<std::ptrdiff_t>(begin_[i]),
                  routes_.begin() + static_cast<std::ptrdiff_t>(begin_[i + 1]));
    const auto cls = topo_.path_class(route_);
    const auto& t = phase.transfers[i];
    auto& c = out_[i];
    c.alpha = phase.latency;
    if (phase.route_latency && cls == hardware::PathClass::kNetwork) {
      c.alpha += transport_.message_overhead.value();
    }
    for (int id : route_) {
      const auto& l = topo_.link(id);
      if (phase.route_latency) c.alpha += l.latency.value();
      const double busy = load_[id] / l.bandwidth.value();
      if (c.link < 0 || busy > c.wire) {
        c.wire = busy;
        c.link = id;
      }
    }
    double flow_cap = t.cap;
    if (cap && cls == hardware::PathClass::kNetwork) flow_cap = std::min(flow_cap, cap->value());
    if (t.bytes / flow_cap > c.wire) {
      c.wire = t.bytes / flow_cap;
      c.capped = true;
    }
    if (sockets && t.socket >= 0 && cls == hardware::PathClass::kNetwork) {
      const double busy = socket_load_[static_cast<std::size_t>(t.socket)] / stream->value();
      if (busy > c.wire) {
        c.wire = busy;
        c.socket = true;
      }
    }
  }
  std::fill(socket_load_.begin(), socket_load_.end(), 0.0);
  for (int id : touched_) load_[id] = 0;
  touched_.clear();
  return out_;
}

Execution execute(const Schedule& schedule, const Topology& topo,
                  const hardware::TransportSpec& transport) {
  Execution out;
  StepCoster coster(topo, transport);
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
    for (std::size_t i = 0; i < costs.size(); ++i) {
      const auto& c = costs[i];
      if (!c.active()) continue;
      const double alpha = phase.pipelined ? mean_alpha : c.alpha;
      const double time = alpha + (phase.overlap_reduce ? std::max(c.wire, reduce) : c.wire);
      if (time <= step) continue;
      step = time;
      const auto& l = topo.link(c.link);
      const std::string link = topo.vertex_name(l.from) + " -> " + topo.vertex_name(l.to);
      if (phase.overlap_reduce && reduce > c.wire) {
        bottleneck = "reduction";
      } else if (c.socket) {
        bottleneck = "receiving socket of " + topo.vertex_name(phase.transfers[i].dst) +
                     " (one stream for all its peers)";
      } else if (c.capped) {
        // An NCCL channel moves at its share of the tuner's bandwidth (or a cloud flow at its
        // cap); the busiest link of its route is what NCCL's search sized the channel by.
        const bool channel = std::isfinite(phase.transfers[i].cap);
        bottleneck =
            (channel ? "channel rate; busiest link " : "per-flow cap; busiest link ") + link;
      } else {
        bottleneck = link;
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
