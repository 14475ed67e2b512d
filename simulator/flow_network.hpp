#pragma once
// The flow-level network: every transfer is a flow over its route's links; the flows in progress
// share link bandwidth max-min fairly (simulator/maxmin.hpp), re-solved whenever a flow starts or
// ends; a flow first waits its route's latency, then moves its bytes (docs/simulator.md,
// "Flow-level network"). CollectiveRun executes a collective's schedule on it, step after step.

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hardware/profile.hpp"
#include "networks/schedule.hpp"
#include "networks/topology.hpp"
#include "simulator/kernel.hpp"
#include "simulator/maxmin.hpp"

namespace dlsim::simulator {

class FlowObserver {
 public:
  virtual ~FlowObserver() = default;
  // A flow of `bytes` over `links` moved its data between `start` and `end`.
  virtual void on_flow(const std::vector<int>& links, double bytes, Time start, Time end) = 0;
};

class FlowNetwork {
 public:
  // `capacity[l]` in B/s for every link id of the topology.
  FlowNetwork(EventKernel& kernel, std::vector<double> capacity);

  // Starts a flow of `bytes` over `links` after `latency`; at most `cap` B/s on its own.
  // `done` runs when its last byte has arrived.
  void start(std::vector<int> links, double bytes, Time latency, double cap,
             std::function<void()> done) {
    start_on(intern(std::move(links)), bytes, latency, cap, std::move(done));
  }
  // The same over a route that outlives the flow (one from intern(), or the caller's own).
  void start_on(const std::vector<int>& links, double bytes, Time latency, double cap,
                std::function<void()> done);
  // A stable copy of `links`: a network sees few distinct routes, so flows share them.
  const std::vector<int>& intern(std::vector<int> links) {
    return *routes_.insert(std::move(links)).first;
  }
  std::size_t active() const { return active_; }
  // A resource beyond the topology's links (a memory, a receiving socket) that flows may list
  // in their routes; its id.
  int add_resource(double capacity) {
    capacity_.push_back(capacity);
    return static_cast<int>(capacity_.size()) - 1;
  }
  void add_observer(FlowObserver* o) { observers_.push_back(o); }

 private:
  struct Flow {
    const std::vector<int>* links = nullptr;
    double bytes = 0;
    double cap = std::numeric_limits<double>::infinity();
    Time start = 0;
    std::uint64_t seq = 0;  // activation order: finished flows call back in it
    double finish = 0;      // its class's `served` at which the flow has all its bytes
    std::function<void()> done;
  };
  // Flows on the same (interned) route with the same cap share one rate, so the solver sees
  // each such class once, weighted by its flows. `served` counts the bytes each of its flows has
  // received since the class last had none (B), so a flow's remaining bytes are finish - served
  // and the next to finish is the heap's top (the virtual time of fair queueing).
  struct FlowClass {
    const std::vector<int>* links = nullptr;
    double cap = 0;
    double served = 0;
    double rate = 0;          // B/s per flow
    std::vector<Flow> flows;  // a min-heap by (finish, seq)
  };
  struct ClassKey {
    const std::vector<int>* links;
    double cap;
    bool operator==(const ClassKey&) const = default;
  };
  struct ClassHash {
    std::size_t operator()(const ClassKey& k) const {
      return std::hash<const void*>()(k.links) ^ (std::hash<double>()(k.cap) << 1);
    }
  };
  void activate(Flow f);
  // Moves every class's served bytes on to now at its current rate.
  void advance();
  // Advances, finishes the flows that are done and runs their callbacks, then solve().
  void update();
  // Re-solves the rates of the flows in progress and schedules the next completion.
  void solve();

  EventKernel& kernel_;
  std::vector<double> capacity_;
  std::vector<FlowClass> classes_;  // slots; an emptied one is reused
  std::vector<int> live_;           // the classes with flows, in the order they got them
  std::unordered_map<ClassKey, int, ClassHash> class_index_;  // the classes with flows
  std::vector<int> free_classes_;                             // emptied slots, for reuse
  std::size_t active_ = 0;
  std::uint64_t seq_ = 0;
  std::map<Time, std::vector<Flow>> waiting_;  // in their latency, by activation time
  std::vector<std::vector<Flow>> spare_;       // emptied lists of waiting_, kept for their room
  std::vector<Flow> finished_;
  std::vector<std::pair<std::uint64_t, std::size_t>> finished_order_;  // (seq, index in finished_)
  std::set<std::vector<int>> routes_;
  Time last_ = 0;
  std::uint64_t generation_ = 0;  // completion events of an older solution are stale
  bool solve_pending_ = false;    // a solve is queued at the current instant
  bool in_callbacks_ = false;     // update() is running finished flows' callbacks
  MaxMinSolver solver_;
  // The solver's input: one entry per class with flows (solved_ names the class).
  std::vector<int> links_, weights_, solved_;
  std::vector<std::size_t> begin_;
  std::vector<double> caps_, rates_;
  std::vector<FlowObserver*> observers_;
};

// Link capacities: each link's bandwidth (B/s), by link id.
std::vector<double> link_capacities(const networks::Topology& topo);

// One collective's schedule executed on a flow network: each phase's steps in turn; a step
// waits the phase's latency, its transfers then start together (each after its route's latency
// in point-to-point phases), each at most at its cap, and the step ends when the last has
// arrived and its reduction is done. Identical repeated steps on an otherwise idle network take
// the time of the first (the network is then in the same state at every step start).
class CollectiveRun {
 public:
  CollectiveRun(EventKernel& kernel, FlowNetwork& net, const networks::Topology& topo,
                const hardware::TransportSpec& transport);
  // Runs `schedule` (which must outlive the run) and calls `done` at its end.
  void run(const networks::Schedule& schedule, std::function<void()> done);

 private:
  void start_phase();
  void start_step();
  void start_flows();
  void step_done();
  void step_end();

  // A transfer's route and its latency (per-hop latencies and the transport's message overhead
  // on the network), the same for every step between two vertices.
  struct Hop {
    const std::vector<int>* route = nullptr;
    double alpha = 0;  // s
    bool network = false;
  };
  const Hop& hop(const networks::Transfer& t);

  EventKernel& kernel_;
  FlowNetwork& net_;
  const networks::Topology& topo_;
  const hardware::TransportSpec& transport_;
  const networks::Schedule* schedule_ = nullptr;
  std::function<void()> done_;
  std::size_t phase_ = 0;
  std::int64_t step_ = 0;
  int pending_ = 0;
  Time step_start_ = 0;
  bool idle_at_start_ = false;
  Time step_latency_ = 0;  // a pipelined step's mean alpha, added when its flows are done
  std::map<std::tuple<int, int, int>, Hop> hops_;
  std::vector<int> route_;
};

}  // namespace dlsim::simulator
