#pragma once
// Collective operations and the algorithms that implement them. Each algorithm is a plug-in
// registered by name that gives (a) a schedule the simulator executes on the topology and
// (b) its closed-form alpha-beta-gamma cost with the citation (docs/networks.md). The closed
// form assumes every transfer has its route to itself; execution on the real topology adds the
// sharing of links, so the two agree exactly on an uncontended topology (tested).

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

// Where parameter servers run and how tensors are spread over them.
struct PsOptions {
  int servers = 1;
  bool colocated = false;          // on the workers' nodes (server s on the job's node s mod N)
  bool on_gpu = false;             // aggregate on a GPU instead of the host CPU
  std::string sharding = "split";  // split | round_robin | greedy
  std::vector<double> tensors;     // tensor sizes in bytes for round_robin/greedy (default: one)
  int server_offset = 0;           // round_robin: tensor i goes to server (offset + i) mod S
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
};
Communicator make_communicator(const Topology& topo, const Placement& placement,
                               std::vector<int> server_slots = {});

// Alpha and beta of one step of `phase` with no traffic but its own (the single-port model):
// alpha is the largest route alpha; beta the largest per-byte time of a transfer when the
// step's transfers that share a link divide it (docs/networks.md, "Link sharing factor L").
// `wire` is the longest transfer time of the step without alpha.
struct StepCost {
  double alpha = 0;  // s
  double beta = 0;   // s/B, including the sharing factor
  double wire = 0;   // s
};
StepCost step_cost(const Communicator& comm, const Phase& phase,
                   const hardware::ProtocolSpec& proto);

// The closed-form time of a schedule: base latency plus, per phase, its steps x (alpha + the
// longer of wire time and reduction), or wire time then reduction where they do not overlap,
// with alpha and wire from step_cost().
Seconds closed_form_time(const Communicator& comm, const Schedule& schedule,
                         const hardware::ProtocolSpec& proto);

struct ClosedForm {
  Seconds time;
  std::string formula;  // the expression with its symbols, as docs/networks.md writes it
};

class CollectiveAlgorithm {
 public:
  virtual ~CollectiveAlgorithm() = default;
  virtual bool supports(CollectiveOp op) const = 0;
  // Throws InputError when the request does not fit (e.g. hierarchical with uneven nodes).
  virtual Schedule schedule(const CollectiveRequest& req, const Communicator& comm,
                            const hardware::ProtocolSpec& proto) const = 0;
  virtual ClosedForm closed_form(const CollectiveRequest& req, const Communicator& comm,
                                 const hardware::ProtocolSpec& proto) const = 0;
};
using AlgorithmRegistry = Registry<CollectiveAlgorithm>;
const AlgorithmRegistry& collective_algorithms();

// One collective, costed with every protocol of the library; the fastest wins, as NCCL's tuner
// picks a protocol per message size.
struct CollectiveResult {
  std::string protocol;
  Seconds time;        // executed on the topology
  Seconds model_time;  // the closed form
  std::string formula;
  double algbw = 0;  // B/s: size / time
  double busbw = 0;  // B/s: algbw x busbw_factor
  Execution execution;
  int channels = 1;
  std::int64_t steps = 0;
};
CollectiveResult run_collective(const CollectiveRequest& req, const Communicator& comm,
                                const std::string& algorithm);

}  // namespace dlsim::networks
