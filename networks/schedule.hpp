#pragma once
// A collective as the simulator executes it: phases of point-to-point transfers between
// topology vertices, each phase a step that repeats. A step ends when its slowest transfer and
// the reduction of what it received are done (bulk-synchronous steps, as in the alpha-beta-gamma
// model of Thakur, Rabenseifner & Gropp 2005). Repeating identical steps are stored once, so a
// ring over n ranks costs O(n) memory, not O(n^2).

#include <cstdint>
#include <string>
#include <vector>

#include "common/units.hpp"
#include "hardware/profile.hpp"
#include "networks/topology.hpp"

namespace dlsim::networks {

struct Transfer {
  int src = 0;  // topology vertices
  int dst = 0;
  double bytes = 0;
  int rail = -1;  // NIC index when the route leaves the node (-1: the nearest NIC)
};

struct Phase {
  std::string label;
  std::vector<Transfer> transfers;  // concurrent within one step
  std::int64_t repeat = 1;          // identical steps in a row
  // Reduction per step by each receiving rank: memory traffic in bytes (reading two operands
  // and writing one: 3x the bytes received) and the bandwidth of the memory doing it.
  double reduce_bytes = 0;
  Bandwidth reduce_bandwidth{1};
  // true: the reduction is fused with the copy and overlaps it (NCCL's kernels); false: it
  // starts when the step's data has arrived (a parameter server summing in host memory).
  bool overlap_reduce = true;
  // true: consecutive steps chain through ring neighbours and chunks pipeline around the ring
  // (NCCL rings), so a step adds the mean of its transfers' alpha, not the largest: the last
  // chunk's path crosses each hop in turn, network hops and intra-node hops alike
  // (docs/networks.md, "Pipelined ring latency").
  bool pipelined = false;
};

struct Schedule {
  std::string algorithm;
  int channels = 1;
  std::vector<Phase> phases;
  std::int64_t steps() const;
};

struct PhaseTime {
  std::string label;
  std::int64_t steps = 0;
  Seconds step_time;       // one step
  Seconds time;            // step_time x steps
  std::string bottleneck;  // the link that bounds the slowest transfer, or "latency"/"reduction"
};

struct Execution {
  Seconds time;  // protocol base latency + every phase
  std::vector<PhaseTime> phases;
};

// One transfer's cost within a step whose transfers share links: the alpha of its route and its
// time on the wire (the bytes on its most loaded link over that link's bandwidth, or the
// per-flow cap), and what bounds it (a link id, kCapped, or -1 for an empty route).
struct TransferCost {
  static constexpr int kCapped = -2;
  double alpha = 0;  // s
  double wire = 0;   // s
  int bottleneck = -1;
  bool active() const { return bottleneck != -1; }
};

// Costs the transfers of one step at a time, reusing its per-link load buffer.
class StepCoster {
 public:
  StepCoster(const Topology& topo, const hardware::ProtocolSpec& proto,
             const hardware::TransportSpec& transport);
  // One entry per transfer of `phase`, in order.
  const std::vector<TransferCost>& costs(const Phase& phase);

 private:
  const Topology& topo_;
  const hardware::ProtocolSpec& proto_;
  const hardware::TransportSpec& transport_;
  std::vector<double> load_;  // bytes per link, zero outside costs()
  std::vector<int> touched_, routes_, route_;
  std::vector<std::size_t> begin_;
  std::vector<TransferCost> out_;
};

// Runs `schedule` on `topo` with protocol `proto` and network transport `transport`.
// A transfer's time in a step is
//   alpha + max(bytes sharing its most loaded link / that link's bandwidth, reduction)
// where alpha = the latencies along its route + the protocol's per-step latency for the route's
// class + the transport's per-message overhead if it crosses the network; every bandwidth is
// scaled by the protocol's bandwidth fraction; a cloud network's per-flow cap bounds one flow.
// docs/networks.md, "Executing a schedule".
Execution execute(const Schedule& schedule, const Topology& topo,
                  const hardware::ProtocolSpec& proto, const hardware::TransportSpec& transport);

}  // namespace dlsim::networks
