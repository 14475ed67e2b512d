#pragma once
// NCCL's choices for one communicator (docs/networks.md, "NCCL's choices"): what its topology
// search finds (channels, the bandwidth of each inside and between nodes, the GPUs that enter
// and leave a node next to each NIC), and what its tuner picks for a collective of a given size
// (algorithm, protocol, channels) from the latency and bandwidth tables of the library preset's
// release (hardware::TunerSpec). NVIDIA/nccl src/graph/search.cc and src/graph/tuning.cc; every
// rule cites its release in the preset's `source` and in docs/networks.md.

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "common/collective_op.hpp"
#include "hardware/profile.hpp"

namespace dlsim::networks {

struct Communicator;

// NCCL's path types, best first (src/graph/topo.h): through NVLink directly or via an NVSwitch,
// through one PCIe switch, several, via a peer GPU's NVLink (PXN), through a CPU host bridge,
// across CPU sockets, over the network.
enum class PathType { kLoc, kNvl, kNvb, kPix, kPxb, kPxn, kPhb, kSys, kNet };
std::string_view to_string(PathType t);

// One algorithm's graph: channels and per-channel bandwidth, as ncclTopoCompute leaves them.
struct NcclGraph {
  int channels = 0;     // search channels
  double bw_intra = 0;  // B/s per channel inside a node
  double bw_inter = 0;  // B/s per channel between nodes (0 on one node)
  PathType type_intra = PathType::kLoc;
  PathType type_inter = PathType::kLoc;
  // Ring channels: the ranks in ring order, and the NIC each channel uses on every node.
  std::vector<std::vector<int>> rings;
  std::vector<int> rail;
};

// What the search finds for a communicator.
struct NcclTopology {
  int ranks = 0, nodes = 0;
  int ppn = 0;                 // GPUs per node (the largest)
  int cc_min = 0, cc_max = 0;  // compute capabilities x 10
  bool amd = false;            // the first node's CPU vendor (NCCL's llMaxBws rows, overheads)
  bool nvls = false;           // NVLink SHARP available (Hopper GPUs on one NVSwitch node)
  NcclGraph ring, tree, nvls_graph;
  std::string summary;  // how the channels came out, in words
  // B/s, 0 for none: the most one rank moves between nodes over the transport
  // (Topology::per_flow_cap): its proxy thread drives its sockets, one stream's worth.
  double flow_cap = 0;
  // B/s, 0 for none: the SHM transport's rate where a node's ring goes through host memory
  // (HostSpec::shm_bandwidth), the least over the job's nodes.
  double shm_cap = 0;
  // Per hop of the first ring (ring.rings.front()[i] to the next): whether it goes through host
  // memory at that rate; empty where no hop does.
  std::vector<bool> shm_hops;
};

// Runs the search; deterministic, and cheap enough to run once per communicator.
NcclTopology nccl_search(const Communicator& comm);

// B/s, 0 for none: the SHM transport's rate (HostSpec::shm_bandwidth, measured with both
// directions busy) where NCCL's ring over `ranks`, GPUs of one node in rank order, goes through
// host memory because two neighbours are beyond the node's peer-to-peer level. Every NCCL
// collective of the node's GPUs shares it.
double node_shm_rate(const Communicator& comm, const std::vector<int>& ranks);

// One (algorithm, protocol) of the tuner's cost table for a collective of `bytes`.
struct NcclCost {
  std::string algorithm;  // ring, tree, nvls
  std::string protocol;   // LL, LL128, Simple
  bool enabled = false;
  std::string why_not;  // when not enabled
  double latency = 0;   // s
  double bus_bw = 0;    // B/s, NCCL's busBw after its factors and caps
  // B/s: the busBw of the channels themselves, before a cap on the whole collective (LL's
  // llMaxBw); equal to bus_bw where no such cap binds.
  double channel_bus_bw = 0;
  double alg_bw = 0;  // B/s, busBw x the algorithm's ratio (and the tree's size correction)
  double time = 0;    // s: latency + bytes / alg_bw
  int channels = 0;   // search channels of the algorithm's graph
};

// The tuner's choice: the cheapest enabled entry of the table (or of `algorithm` when forced),
// and the channels its kernel runs at this size (fewer for small messages: enqueue.cc).
struct NcclChoice {
  NcclCost best;
  std::vector<NcclCost> table;  // every (algorithm, protocol) of the release, in order
  int runtime_channels = 0;     // ncclTopoPostset's channels
  int launched_channels = 0;    // after the small-message reduction
  double alg_bw = 0;  // B/s: best.alg_bw, its channels' rate x launched / runtime channels
  double time = 0;    // best.latency + bytes / alg_bw (s)
  bool transport_bound = false;  // alg_bw lowered to the graph's rings x NcclTopology::flow_cap
  bool shm_bound = false;        // bus bandwidth lowered to NcclTopology::shm_cap
};

// Throws InputError when `algorithm` is forced but not offered, or cannot run `op`.
NcclChoice nccl_tune(const hardware::LibrarySpec& library, const NcclTopology& topo,
                     CollectiveOp op, double bytes, const std::string& algorithm = "",
                     int root = -1);

}  // namespace dlsim::networks
