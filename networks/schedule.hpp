#pragma once
// A collective as the simulator executes it: phases of point-to-point transfers between
// topology vertices, each phase a step that repeats. A step ends when its slowest transfer and
// the reduction of what it received are done (bulk-synchronous steps, as in the alpha-beta-gamma
// model of Thakur, Rabenseifner & Gropp 2005). Repeating identical steps are stored once, so a
// ring over n ranks costs O(n) memory, not O(n^2).

#include <cstdint>
#include <limits>
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
  // The most this transfer moves per second on its own (B/s): an NCCL channel's share of the
  // tuner's bandwidth, so that a collective on a quiet network takes NCCL's own time.
  double cap = std::numeric_limits<double>::infinity();
  // The receiving process's socket in a Phase::shared_receive phase: transfers with the same
  // socket (>= 0) share one connection's worth of the transport, whoever sends them.
  int socket = -1;
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
  // Latency of each step (s) before its bytes move. With `route_latency` (point-to-point
  // schedules) a transfer also waits the latencies of its route's links and, across nodes, the
  // transport's per-message overhead; NCCL's phases carry the tuner's whole latency here instead
  // (its table is the whole latency: docs/networks.md, "NCCL's choices").
  double latency = 0;
  bool route_latency = true;
  // true: every process receives through one socket (ps-lite over ZeroMQ): the transfers that
  // reach one Transfer::socket across the network move together at most the transport's
  // stream_bandwidth, however many peers send (zeromq/libzmq#3525; docs/networks.md,
  // "Transport ceilings").
  bool shared_receive = false;
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
  Seconds time;  // every phase
  std::vector<PhaseTime> phases;
};

// One transfer's cost within a step whose transfers share links: its alpha and its time on the
// wire (the bytes on its most loaded link over that link's bandwidth, or its bytes over its cap,
// whichever is longer), the most loaded link of its route (-1 for an empty route), and whether
// the cap bounds it.
struct TransferCost {
  double alpha = 0;  // s
  double wire = 0;   // s
  int link = -1;
  bool capped = false;
  bool socket = false;  // its receiving socket's stream bounds it (Phase::shared_receive)
  bool active() const { return link != -1; }
};

// Costs the transfers of one step at a time, reusing its per-link load buffer.
class StepCoster {
 public:
  StepCoster(const Topology& topo, const hardware::TransportSpec& transport);
  // One entry per transfer of `phase`, in order.
  const std::vector<TransferCost>& costs(const Phase& phase);

 private:
  const Topology& topo_;
  const hardware::TransportSpec& transport_;
  std::vector<double> load_;         // bytes per link, zero outside costs()
  std::vector<double> socket_load_;  // network bytes per receiving socket (shared_receive)
  std::vector<int> touched_, routes_, route_;
  std::vector<std::size_t> begin_;
  std::vector<TransferCost> out_;
};

// Runs `schedule` on `topo` with network transport `transport`. A transfer's time in a step is
//   latency + alpha + max(bytes sharing its most loaded link / that link's bandwidth,
//                         bytes / its cap, bytes into its receiving socket / stream_bandwidth,
//                         reduction)
// where alpha = the latencies along its route + the transport's per-message overhead if it
// crosses the network (point-to-point phases only); a cloud network's per-flow cap bounds one
// flow. docs/networks.md, "Executing a schedule".
Execution execute(const Schedule& schedule, const Topology& topo,
                  const hardware::TransportSpec& transport);

}  // namespace dlsim::networks
