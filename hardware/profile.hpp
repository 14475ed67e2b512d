#pragma once
// Hardware profiles: what a GPU can compute, how a node's GPUs, host bridges and NICs are wired,
// what the cluster network is, and the per-protocol constants of the collective library.
// Read from YAML (docs/hardware-format.md); every quantity carries its unit in its type.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/precision.hpp"
#include "common/units.hpp"

namespace dlsim::hardware {

// Where a profile came from, for messages and `dlsim hardware show`.
struct Provenance {
  std::string name;
  std::string description;
  std::string source;  // the cited origin of the figures
  std::string file;    // repository path of a preset, or the user's file
};

// Achieved fraction of peak for an operation of size x: e(x) = max * x / (x + half).
// Rises from 0 for tiny kernels and approaches `max` for large ones (docs/hardware.md).
struct EfficiencyCurve {
  double max = 1.0;
  double half = 0.0;  // x at which e = max / 2; FLOP for compute curves, bytes for memory
  double at(double x) const { return x <= 0 ? 0.0 : max * x / (x + half); }
};

struct GpuSpec {
  Provenance about;
  std::map<std::string, FlopRate> peak;  // dense peak by precision: fp64, fp32, tf32, fp16, bf16
  Bytes memory_capacity;
  Bandwidth memory_bandwidth;
  std::string efficiency_source;
  EfficiencyCurve gemm;    // x in FLOP
  EfficiencyCurve conv;    // x in FLOP
  EfficiencyCurve memory;  // x in bytes moved; fraction of memory_bandwidth
  Seconds kernel_launch;
  // Coefficient of variation of one GPU's compute time from step to step (stragglers): a step's
  // compute is scaled by 1 + step_jitter x z, z standard normal (docs/simulator.md).
  double step_jitter = 0;

  // Peak for arithmetic in `p` (fp16/bf16 fall back to fp32 where the GPU lacks them).
  FlopRate peak_for(Precision p) const;
};

struct HostSpec {
  std::string cpu;
  int sockets = 1;
  int cores = 1;
  Bytes memory;
  Bandwidth memory_bandwidth;
};

struct LinkType {
  Bandwidth bandwidth;  // per lane, per direction
  Seconds latency;
};

struct FabricLink {
  std::string a, b;  // vertex names: gpuN, cpuN, nicN or a declared switch
  std::string type;  // a key of NodeSpec::link_types
  int lanes = 1;
  SourceLocation where;
};

struct NodeSpec {
  Provenance about;
  GpuSpec gpu;
  int gpus = 0;
  HostSpec host;
  int nics = 0;
  std::map<std::string, LinkType> link_types;
  std::vector<std::string> switches;
  std::vector<FabricLink> links;  // `gpu*` already expanded

  // Link types whose names mark NVLink-class links (the ring builder's preference).
  static bool is_nvlink_type(const std::string& type) {
    return type == "nvlink" || type == "nvswitch";
  }
};

struct TransportSpec {
  std::string kind;          // rdma | tcp
  double efficiency = 1;     // payload fraction of the line rate
  Seconds message_overhead;  // per message (per collective step)
};

// Network topology kinds and their parameters; the builders are in networks/ (registered by
// kind; tests check both lists agree).
struct TopologySpec {
  std::string kind;                       // single_switch | fat_tree | dragonfly | cloud
  int nodes_per_leaf = 0;                 // fat_tree
  double oversubscription = 1;            // fat_tree: leaf down / up bandwidth
  int nodes_per_group = 0;                // dragonfly
  Bandwidth global_bandwidth;             // dragonfly: between two groups, per direction
  Seconds global_latency;                 // dragonfly
  std::optional<Bandwidth> per_flow_cap;  // cloud: the most one flow gets
};
const std::vector<std::string>& topology_kinds();

struct NetworkSpec {
  Provenance about;
  LinkType port;  // NIC and switch port, per direction
  Seconds switch_latency;
  TransportSpec transport;
  TopologySpec topology;
};

// Where a transfer runs, for per-step protocol latencies.
enum class PathClass { kNvlink, kPcie, kNetwork };

struct ProtocolSpec {
  std::string name;
  double bandwidth_fraction = 1;                 // of the link bandwidth
  Seconds base_latency;                          // once per collective
  Seconds step_nvlink, step_pcie, step_network;  // per step, by path class
  Bytes chunk;                                   // pipelining unit per channel
  Seconds step_latency(PathClass c) const;
};

struct LibrarySpec {
  Provenance about;
  std::vector<ProtocolSpec> protocols;
  int max_channels = 1;
};

struct NodeGroup {
  NodeSpec node;
  int count = 0;
  std::vector<std::string> hostnames;  // one per node
};

struct ClusterSpec {
  Provenance about;
  std::vector<NodeGroup> groups;
  NetworkSpec network;
  LibrarySpec library;

  int node_count() const;
  int gpu_count() const;
};

// The kinds of profile files, as written in `kind:`.
const std::vector<std::string>& profile_kinds();

}  // namespace dlsim::hardware
