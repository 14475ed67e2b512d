// Cluster networks: single switch, two-level fat tree, dragonfly (Cray Aries-like), cloud.
// Each builds only the switches the job's nodes need. Network links carry the port rate times
// the transport's payload efficiency; a switch's latency is charged on the links leaving it.
// Formulas and sources: docs/networks.md, "Topologies".

#include <fmt/format.h>
#include <map>

#include "networks/topology.hpp"

namespace dlsim::networks {
namespace {

using hardware::NetworkSpec;
using hardware::PathClass;

// The NIC <-> first-switch ports every kind shares.
class PortedFabric : public NetworkFabric {
 public:
  explicit PortedFabric(const NetworkSpec& spec) : spec_(spec) {}

  void route(int a, int nic_a, int b, int nic_b, std::vector<int>& links) const override {
    links.push_back(up_[a][nic_a]);
    middle(a, b, links);
    links.push_back(down_[b][nic_b]);
  }

 protected:
  Bandwidth rate(Bandwidth raw) const { return raw * spec_.transport.efficiency; }
  // Connects every NIC of node slot `slot` to switch vertex `sw`.
  void attach(Topology& t, int slot, int sw) {
    const auto& port = spec_.port;
    up_.resize(static_cast<std::size_t>(slot) + 1);
    down_.resize(static_cast<std::size_t>(slot) + 1);
    for (int k = 0; k < t.node(slot).nics; ++k) {
      const int nic = t.nic_vertex(slot, k);
      up_[slot].push_back(
          t.add_link(nic, sw, rate(port.bandwidth), port.latency, PathClass::kNetwork));
      down_[slot].push_back(t.add_link(sw, nic, rate(port.bandwidth),
                                       port.latency + spec_.switch_latency, PathClass::kNetwork));
    }
  }
  // Links between the first switches of slots a and b (none when they share one).
  virtual void middle(int a, int b, std::vector<int>& links) const = 0;

  const NetworkSpec& spec_;
  std::vector<std::vector<int>> up_, down_;  // [slot][nic] -> link id
};

// Every NIC on one non-blocking switch.
class SingleSwitch : public PortedFabric {
 public:
  using PortedFabric::PortedFabric;
  void build(Topology& t, const std::vector<int>& cluster_nodes) override {
    const int sw = t.add_network_switch();
    for (int slot = 0; slot < static_cast<int>(cluster_nodes.size()); ++slot) attach(t, slot, sw);
  }

 protected:
  void middle(int, int, std::vector<int>&) const override {}
};

// Two levels: `nodes_per_leaf` consecutive cluster nodes per leaf switch; each leaf's uplink to
// the core carries its down bandwidth divided by the oversubscription ratio. The core is one
// vertex: with ECMP over many spines, a leaf's spine links act as one trunk (an approximation
// that ignores hash collisions).
class FatTree : public PortedFabric {
 public:
  using PortedFabric::PortedFabric;
  void build(Topology& t, const std::vector<int>& cluster_nodes) override {
    const auto& topo = spec_.topology;
    std::map<int, int> leaf_switch;
    int max_nics = 1;
    for (int slot = 0; slot < static_cast<int>(cluster_nodes.size()); ++slot) {
      max_nics = std::max(max_nics, t.node(slot).nics);
    }
    const Bandwidth trunk =
        rate(spec_.port.bandwidth) * (topo.nodes_per_leaf * max_nics / topo.oversubscription);
    const Seconds hop = spec_.port.latency + spec_.switch_latency;
    for (int slot = 0; slot < static_cast<int>(cluster_nodes.size()); ++slot) {
      const int leaf = cluster_nodes[slot] / topo.nodes_per_leaf;
      if (!leaf_switch.count(leaf)) leaf_switch[leaf] = t.add_network_switch();
      leaf_of_.push_back(leaf);
      attach(t, slot, leaf_switch[leaf]);
    }
    if (leaf_switch.size() > 1) {
      const int core = t.add_network_switch();
      for (const auto& [leaf, sw] : leaf_switch) {
        uplink_[leaf] = t.add_link(sw, core, trunk, hop, PathClass::kNetwork);
        downlink_[leaf] = t.add_link(core, sw, trunk, hop, PathClass::kNetwork);
      }
    }
  }

 protected:
  void middle(int a, int b, std::vector<int>& links) const override {
    if (leaf_of_[a] == leaf_of_[b]) return;
    links.push_back(uplink_.at(leaf_of_[a]));
    links.push_back(downlink_.at(leaf_of_[b]));
  }

 private:
  std::vector<int> leaf_of_;
  std::map<int, int> uplink_, downlink_;
};

// Dragonfly as on Cray Aries: `nodes_per_group` consecutive nodes share a group, whose routers
// are all-to-all connected (one non-blocking switch here); every pair of groups has direct
// global links of `global_bandwidth` per direction (minimal routing).
class Dragonfly : public PortedFabric {
 public:
  using PortedFabric::PortedFabric;
  void build(Topology& t, const std::vector<int>& cluster_nodes) override {
    const auto& topo = spec_.topology;
    std::map<int, int> router;
    for (int slot = 0; slot < static_cast<int>(cluster_nodes.size()); ++slot) {
      const int group = cluster_nodes[slot] / topo.nodes_per_group;
      if (!router.count(group)) router[group] = t.add_network_switch();
      group_of_.push_back(group);
      attach(t, slot, router[group]);
    }
    for (const auto& [ga, ra] : router) {
      for (const auto& [gb, rb] : router) {
        if (ga == gb) continue;
        global_[{ga, gb}] =
            t.add_link(ra, rb, rate(topo.global_bandwidth),
                       topo.global_latency + spec_.switch_latency, PathClass::kNetwork);
      }
    }
  }

 protected:
  void middle(int a, int b, std::vector<int>& links) const override {
    if (group_of_[a] != group_of_[b]) links.push_back(global_.at({group_of_[a], group_of_[b]}));
  }

 private:
  std::vector<int> group_of_;
  std::map<std::pair<int, int>, int> global_;
};

}  // namespace

const FabricRegistry& network_fabrics() {
  static const FabricRegistry registry = [] {
    FabricRegistry r("network topology");
    r.add("single_switch", "every NIC on one non-blocking switch",
          [](const NetworkSpec& s) { return std::make_unique<SingleSwitch>(s); });
    r.add("cloud", "one switch; a single flow is capped at per_flow_cap",
          [](const NetworkSpec& s) { return std::make_unique<SingleSwitch>(s); });
    r.add("fat_tree", "two-level fat tree with an oversubscribed leaf uplink",
          [](const NetworkSpec& s) { return std::make_unique<FatTree>(s); });
    r.add("dragonfly", "groups of all-to-all routers joined by global links (Cray Aries)",
          [](const NetworkSpec& s) { return std::make_unique<Dragonfly>(s); });
    return r;
  }();
  return registry;
}

}  // namespace dlsim::networks
