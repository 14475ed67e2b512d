#pragma once
// The training-step engines. Both take the same resolved setup and report the same spans to
// observers: `des` executes the step event by event (per-GPU compute streams with seeded
// stragglers, the framework's launcher, collectives as max-min fair flows on the topology);
// `analytic` computes it in closed form (expected slowest GPU, collective closed forms) for
// sweeps. docs/simulator.md, "Engines".

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "hardware/profile.hpp"
#include "networks/collective.hpp"
#include "networks/placement.hpp"
#include "networks/topology.hpp"
#include "simulator/compute.hpp"
#include "simulator/framework.hpp"
#include "simulator/observer.hpp"

namespace dlsim::simulator {

class FlowObserver;

struct StepSetup {
  const hardware::ClusterSpec* cluster = nullptr;
  const hardware::GpuSpec* gpu = nullptr;  // of the job's first node
  ComputeProfile compute;
  std::unique_ptr<networks::Topology> topo;
  networks::Communicator comm;
  const FrameworkPolicy* policy = nullptr;
  ResolvedPolicy resolved;
  JobInfo job;
  int iterations = 1;
  std::uint64_t seed = 1;
  // Wait-free backpropagation: a gradient may be exchanged as soon as it is produced. Without
  // it (bulk-synchronous, "BSP"), every exchange waits for the end of the backward pass.
  bool overlap = true;
  // Both engines' parameter-server exchanges of one worker node stand for every node's where
  // the nodes are alike (PredictOptions::mirror_nodes).
  bool mirror_nodes = true;
  // By rank, its speed relative to the GPU profile's (PredictOptions::gpu_speed); empty: every
  // rank at the profile's speed.
  std::vector<double> rank_speed;
  // By rank, the least time (s) between the starts of two of its steps that its node's input
  // pipeline allows: the node's GPUs' samples of a step over the pipeline's rate
  // (PredictOptions::input_rate; docs/simulator.md, "Input pipeline"); empty: no bound.
  std::vector<double> input_interval;
};

// GPU memory traffic of an NCCL kernel per byte it sends: the received copy written and read
// back, the user's buffers read and written (NVIDIA/nccl#1428, "can be 3x").
inline constexpr double kNcclMemoryPerBusByte = 3.0;

// Groups with the same size and parameter-server layout cost the same.
using GroupKey = std::tuple<double, int, std::string>;
inline GroupKey group_key(const CommGroup& g) {
  return {g.bytes, g.ps.server_offset, g.ps.sharding};
}

// The fraction of a rank's communication CPU time that must come from its compute's cores:
// 1 - spare / R for R ranks of T threads on C cores (spare = C - R T), clamped to [0, 1]; the
// most of any node of the job; 0 for a library with no host CPU work (docs/simulator.md,
// "Shared cores").
double shared_cores(const StepSetup& setup);

// The collectives of a step: each group's cost on a quiet network (NCCL's choice, or a
// point-to-point closed form) and its schedule, from the strategy's algorithm.
class CollectivePlanner {
 public:
  explicit CollectivePlanner(const StepSetup& setup);
  // Cached by size and parameter-server layout; the reference stays valid.
  const networks::CollectiveCost& plan(const CommGroup& group);
  // The plan's schedule, built on demand: a schedule lists every transfer of a step (thousands
  // at scale), too many to keep for each of a step's group sizes.
  networks::Schedule schedule(const CommGroup& group);
  // The same on `comm` (a part of the job's communicator).
  networks::Schedule schedule(const CommGroup& group, const networks::Communicator& comm);
  // Memory-bound copy of `bytes` on a GPU (read and write).
  Seconds copy_time(double bytes) const;
  // The copies before and after `group`'s collective: into and out of the fusion buffer in GPU
  // memory where the group has one, with the compression's kernels; with host staging (Horovod's
  // allreduce in host memory) the copy of every GPU's buffer to its host, and back, over the node's
  // PCIe paths at once (docs/simulator.md, "horovod").
  Seconds copy_in_time(const CommGroup& group);
  Seconds copy_out_time(const CommGroup& group);
  networks::CollectiveRequest request(const CommGroup& group) const;
  // The compute time each rank loses to the library's host CPU work for `group` while it
  // computes: shared_cores(setup) x (cpu_per_call + cpu_per_byte x bytes) (docs/simulator.md,
  // "Shared cores"). Zero for NCCL and wherever the nodes have a core to spare per rank.
  Seconds compute_steal(const CommGroup& group) const;
  // Of that, what a collective starting `to_end` before the end of backward takes from it. Beside
  // compute it does all its work in D + W (its planned time and full_core_wait), so it takes a
  // share r = c / (D + W) of the cores while both run, charged by compute_lost
  // (docs/simulator.md, "Shared cores").
  Time host_cpu_lost(const CommGroup& group, Time to_end);
  // W: how much longer the collective takes beside a thread that computes all along, on shared
  // cores: shared_cores(setup) x (wait_per_call + wait_per_byte x bytes).
  Time full_core_wait(const CommGroup& group) const;
  // How much later the same collective ends when it starts `to_end` before its ranks' end of
  // backward: it runs at D / (D + W) of its pace while backward lasts and at full pace after:
  // min(W, to_end x W / (D + W)) (docs/simulator.md, "Shared cores"). 0 for to_end <= 0.
  Time core_wait(const CommGroup& group, Time to_end);
  // The share of a GPU's compute that `group`'s NCCL kernel takes while both run
  // (docs/simulator.md, "NCCL on the compute's SMs"): its channels' SMs from the arithmetic-bound
  // kernels, and its memory traffic, 3 x the bus bytes over its quiet time, from the
  // memory-bound ones, weighted by their shares of backward. 0 for a library without GPU
  // kernels and for parameter servers.
  double compute_share(const CommGroup& group);
  // The compute that share r takes from a backward pass that would end `to_end` after the
  // collective starts, the collective taking `duration`: L = r (min(duration, to_end + L)),
  // i.e. r to_end / (1 - r) where backward still ends before the collective, else r duration
  // (docs/simulator.md, "NCCL on the compute's SMs"). Any time unit.
  static double compute_lost(double r, double to_end, double duration);

 private:
  const StepSetup& setup_;
  double shared_ = 0;
  std::unique_ptr<networks::CollectiveAlgorithm> algorithm_;
  std::map<GroupKey, std::unique_ptr<networks::CollectiveCost>> cache_;
  // Host staging: the time to copy a node's buffers of each size to the host (or back).
  Seconds staging_time(double bytes, bool to_host);
  // A buffer's copy (if `copy`) and the group's extra kernels on that side (compression).
  Seconds copies_time(const CommGroup& group, bool copy, const std::vector<double>& kernels) const;
  std::map<std::pair<double, bool>, Seconds> staging_;
};

// A small allreduce's time on the job (Horovod's negotiation over MPI: recursive doubling).
Seconds small_allreduce_time(const networks::Communicator& comm, Bytes bytes);
// A small broadcast's time on the job from rank 0 (a binomial tree: ceil(log2 p) rounds).
Seconds small_broadcast_time(const networks::Communicator& comm, Bytes bytes);

struct EngineRun {
  std::uint64_t events = 0;  // DES only
  // The worker nodes node 0's parameter-server exchanges stood for (1: each its own).
  int mirrored_nodes = 1;
};

// Parameter servers, one worker node for all (docs/simulator.md, "One worker node for all"):
// where the job's W worker nodes are alike and reach the dedicated servers only over their own
// links, the servers' links, and switch-to-switch links that cannot bind, node 0's exchanges
// stand for every node's, with each server-side link and server socket shared W ways.
class NodeMirror {
 public:
  // Decides for the job from its first exchange: `ps` its options, `servers` its servers,
  // `nodes` the communicator's ranks by node.
  NodeMirror(const StepSetup& setup, const networks::PsOptions& ps,
             const std::vector<networks::PsServer>& servers,
             const std::vector<std::vector<int>>& nodes);
  // The worker nodes node 0 stands for; 1 where every node is its own.
  int nodes() const { return nodes_; }
  // How many of node 0's copies a link of node 0's routes carries: W for a server-side link
  // (one that ends in a node kept for the servers), 0 for a link between two network switches
  // (left out: none on these routes can bind), 1 for node 0's own.
  int copies(int link) const;

 private:
  bool server_link(int link) const;
  bool fabric_link(int link) const;
  bool never_binds(int link) const;
  const networks::Topology& topo_;
  mutable std::unordered_map<int, bool> never_binds_;  // by link
  int nodes_ = 1;
  std::vector<char> server_slot_;  // by node slot
};

// Stragglers (docs/simulator.md): E[max of n standard normals] by Blom's approximation,
// Phi^-1((n - 0.375) / (n + 0.25)); 0 for n <= 1.
double expected_max_normal(int n);
// Each of n GPUs' standard score of its own speed: the expected normal order statistics by
// Blom's approximation, Phi^-1((k - 0.375) / (n + 0.25)) for k = 1..n, dealt to the ranks in an
// order drawn from `seed` (a Fisher-Yates shuffle on mt19937_64); all 0 for n <= 1.
std::vector<double> gpu_speed_scores(int n, std::uint64_t seed);
// The factor every GPU of the analytic engine computes at: 1 + sqrt(spread^2 + jitter^2) x
// E[max of n standard normals], the expected slowest of n GPUs whose speed varies by
// `speed_spread` from GPU to GPU and by `step_jitter` from step to step.
double expected_straggler_factor(const hardware::GpuSpec& gpu, int n);
// The same with the ranks' own speeds (StepSetup::rank_speed): the slowest rank's 1 / speed
// where that exceeds the expected largest of the others' factors.
double expected_straggler_factor(const StepSetup& setup);

// `flow_observer` (may be null) sees every flow of the DES.
EngineRun run_des(const StepSetup& setup, const Observers& observers,
                  FlowObserver* flow_observer = nullptr);
EngineRun run_analytic(const StepSetup& setup, const Observers& observers);

}  // namespace dlsim::simulator
