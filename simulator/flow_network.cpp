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

namespace {

// Min-heap order of a class's flows: the first to finish on top, the earlier started first.
bool later(const auto& a, const auto& b) {
  return a.finish != b.finish ? a.finish > b.finish : a.seq > b.seq;
}

}  // namespace

void FlowNetwork::activate(Flow f) {
  if (f.bytes <= 0 || (f.links->empty() && !std::isfinite(f.cap))) {
    // Nothing bounds it: the transfer is all latency.
    f.done();
    return;
  }
  advance();
  f.start = kernel_.now();
  f.seq = seq_++;
  auto [it, added] = class_index_.try_emplace({f.links, f.cap}, static_cast<int>(classes_.size()));
  if (added) {
    // A class that has emptied gives its slot (and its heap's storage) to the next new one, so
    // the classes kept are those with flows, not every route and cap seen in the run.
    if (!free_classes_.empty()) {
      it->second = free_classes_.back();
      free_classes_.pop_back();
    } else {
      classes_.emplace_back();
    }
    auto& c = classes_[static_cast<std::size_t>(it->second)];
    c.links = f.links;
    c.cap = f.cap;
  }
  auto& c = classes_[static_cast<std::size_t>(it->second)];
  if (c.flows.empty()) live_.push_back(it->second);
  f.finish = c.served + f.bytes;
  c.flows.push_back(std::move(f));
  std::push_heap(c.flows.begin(), c.flows.end(), later<Flow, Flow>);
  ++active_;
  // Flows that start at the same instant are solved once, after all of them have arrived:
  // an event at `now` runs after those already queued for `now`. Flows started by the callbacks
  // of update() are solved by it.
  if (!solve_pending_ && !in_callbacks_) {
    solve_pending_ = true;
    kernel_.at(kernel_.now(), [this] {
      if (!solve_pending_) return;  // an update() at this instant has solved since
      update();
    });
  }
}

void FlowNetwork::advance() {
  const Time now = kernel_.now();
  if (now == last_) return;
  const double dt = to_seconds(now - last_);
  for (const int k : live_) {
    auto& c = classes_[static_cast<std::size_t>(k)];
    c.served += c.rate * dt;
  }
  last_ = now;
}

void FlowNetwork::update() {
  advance();
  const Time now = kernel_.now();
  // Retire finished flows (within a picosecond of work or a relative 1e-9 of their size: time
  // is integer picoseconds).
  auto& done = finished_;  // callbacks cannot re-enter update(): only events call it
  done.clear();
  std::size_t kept = 0;
  for (const int k : live_) {
    auto& c = classes_[static_cast<std::size_t>(k)];
    while (!c.flows.empty()) {
      const auto& top = c.flows.front();
      if (top.finish - c.served > std::max(top.bytes * 1e-9, c.rate * 1e-12)) break;
      std::pop_heap(c.flows.begin(), c.flows.end(), later<Flow, Flow>);
      done.push_back(std::move(c.flows.back()));
      c.flows.pop_back();
      --active_;
    }
    if (c.flows.empty()) {
      c.served = 0;
      c.rate = 0;
      class_index_.erase({c.links, c.cap});
      free_classes_.push_back(k);
    } else {
      live_[kept++] = k;
    }
  }
  live_.resize(kept);
  // Their callbacks run in the order the flows started, before the re-solve: flows they start
  // at this instant join it, so the rates are solved once per instant. A callback may start
  // flows, which may finish at once and call back in turn.
  // (Sorted by reference: a flow carries its callback, too heavy to move around a sort.)
  auto& order = finished_order_;
  order.clear();
  for (std::size_t i = 0; i < done.size(); ++i) order.emplace_back(done[i].seq, i);
  std::sort(order.begin(), order.end());
  in_callbacks_ = true;
  for (const auto& [seq, i] : order) {
    auto& f = done[i];
    for (auto* o : observers_) o->on_flow(*f.links, f.bytes, f.start, now);
    f.done();
  }
  in_callbacks_ = false;
  done.clear();
  solve();
}

void FlowNetwork::solve() {
  solve_pending_ = false;
  links_.clear();
  begin_.clear();
  caps_.clear();
  weights_.clear();
  solved_.clear();
  for (const int k : live_) {
    const auto& c = classes_[static_cast<std::size_t>(k)];
    solved_.push_back(k);
    begin_.push_back(links_.size());
    links_.insert(links_.end(), c.links->begin(), c.links->end());
    caps_.push_back(c.cap);
    weights_.push_back(static_cast<int>(c.flows.size()));
  }
  begin_.push_back(links_.size());
  const std::uint64_t gen = ++generation_;
  if (solved_.empty()) return;
  solver_.solve_unchecked({capacity_, links_, begin_, caps_, weights_}, rates_);
  double next = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < solved_.size(); ++i) {
    auto& c = classes_[static_cast<std::size_t>(solved_[i])];
    c.rate = rates_[i];
    if (c.rate > 0) next = std::min(next, (c.flows.front().finish - c.served) / c.rate);
  }
  if (std::isfinite(next)) {
    // Round up so the flow has really finished when the event runs.
    const auto ps = static_cast<Time>(std::ceil(next * static_cast<double>(kPicosPerSecond)));
    kernel_.at(kernel_.now() + std::max<Time>(1, ps), [this, gen] {
      if (gen == generation_) update();
    });
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
