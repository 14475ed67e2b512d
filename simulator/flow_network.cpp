#include "simulator/flow_network.hpp"

#include <algorithm>
#include <cmath>

namespace dlsim::simulator {

FlowNetwork::FlowNetwork(EventKernel& kernel, std::vector<double> capacity)
    : kernel_(kernel), capacity_(std::move(capacity)) {}

void FlowNetwork::start_on(const std::vector<int>& links, double bytes, Time latency, double cap,
                           std::function<void()> done) {
  Flow f;
  f.links = &links;
  f.bytes = bytes;
  f.remaining = bytes;
  f.cap = cap;
  f.done = std::move(done);
  if (latency == 0) {
    activate(std::move(f));
    return;
  }
  // Flows whose latency ends at the same instant (a collective step's transfers) share one
  // activation event.
  const Time at = kernel_.now() + latency;
  auto [it, added] = waiting_.try_emplace(at);
  if (added && !spare_.empty()) {
    it->second.swap(spare_.back());  // a list with room, from an earlier instant
    spare_.pop_back();
  }
  it->second.push_back(std::move(f));
  if (added) {
    kernel_.at(at, [this, at] {
      auto node = waiting_.extract(at);
      for (auto& w : node.mapped()) activate(std::move(w));
      node.mapped().clear();
      spare_.push_back(std::move(node.mapped()));
    });
  }
}

void FlowNetwork::activate(Flow f) {
  if (f.remaining <= 0 || (f.links->empty() && !std::isfinite(f.cap))) {
    // Nothing bounds it: the transfer is all latency.
    f.done();
    return;
  }
  advance();
  f.start = kernel_.now();
  flows_.push_back(std::move(f));
  // Flows that start at the same instant are solved once, after all of them have arrived:
  // an event at `now` runs after those already queued for `now`.
  if (!solve_pending_) {
    solve_pending_ = true;
    kernel_.at(kernel_.now(), [this] {
      solve_pending_ = false;
      update();
    });
  }
}

void FlowNetwork::advance() {
  const Time now = kernel_.now();
  if (now == last_) return;
  const double dt = to_seconds(now - last_);
  for (auto& f : flows_) f.remaining -= f.rate * dt;
  last_ = now;
}

void FlowNetwork::update() {
  advance();
  const Time now = kernel_.now();
  // Retire finished flows; their callbacks run after the re-solve, so a callback that starts a
  // new flow sees consistent state.
  auto& finished = finished_;
  finished.clear();
  std::size_t kept = 0;
  for (auto& f : flows_) {
    // Within a picosecond of work or a relative 1e-9 of its size: time is integer picoseconds.
    if (f.remaining <= std::max(f.bytes * 1e-9, f.rate * 1e-12)) {
      finished.push_back(std::move(f));
    } else {
      if (&flows_[kept] != &f) flows_[kept] = std::move(f);
      ++kept;
    }
  }
  flows_.erase(flows_.begin() + static_cast<std::ptrdiff_t>(kept), flows_.end());

  links_.clear();
  begin_.clear();
  caps_.clear();
  for (const auto& f : flows_) {
    begin_.push_back(links_.size());
    links_.insert(links_.end(), f.links->begin(), f.links->end());
    caps_.push_back(f.cap);
  }
  begin_.push_back(links_.size());
  const std::uint64_t gen = ++generation_;
  if (!flows_.empty()) {
    solver_.solve_unchecked({capacity_, links_, begin_, caps_}, rates_);
    double next = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < flows_.size(); ++i) {
      flows_[i].rate = rates_[i];
      if (rates_[i] > 0) next = std::min(next, flows_[i].remaining / rates_[i]);
    }
    if (std::isfinite(next)) {
      // Round up so the flow has really finished when the event runs.
      const auto ps = static_cast<Time>(std::ceil(next * static_cast<double>(kPicosPerSecond)));
      kernel_.at(now + std::max<Time>(1, ps), [this, gen] {
        if (gen == generation_) update();
      });
    }
  }
  // A callback may start flows and so re-enter update(): run them from a list of our own.
  std::vector<Flow> done;
  done.swap(finished);
  for (auto& f : done) {
    for (auto* o : observers_) o->on_flow(*f.links, f.bytes, f.start, now);
    f.done();
  }
  if (finished.empty()) {
    done.clear();
    finished.swap(done);  // keep the capacity
  }
}

std::vector<double> link_capacities(const networks::Topology& topo) {
  std::vector<double> c(topo.link_count());
  for (std::size_t i = 0; i < c.size(); ++i)
    c[i] = topo.link(static_cast<int>(i)).bandwidth.value();
  return c;
}

CollectiveRun::CollectiveRun(EventKernel& kernel, FlowNetwork& net, const networks::Topology& topo,
                             const hardware::TransportSpec& transport)
    : kernel_(kernel), net_(net), topo_(topo), transport_(transport) {}

void CollectiveRun::run(const networks::Schedule& schedule, std::function<void()> done) {
  schedule_ = &schedule;
  done_ = std::move(done);
  phase_ = 0;
  start_phase();
}

void CollectiveRun::start_phase() {
  if (phase_ == schedule_->phases.size()) {
    auto done = std::move(done_);
    done();
    return;
  }
  step_ = 0;
  start_step();
}

void CollectiveRun::start_step() {
  const auto& phase = schedule_->phases[phase_];
  step_start_ = kernel_.now();
  idle_at_start_ = net_.active() == 0;
  const Time latency = to_time(phase.latency);
  if (latency > 0) {
    kernel_.after(latency, [this] { start_flows(); });
  } else {
    start_flows();
  }
}

void CollectiveRun::start_flows() {
  const auto& phase = schedule_->phases[phase_];
  // A reduction fused with the copy (NCCL) bounds the flow's rate: the receiver sums
  // reduce_bytes per step at reduce_bandwidth (docs/simulator.md).
  const double reduce_s = phase.reduce_bytes / phase.reduce_bandwidth.value();
  const auto cap = topo_.per_flow_cap();
  pending_ = 1;  // held until every flow is started
  // A pipelined (ring) step: the flows move their bytes at once and the step then adds the
  // mean of their alphas (networks::Phase::pipelined); otherwise each flow waits its own alpha.
  double alpha_sum = 0;
  int active = 0;
  for (const auto& t : phase.transfers) {
    if (t.src == t.dst || t.bytes <= 0) continue;
    const Hop& h = hop(t);
    const double alpha = phase.route_latency ? h.alpha : 0.0;
    double flow_cap = t.cap;
    if (phase.overlap_reduce && reduce_s > 0) flow_cap = std::min(flow_cap, t.bytes / reduce_s);
    if (cap && h.network) flow_cap = std::min(flow_cap, cap->value());
    ++pending_;
    alpha_sum += alpha;
    ++active;
    net_.start_on(*h.route, t.bytes, phase.pipelined ? 0 : to_time(alpha), flow_cap, [this] {
      if (--pending_ == 0) step_done();
    });
  }
  step_latency_ = phase.pipelined && active > 0 ? to_time(alpha_sum / active) : 0;
  if (--pending_ == 0) step_done();
}

const CollectiveRun::Hop& CollectiveRun::hop(const networks::Transfer& t) {
  auto [it, added] = hops_.try_emplace({t.src, t.dst, t.rail});
  if (!added) return it->second;
  route_.clear();
  topo_.route(t.src, t.dst, t.rail, route_);
  const auto cls = topo_.path_class(route_);
  Hop& h = it->second;
  h.network = cls == hardware::PathClass::kNetwork;
  h.alpha = h.network ? transport_.message_overhead.value() : 0.0;
  for (int id : route_) h.alpha += topo_.link(id).latency.value();
  h.route = &net_.intern(route_);
  return h;
}
void CollectiveRun::step_done() {
  const auto& phase = schedule_->phases[phase_];
  Time after = step_latency_;
  if (!phase.overlap_reduce && phase.reduce_bytes > 0) {
    // A reduction after the data arrived (a parameter server summing in host memory).
    after += to_time(phase.reduce_bytes / phase.reduce_bandwidth.value());
  }
  if (after > 0) {
    kernel_.after(after, [this] { step_end(); });
  } else {
    step_end();
  }
}

void CollectiveRun::step_end() {
  const auto& phase = schedule_->phases[phase_];
  ++step_;
  if (step_ < phase.repeat) {
    if (idle_at_start_ && net_.active() == 0) {
      // Nothing else used the network: every remaining step takes exactly as long.
      const Time step = kernel_.now() - step_start_;
      kernel_.after(step * (phase.repeat - step_), [this] {
        ++phase_;
        start_phase();
      });
    } else {
      start_step();
    }
    return;
  }
  ++phase_;
  start_phase();
}

}  // namespace dlsim::simulator
