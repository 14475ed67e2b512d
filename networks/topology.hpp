#pragma once
// The topology of one job: the GPUs, host bridges, switches and NICs of the nodes it uses and
// the network between them, as a Boost.Graph whose edges are directed links with a bandwidth
// and a latency (a full-duplex cable is two links). Only the job's nodes are built, so memory
// grows linearly with the job.
//
// Routing is deterministic. Inside a node: the fewest-hop path in which no GPU or NIC forwards
// traffic (as CUDA peer copies go over PCIe when two GPUs share no NVLink), ties broken by link
// order in the node file. Between nodes: source -> NIC -> network -> NIC -> destination, the NIC
// being the one a collective channel asks for (its "rail") or else the one nearest the endpoint
// (GPUs equally near several NICs spread over them as NCCL does); the network part is the
// topology's own up/down route (networks/fabrics.cpp). NVLink and PCIe links run at their line
// rate x the collective library's efficiency for them (hardware::LibrarySpec).

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost's edge iterators at -O3.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/graph/adjacency_list.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/registry.hpp"
#include "common/units.hpp"
#include "hardware/profile.hpp"

namespace dlsim::networks {

enum class VertexKind : std::uint8_t { kGpu, kCpu, kNic, kSwitch, kNetworkSwitch };

struct Link {
  int from = 0;
  int to = 0;
  Bandwidth bandwidth;  // usable rate of this direction (network links: after transport efficiency)
  Seconds latency;
  hardware::PathClass cls = hardware::PathClass::kPcie;
};

class Topology;

// A cluster network (single switch, fat tree, ...): adds its switches and links for the job's
// NICs and routes between two NICs. Registered by topology kind (network_fabrics()).
class NetworkFabric {
 public:
  virtual ~NetworkFabric() = default;
  // Called once, after every node's vertices exist; `cluster_nodes[slot]` is the cluster index
  // of the job's node `slot` (its position in leaves and groups).
  virtual void build(Topology& topo, const std::vector<int>& cluster_nodes) = 0;
  // Appends the link ids from NIC `nic_a` of node slot `a` to NIC `nic_b` of node slot `b`.
  virtual void route(int a, int nic_a, int b, int nic_b, std::vector<int>& links) const = 0;
};
using FabricRegistry = Registry<NetworkFabric, const hardware::NetworkSpec&>;
const FabricRegistry& network_fabrics();

class Topology {
 public:
  struct EdgeProps {
    int link = 0;
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS,
                                      boost::no_property, EdgeProps>;

  // Builds the nodes `cluster_nodes` (cluster node indices, in slot order) and the network.
  // `cluster` must outlive the topology.
  // A node whose GPUs cannot all reach each other, or (on several nodes) a NIC, is an
  // InputError naming the node file. `rails` > 0 restricts every node to its first `rails`
  // NICs (as NCCL_IB_HCA does); more than a node has is an InputError naming --rails.
  Topology(const hardware::ClusterSpec& cluster, std::vector<int> cluster_nodes, int rails = 0);
  ~Topology();
  Topology(Topology&&) noexcept;

  int node_slots() const { return static_cast<int>(slots_.size()); }
  const hardware::NodeSpec& node(int slot) const;
  const std::string& hostname(int slot) const { return slots_[slot].hostname; }
  const hardware::ClusterSpec& cluster() const { return *cluster_; }

  int gpu_vertex(int slot, int gpu) const;
  int host_vertex(int slot) const;  // cpu0 of the node: where CPU parameter servers run
  int nic_vertex(int slot, int nic) const;
  VertexKind kind(int vertex) const { return vertices_[vertex].kind; }
  int slot_of(int vertex) const { return vertices_[vertex].slot; }
  std::string vertex_name(int vertex) const;

  std::size_t vertex_count() const { return vertices_.size(); }
  std::size_t link_count() const { return links_.size(); }
  const Link& link(int id) const { return links_[id]; }
  const Graph& graph() const { return graph_; }

  // Appends the links from `src` to `dst`. `rail` >= 0 picks NIC (rail mod NICs) on both ends
  // when the route leaves the node; -1 takes the NIC nearest each endpoint.
  void route(int src, int dst, int rail, std::vector<int>& links) const;
  // The class of a route for per-step protocol latency: network if it crosses a NIC, NVLink if
  // every link is NVLink-class, PCIe otherwise.
  hardware::PathClass path_class(const std::vector<int>& links) const;
  // Fewest-hop route found by breadth-first search over the whole graph (GPUs never forward);
  // for checking the structured router. Empty when unreachable.
  std::vector<int> search_route(int src, int dst) const;

  // The NVSwitch vertex every GPU of node `slot` reaches over NVLink (-1 when none).
  int nvswitch_vertex(int slot) const;
  // The NIC index a vertex of a node uses by default (its nearest; -1 when none).
  int nearest_nic(int vertex) const;
  // The NICs of node `slot` that traffic may use (all, or the first `rails`).
  int usable_nics(int slot) const;
  // NVLink-class lanes directly between GPUs `a` and `b` of node `slot` (0 when none).
  int nvlink_lanes(int slot, int a, int b) const;
  // The most a single flow may get on the network (cloud networks), if capped.
  // The most one flow across the network gets: the cloud's per-flow cap or the transport's
  // stream bandwidth, the lower; none when neither is set.
  std::optional<Bandwidth> per_flow_cap() const;

  // For fabric builders: add network switches and links.
  int add_network_switch();
  int add_link(int from, int to, Bandwidth bandwidth, Seconds latency, hardware::PathClass cls);

 private:
  struct Template;
  struct VertexInfo {
    VertexKind kind;
    int slot;   // node slot, -1 for network switches
    int local;  // index inside the node template
  };
  struct Slot {
    const Template* tmpl;
    int first_vertex;
    int first_link;
    std::string hostname;
  };
  const Template& templ(int slot) const { return *slots_[slot].tmpl; }

  const hardware::ClusterSpec* cluster_;
  std::vector<std::unique_ptr<Template>> templates_;
  std::vector<Slot> slots_;
  std::vector<VertexInfo> vertices_;
  std::vector<Link> links_;
  Graph graph_;
  std::unique_ptr<NetworkFabric> fabric_;
  int network_switches_ = 0;
};

}  // namespace dlsim::networks
