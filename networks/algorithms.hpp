#pragma once
// Shared pieces of the collective algorithms (internal to dlsim::networks).

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "networks/collective.hpp"

namespace dlsim::networks::detail {

void register_nccl(AlgorithmRegistry& r);  // auto, ring, tree, nvls
void register_halving_doubling(AlgorithmRegistry& r);
void register_hierarchical(AlgorithmRegistry& r);
void register_parameter_server(AlgorithmRegistry& r);

// Ring orders over ranks, one per channel (NCCL's rings). Inside a node the builder looks for
// edge-disjoint directed Hamiltonian cycles over NVLink lanes, one lane per ring and direction,
// up to `max_channels`; without one it falls back to rank order over whatever links route it.
// Across nodes each channel enters and leaves every node once, through NIC `channel`.
struct Rings {
  std::vector<std::vector<int>> orders;  // orders[channel] = ranks in ring order
  int channels() const { return static_cast<int>(orders.size()); }
};
Rings build_rings(const Communicator& comm, int max_channels);

// Directed Hamiltonian cycles over the ranks of one node (indices into `ranks`) on direct NVLink
// lanes, each lane carrying one ring per direction: for each candidate first cycle, the others
// are added greedily in enumeration order; the largest set wins (the first found among equals).
// Empty when NVLink has none (NVSwitch nodes route every pair through the switch).
std::vector<std::vector<int>> nvlink_cycles(const Communicator& comm, const std::vector<int>& ranks,
                                            int max_channels);

// Per channel, an order of the node's ranks (indices into `ranks`) along direct NVLink lanes
// that starts at one of ends[c] and ends at the other (a Hamiltonian path closed by one lane,
// as NCCL's search threads a ring through a node between the GPUs next to its NIC); channels on
// lanes of their own where a choice allows it. Empty for a channel without such a path.
std::vector<std::vector<int>> nvlink_paths(const Communicator& comm, const std::vector<int>& ranks,
                                           const std::vector<std::pair<int, int>>& ends);

// Ring rank orders restricted to the given ranks of one node (intra-node rings).
Rings build_node_rings(const Communicator& comm, const std::vector<int>& ranks, int max_channels);

// One transfer per ring hop and channel: order[i] -> order[i+1] (closing the ring if `closed`).
Phase ring_phase(const Communicator& comm, const Rings& rings, double bytes, bool closed);

// An MPI library's ring (and all-to-all by pairwise shifts): what `auto` and `ring` run when the
// library is not NCCL (networks/algo_ring.cpp).
std::unique_ptr<CollectiveAlgorithm> make_mpi_ring();
// All-to-all as n-1 pairwise shifts (the schedule NCCL's and MPI's all-to-all both run).
Schedule shifts_schedule(const CollectiveRequest& req, const Communicator& comm);

// Memory bandwidth of the GPUs doing reductions (the job's first GPU type).
Bandwidth gpu_memory_bandwidth(const Communicator& comm);
using networks::ps_server_traffic;
using networks::reduce_traffic;

// A point-to-point schedule's cost: `c.time` the closed form of `algo`'s schedule for `req`,
// `c.latency` the same collective's at one byte (its size-independent part).
void schedule_cost(const CollectiveAlgorithm& algo, const CollectiveRequest& req,
                   const Communicator& comm, CollectiveCost& c);

// Pipeline segments: `bytes` cut into `segment`-sized pieces (at least one).
std::int64_t chunks(double bytes, Bytes segment);

}  // namespace dlsim::networks::detail
