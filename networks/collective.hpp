#pragma once
// Collective operations and the algorithms that implement them. Each algorithm is a plug-in
// registered by name that gives (a) its cost on a quiet network with the citation
// (docs/networks.md): NCCL's own tuning model for NCCL's algorithms, the alpha-beta-gamma closed
// form of a point-to-point schedule otherwise; and (b) a schedule the simulator executes on the
// topology, sharing links with whatever else is in flight. The two agree on a quiet network
// (tested). `auto` is what the library would pick: NCCL's tuner, or MPI's ring.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/collective_op.hpp"
#include "common/registry.hpp"
#include "hardware/profile.hpp"
#include "networks/placement.hpp"
#include "networks/schedule.hpp"
#include "networks/topology.hpp"

namespace dlsim::networks {

// The operations and nccl-tests' bus-bandwidth factor live in common/ (calibrate uses them too).
using dlsim::all_ops;
using dlsim::busbw_factor;
using dlsim::CollectiveOp;
using dlsim::parse_op;
using dlsim::to_string;

// Where a node's gradients are summed before one push per node (TensorFlow's distributed
// modes on one of the node's GPUs, MXNet dist_sync on the host CPU), or not at all (every GPU
// pushes its own).
enum class PsAggregation { kNone, kHost, kGpu };

// Where parameter servers run and how tensors are spread over them.
struct PsOptions {
  int servers = 1;
  bool colocated = false;          // on the workers' nodes (server s on the job's node s mod N)
  bool on_gpu = false;             // aggregate on a GPU instead of the host CPU
  std::string sharding = "split";  // split | round_robin | greedy
  std::vector<double> tensors;     // tensor sizes in bytes for round_robin/greedy (default: one)
  int server_offset = 0;           // round_robin: tensor i goes to server (offset + i) mod S
  PsAggregation aggregation = PsAggregation::kNone;
  int variable = 0;  // the exchanged variable's creation index (which GPU aggregates it)
  // One connection per worker and server that carries one message at a time, in the order sent
  // (ps-lite's ZeroMQ sockets, BytePS): a later push to the same server waits for the earlier
  // one, so early partitions come back while later ones are still going out. Otherwise every
  // message in flight shares the link at once (gRPC's multiplexed streams).
  bool ordered = false;
  // Every server and worker process receives through one socket (ps-lite's ZeroMQ van): over
  // TCP, all that reaches one process moves at most one stream's worth, however many peers
  // send (zeromq/libzmq#3525). Nothing changes where the transport has no stream_bandwidth
  // (RDMA).
  bool shared_receive = false;
  // Each push is applied to the server's variable as it arrives and the new value sent back to
  // that pusher at once (between-graph replication: TensorFlow's distributed modes, where every
  // worker runs its own apply op on the server). Otherwise the server waits for every push,
  // sums them, and answers all pushers together.
  bool apply_each = false;
  // The node's GPUs sum each tensor with the collective library before the push and spread the
  // pulled value with it (BytePS: NCCL reduce-scatter and all-gather inside the machine). Where
  // NCCL's ring of the node goes through host memory, both take their turn on the node's SHM
  // transport (HostSpec::shm_bandwidth, docs/networks.md "BytePS").
  bool library_in_node = false;
};

// Bytes each of the `ps.servers` servers holds of an exchange of `bytes` (or of `ps.tensors`),
// by `ps.sharding` (docs/networks.md, "Parameter server"); an unknown sharding is an InputError.
std::vector<double> ps_shard_bytes(const PsOptions& ps, double bytes);

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  // nccl-tests' size: the buffer each rank holds (allreduce, broadcast, reduce), the whole
  // gathered buffer (allgather, reducescatter), or each rank's send buffer (alltoall).
  Bytes size;
  int root = 0;  // broadcast and reduce
  PsOptions ps;
  // GPUs one host thread drives (nccl-tests -g): it launches their kernels one after another,
  // so the collective starts G kernel launches late (1: a thread, or a process, per GPU).
  int gpus_per_thread = 1;
};

// The ranks of a job on a topology.
struct Communicator {
  const Topology* topo = nullptr;
  const hardware::LibrarySpec* library = nullptr;
  std::vector<int> rank_vertex;   // GPU vertex of each rank
  std::vector<int> rank_slot;     // node slot of each rank
  std::vector<int> server_slots;  // node slots kept for dedicated parameter servers
  int size() const { return static_cast<int>(rank_vertex.size()); }
  int node_count() const;  // slots holding ranks
  // Ranks grouped by node slot, in rank order.
  std::vector<std::vector<int>> ranks_by_node() const;
  // The communicator of some of these ranks (in the order given), as NCCL's ncclCommSplit.
  Communicator subset(const std::vector<int>& ranks) const;
};
Communicator make_communicator(const Topology& topo, const Placement& placement,
                               std::vector<int> server_slots = {});

// What one collective costs on a quiet network, and why: the closed form the analytic engine
// uses, and for NCCL its tuner's choice (docs/networks.md).
struct CollectiveCost {
  std::string algorithm;  // ring, tree, nvls, hd, hierarchical, ps
  std::string protocol;   // NCCL's LL, LL128 or Simple; empty for point-to-point schedules
  int channels = 1;       // NCCL: channels its kernel runs at this size
  Seconds time;           // on a quiet network
  Seconds latency;        // the size-independent part
  double bus_bw = 0;      // B/s: NCCL's busBw for the choice (0 for point-to-point schedules)
  std::string formula;    // the expression with its symbols, as docs/networks.md writes it
  std::string why;        // the choice in words (NCCL's table, the graph it searched)
};

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  virtual bool supports(CollectiveOp op, const hardware::LibrarySpec& library) const = 0;
  // Both throw InputError when the request does not fit (e.g. hierarchical with uneven nodes).
  virtual CollectiveCost cost(const CollectiveRequest& req, const Communicator& comm) const = 0;
  // What the simulator executes; on a quiet network it takes cost().time (tested).
  virtual Schedule schedule(const CollectiveRequest& req, const Communicator& comm) const = 0;
};
using AlgorithmRegistry = Registry<CollectiveAlgorithm>;
const AlgorithmRegistry& collective_algorithms();
// The algorithms that can run `op` with `library`, for messages.
std::vector<std::string> algorithms_for(CollectiveOp op, const hardware::LibrarySpec& library);

// The closed-form time of a point-to-point schedule: per phase, its steps x (latency + alpha +
// the longer of wire time and reduction), or wire time then reduction where they do not overlap,
// each step's alpha and wire from its transfers sharing links among themselves.
Seconds closed_form_time(const Communicator& comm, const Schedule& schedule);

// Memory traffic of reducing `operands` received buffers of `bytes` into a local one: each
// operand read, the local buffer read and the result written.
constexpr double reduce_traffic(double bytes, int operands = 1) { return (operands + 2) * bytes; }
// A server's memory traffic for a shard of `shard` bytes pushed by `pushers`: one sum of all the
// pushes, (W + 2) S_s, or W applies of one push each, 3 W S_s (PsOptions::apply_each).
constexpr double ps_server_traffic(bool apply_each, double shard, int pushers) {
  return apply_each ? pushers * reduce_traffic(shard) : reduce_traffic(shard, pushers);
}

// A parameter server of an exchange: the vertex that sums (a host's CPU or a GPU), the
// bandwidth of the memory it sums in, and the bytes of the exchange it holds.
struct PsServer {
  int vertex = 0;
  Bandwidth memory;
  double bytes = 0;
};
// The servers of `req` on `comm` (colocated on the workers' nodes in turn, or the dedicated
// nodes), with their shards; InputError when dedicated servers lack nodes.
std::vector<PsServer> ps_servers(const CollectiveRequest& req, const Communicator& comm);
// Where one node's gradients are summed before the push (`vertex`, summing in `memory`), and
// where the pulled parameters land before they are copied to each GPU (`pull_vertex`: the host).
struct PsAggregator {
  int vertex = 0;
  int pull_vertex = 0;
  Bandwidth memory;
};
PsAggregator ps_aggregator(const PsOptions& ps, const Communicator& comm,
                           const std::vector<int>& ranks);

// One collective on a quiet network: its cost and its schedule executed on the topology.
struct CollectiveResult {
  CollectiveCost cost;
  Seconds time;      // executed on the topology
  double algbw = 0;  // B/s: size / time
  double busbw = 0;  // B/s: algbw x busbw_factor
  Execution execution;
  std::int64_t steps = 0;
};
CollectiveResult run_collective(const CollectiveRequest& req, const Communicator& comm,
                                const std::string& algorithm);

}  // namespace dlsim::networks
