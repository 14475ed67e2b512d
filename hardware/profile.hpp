#pragma once
// Hardware profiles: what a GPU can compute, how a node's GPUs, host bridges and NICs are wired,
// what the cluster network is, and the per-protocol constants of the collective library.
// Read from YAML (docs/hardware-format.md); every quantity carries its unit in its type.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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

// One layer's measured times on this device (dlcalibrate run torch): the forward pass and the
// backward pass (input and weight gradients) of a layer with this model::LayerStats signature
// at this batch, fp32, with `threads` intra-op threads.
struct KernelEntry {
  std::string layer;  // model::layer_signature
  std::int64_t batch = 1;
  int threads = 1;
  // The training precision it was measured in: fp32, tf32, amp (float16 autocast), bf16
  // (bfloat16 autocast), fp16.
  std::string precision = "fp32";
  Seconds forward, backward;
  // The host's time issuing the layer's kernels in each pass, where measured (0 otherwise).
  Seconds forward_host{}, backward_host{};
};

// The optimizer step measured over a whole model's parameters (SGD with momentum, fp32): one
// update of `elements` parameters in `tensors` tensors.
struct UpdateEntry {
  std::int64_t elements = 0;
  std::int64_t tensors = 0;
  int threads = 1;
  std::string precision = "fp32";  // as KernelEntry's; amp: GradScaler's unscale included
  Seconds time;
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
  // Coefficient of variation of the speed of GPUs of this model from one GPU to the next, each
  // GPU's own in every step (manufacturing and power management): in a job of N GPUs the k-th
  // slowest computes at 1 + speed_spread x its expected normal order statistic
  // (docs/simulator.md, "Stragglers"). 0 when the profile does not say.
  double speed_spread = 0;
  // CUDA compute capability x 10 (70 V100, 80 A100, 90 H100); 0 when the profile does not say.
  // NCCL's tuner reads it (which rows of its tables, whether LL128 is safe).
  int compute_capability = 0;
  // Streaming multiprocessors (datasheet). An NCCL kernel's blocks take whole SMs from the
  // compute kernels it overlaps (docs/simulator.md, "NCCL on the compute's SMs"); 0 when the
  // profile does not say, and then no SM is taken.
  int sm_count = 0;
  // Measured layer and update times (docs/calibrate.md, "Layer tables"); the cost model uses
  // them where a layer's signature, batch and threads match, the roofline elsewhere.
  std::vector<KernelEntry> kernels;
  std::vector<UpdateEntry> updates;
  std::string kernels_source;  // where the tables come from
  int threads = 1;             // intra-op threads of the runs the prediction is for

  // Peak for arithmetic in `p` (fp16/bf16 fall back to fp32 where the GPU lacks them).
  FlopRate peak_for(Precision p) const;
};

struct HostSpec {
  std::string cpu;
  std::string vendor = "intel";  // intel | amd | arm | power: NCCL's network overhead and LL caps
  // The CPU generation NCCL reads from the CPU's model (one of cpu_generations(vendor)): its
  // figure for the sockets' interconnect; empty where not given.
  std::string generation;
  int sockets = 1;
  int cores = 1;
  Bytes memory;
  Bandwidth memory_bandwidth;
  // What NCCL's shared-memory transport carries each way between two GPUs it does not connect
  // peer to peer (beyond a PCIe switch on Intel: ncclTopoCheckP2p), with both directions busy as
  // in a ring: a measured figure of the platform; none where not given (the search's figure for
  // the path stands).
  std::optional<Bandwidth> shm_bandwidth;
};

// What a hardware file may describe: far above any machine (a node of 1,024 GPUs, NICs or lanes
// on one link; 2^20 nodes, as many as ranks a job may have), low enough that a typo cannot ask
// for a topology no memory holds.
inline constexpr int kMaxNodes = 1 << 20;
inline constexpr int kMaxPerNode = 1024;

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

// The generations of `vendor`'s CPUs NCCL tells apart (src/graph/topo.cc, ncclTopoAddCpu).
const std::vector<std::string>& cpu_generations(const std::string& vendor);

// NCCL's bandwidth between two sockets of `host` (src/graph/topo.h and ncclTopoGetInterCpuBw,
// per direction) and the constant's name; none where the generation is not given.
struct InterCpuBandwidth {
  Bandwidth bandwidth;
  std::string constant;
};
std::optional<InterCpuBandwidth> nccl_inter_cpu_bandwidth(const HostSpec& host);

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
  // The most one connection moves (a kernel TCP stream: one NCCL socket, one gRPC or ps-lite
  // connection), below the line rate on fast links; none when absent.
  std::optional<Bandwidth> stream_bandwidth;
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

// One of NCCL's protocols (LL, LL128, Simple): the payload a channel moves per pipeline step
// (its buffer over NCCL_STEPS), how many bytes a thread must have before NCCL drops a channel for
// a small message, and its threads per channel (src/enqueue.cc, "thread threshold";
// src/include/device.h). Its bandwidth and latency are in the tuner's tables.
struct ProtocolSpec {
  std::string name;
  Bytes chunk;             // per channel and pipeline step
  Bytes thread_threshold;  // per thread
  int max_threads = 512;   // per channel
};

// The protocols NCCL's tables are indexed by, in its order.
inline constexpr int kProtocols = 3;  // LL, LL128, Simple
using PerProtocol = std::array<Seconds, kProtocols>;
// Per-channel bandwidth caps of NCCL's tuner by GPU generation and node count: [1 node, 2 nodes,
// 3 or more], in B/s (0: no cap).
using PerNodeCount = std::array<Bandwidth, 3>;

// NCCL's tuning model of one release (src/graph/tuning.cc, src/graph/search.cc; docs/networks.md,
// "NCCL's choices"), as data: networks/nccl.cpp applies it.
struct TunerSpec {
  std::string version;                  // e.g. 2.21.5
  std::vector<std::string> algorithms;  // offered without plugins: ring, tree, nvls
  // Latencies: baseLat[algorithm][protocol] and hwLat[path class][algorithm][protocol].
  std::map<std::string, PerProtocol> base_latency;
  std::map<PathClass, std::map<std::string, PerProtocol>> step_latency;
  // Across nodes NCCL >= 2.18 floors a ring step at the CPU's network overhead (Simple: x3).
  Seconds network_overhead_intel, network_overhead_amd;
  double network_overhead_simple_factor = 1;
  // Bandwidth factors on busBw: ring LL and LL128, tree Simple, LL, and LL128 (one node, more).
  double ring_ll = 0.25, ring_ll128 = 0.92, tree = 0.92, tree_ll = 1 / 3.8;
  double ring_ll128_one_gpu = 0.92;  // ring LL128 with one GPU per node (NCCL 2.7-2.22: 0.7)
  double tree_ll128_one_node = 7.0 / 9.0, tree_ll128_nodes = 120.0 / 128.0;
  // Caps by generation ("volta", "ampere", "hopper"): llMaxBws (whole, not per channel; across
  // nodes its rows are the CPU's: "volta" Intel, "ampere" AMD), and per channel for ring LL128,
  // tree LL128 and tree.
  std::map<std::string, PerNodeCount> ll_max, ring_ll128_per_channel, tree_ll128_per_channel,
      tree_per_channel;
  // Tree bandwidth x treeCorrectionFactor[protocol][log2(bytes / 64)].
  std::array<std::vector<double>, kProtocols> tree_correction;
  // Ring Simple allreduce across nodes: latency x factor once bytes/(channels x ranks) reaches
  // plateau_bytes (the "plateau" of tuning.cc); factor_pre_ampere below compute capability 80.
  Bytes plateau_bytes;
  double plateau_factor = 1, plateau_factor_pre_ampere = 1;
  // NVLS (NVLink SHARP, NCCL 2.19-2.27): busBw = channels x min(bwIntra, bwInter), algBw =
  // busBw x nvls_ratio (5/6), on nvls_channels channels of their own.
  double nvls_ratio = 1;
  int nvls_channels = 16;
  // LL128 is used only on these GPU generations, and across nodes only where the GPU reaches
  // its NIC within this PCIe path type (pix, pxb, pxn, phb).
  std::vector<int> ll128_compute_capabilities;
  std::string ll128_network_path = "pxb", ll128_network_path_hopper = "pxb";
  // The search: per-channel speeds it tries, highest first (B/s), intra and inter node, with
  // their Hopper variants; channels are doubled (and halved in speed) from this speed on.
  std::vector<Bandwidth> speeds_intra, speeds_inter, speeds_intra_hopper, speeds_inter_hopper;
  Bandwidth duplicate_from;
  // Channels a kernel runs per search channel (ncclTopoPostset: 2 from NCCL 2.5, 1 before).
  int runtime_factor = 2;
  // No topology search: one ring through the node's GPUs in rank order, each hop over whatever
  // path joins the two GPUs (NCCL 1.x, src/core.cu: ranks sorted by NVML index).
  bool rank_order_ring = false;
  // PXN (NCCL 2.12 on, src/graph/paths.cc): a GPU whose path to a NIC crosses a CPU (or is
  // slower than its peer's) sends through the NIC's own GPU, over NVLink to that GPU and on
  // through its PCIe switch; the GPU-to-NIC direction only.
  bool pxn = false;
};

// The collective library: NCCL (its protocols and tuning model decide each collective), or MPI
// (point-to-point schedules: ring, halving-doubling, parameter servers, costed link by link).
struct LibrarySpec {
  Provenance about;
  std::string family = "nccl";          // nccl | mpi
  std::vector<ProtocolSpec> protocols;  // nccl: LL, LL128, Simple (those the release has)
  int max_channels = 1;                 // nccl: MAXCHANNELS
  Bytes segment;                        // mpi: the pipelining unit of broadcast and reduce
  // What the library's copies get of a link's line rate inside a node (NCCL maintainers: ~20 of
  // 25 GB/s per NVLink; NCCL's PCI_BW 12 of 15.75 GB/s for PCIe gen3 x16): every NVLink and
  // PCIe link of the topology runs at line rate x this.
  double nvlink_efficiency = 1, pcie_efficiency = 1;
  // Host CPU time one rank's process spends in a collective it calls: per call plus per byte of
  // the collective's size (gloo and MPI copy, sum and move the bytes through the kernel's TCP
  // stack on the host; NCCL's kernels run on the GPU: 0). Measured by `dlcalibrate run gloo`
  // (docs/calibrate.md); where a node's cores are all taken by compute threads, this time is
  // taken from compute (docs/simulator.md, "Shared cores").
  Seconds cpu_per_call, cpu_per_byte;
  // What the collective itself loses on such cores: each call waits for a core its compute
  // threads hold, per call plus per byte (`dlcalibrate run mpi --cpu-cost`: the call's time
  // beside a busy thread less its time alone).
  Seconds wait_per_call, wait_per_byte;
  TunerSpec tuner;  // family nccl
  bool nccl() const { return family == "nccl"; }
  const ProtocolSpec* protocol(std::string_view name) const;
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
