#pragma once
// Shared pieces of the collective algorithms (internal to dlsim::networks).

#include <vector>

#include "networks/collective.hpp"

namespace dlsim::networks::detail {

void register_ring(AlgorithmRegistry& r);
void register_tree(AlgorithmRegistry& r);
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

// Ring rank orders restricted to the given ranks of one node (intra-node rings).
Rings build_node_rings(const Communicator& comm, const std::vector<int>& ranks, int max_channels);

// One transfer per ring hop and channel: order[i] -> order[i+1] (closing the ring if `closed`).
Phase ring_phase(const Communicator& comm, const Rings& rings, double bytes, bool closed);

// Alpha and beta (with its sharing factor) of one ring step, for closed forms.
StepCost ring_step_cost(const Communicator& comm, const Rings& rings,
                        const hardware::ProtocolSpec& proto);

// Memory bandwidth of the GPUs doing reductions (the job's first GPU type).
Bandwidth gpu_memory_bandwidth(const Communicator& comm);
// Memory traffic of reducing `operands` received buffers of `bytes` into a local one.
constexpr double reduce_traffic(double bytes, int operands = 1) { return (operands + 2) * bytes; }

// Pipeline chunks: data of `bytes` per channel cut into protocol-sized chunks (at least one).
std::int64_t chunks(double bytes, const hardware::ProtocolSpec& proto);

}  // namespace dlsim::networks::detail
