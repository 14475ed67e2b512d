#include "networks/topology.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <deque>
#include <limits>
#include <map>

#include "networks/placement.hpp"

namespace dlsim::networks {

using hardware::PathClass;

// One node type's fabric, built once and shared by every node of that type: local vertices
// (gpus, cpus, nics, switches), local links, and every local route precomputed.
struct Topology::Template {
  const hardware::NodeSpec* spec = nullptr;
  std::vector<VertexKind> kinds;
  std::vector<std::string> names;
  std::vector<Link> links;                           // local vertex ids
  std::vector<std::vector<std::vector<int>>> paths;  // [src][dst] -> local link ids
  std::vector<int> nearest_nic;                      // per local vertex, -1 if none
  std::vector<int> lanes;                            // gpus x gpus NVLink-class lanes
  int nvswitch = -1;                                 // local vertex, -1 if none

  int gpus() const { return spec->gpus; }
  int cpu(int s) const { return spec->gpus + s; }
  int nic(int k) const { return spec->gpus + spec->host.sockets + k; }
  bool forwards(int v) const {
    return kinds[v] != VertexKind::kGpu && kinds[v] != VertexKind::kNic;
  }

  int nics_used = 0;  // the first NICs traffic may use

  // NVLink and PCIe links run at line rate x the library's efficiency for them.
  Template(const hardware::NodeSpec& node, const hardware::LibrarySpec& library, int rails)
      : spec(&node), nics_used(rails > 0 ? rails : node.nics) {
    std::map<std::string, int> index;
    auto add = [&](VertexKind k, const std::string& name) {
      index[name] = static_cast<int>(kinds.size());
      kinds.push_back(k);
      names.push_back(name);
    };
    for (int i = 0; i < node.gpus; ++i) add(VertexKind::kGpu, fmt::format("gpu{}", i));
    for (int i = 0; i < node.host.sockets; ++i) add(VertexKind::kCpu, fmt::format("cpu{}", i));
    for (int i = 0; i < node.nics; ++i) add(VertexKind::kNic, fmt::format("nic{}", i));
    for (const auto& s : node.switches) add(VertexKind::kSwitch, s);
    const int n = static_cast<int>(kinds.size());
    lanes.assign(static_cast<std::size_t>(node.gpus * node.gpus), 0);
    std::vector<std::vector<int>> out(n);  // local adjacency in link order
    for (const auto& l : node.links) {
      const auto& type = node.link_types.at(l.type);
      const PathClass cls =
          hardware::NodeSpec::is_nvlink_type(l.type) ? PathClass::kNvlink : PathClass::kPcie;
      const double efficiency =
          cls == PathClass::kNvlink ? library.nvlink_efficiency : library.pcie_efficiency;
      const int a = index.at(l.a);
      const int b = index.at(l.b);
      for (auto [u, v] : {std::pair{a, b}, std::pair{b, a}}) {
        out[u].push_back(static_cast<int>(links.size()));
        links.push_back({u, v, type.bandwidth * (l.lanes * efficiency), type.latency, cls});
      }
      if (cls == PathClass::kNvlink && a < node.gpus && b < node.gpus) {
        lanes[a * node.gpus + b] += l.lanes;
        lanes[b * node.gpus + a] += l.lanes;
      }
    }
    // Breadth-first search from every vertex; GPUs and NICs only start or end a route.
    paths.assign(n, std::vector<std::vector<int>>(n));
    for (int s = 0; s < n; ++s) {
      std::vector<int> via(n, -1);
      std::vector<bool> seen(n, false);
      std::deque<int> queue{s};
      seen[s] = true;
      while (!queue.empty()) {
        const int u = queue.front();
        queue.pop_front();
        if (u != s && !forwards(u)) continue;
        for (int id : out[u]) {
          const int v = links[id].to;
          if (seen[v]) continue;
          seen[v] = true;
          via[v] = id;
          queue.push_back(v);
        }
      }
      for (int d = 0; d < n; ++d) {
        if (d == s || via[d] < 0) continue;
        auto& p = paths[s][d];
        for (int v = d; v != s; v = links[via[v]].from) p.push_back(via[v]);
        std::reverse(p.begin(), p.end());
      }
    }
    // The NICs fewest hops away; among several equally near, GPU k takes the (k mod count)-th,
    // as NCCL spreads the GPUs of a PCIe switch over its NICs (src/graph/topo.cc,
    // ncclTopoGetLocalNet: dev % count). Other vertices take the first.
    nearest_nic.assign(n, -1);
    for (int v = 0; v < n; ++v) {
      std::vector<int> nearest;
      std::size_t best = 0;
      for (int k = 0; k < nics_used; ++k) {
        const int nv = nic(k);
        const std::size_t hops = v == nv ? 0 : paths[v][nv].size();
        if (v != nv && hops == 0) continue;
        if (nearest.empty() || hops < best) {
          nearest.clear();
          best = hops;
        }
        if (hops == best) nearest.push_back(k);
      }
      if (nearest.empty()) continue;
      const int pick =
          kinds[v] == VertexKind::kGpu && best > 0 ? v % static_cast<int>(nearest.size()) : 0;
      nearest_nic[v] = nearest[static_cast<std::size_t>(pick)];
    }
    if (library.nccl() && library.tuner.pxn) add_pxn_paths();
    // The NVSwitch the GPUs' NVLinks reach, when they all reach the same declared switch.
    for (const auto& l : links) {
      if (l.from == 0 && l.cls == PathClass::kNvlink && kinds[l.to] == VertexKind::kSwitch) {
        nvswitch = l.to;
        break;
      }
    }
    for (int g = 1; g < node.gpus && nvswitch >= 0; ++g) {
      bool reaches = false;
      for (const auto& l : links) reaches = reaches || (l.from == g && l.to == nvswitch);
      if (!reaches) nvswitch = -1;
    }
  }

  // PXN (NCCL 2.12 on, src/graph/paths.cc ncclTopoComputePaths): for each NIC, its own GPU (of
  // the GPUs nearest it, the one that calls it its nearest NIC, as ncclTopoGetLocalGpu) relays
  // the sends of every other GPU that reaches it over NVLink alone, where that GPU's own path to
  // the NIC crosses a CPU or is slower. The GPU-to-NIC direction only: NCCL receives locally.
  void add_pxn_paths() {
    auto crosses_cpu = [&](const std::vector<int>& path) {
      for (std::size_t i = 0; i + 1 < path.size(); ++i) {
        if (kinds[links[path[i]].to] == VertexKind::kCpu) return true;
      }
      return false;
    };
    auto bottleneck = [&](const std::vector<int>& path) {
      double bw = std::numeric_limits<double>::infinity();
      for (int id : path) bw = std::min(bw, links[id].bandwidth.value());
      return bw;
    };
    auto nvlink_only = [&](const std::vector<int>& path) {
      return !path.empty() && std::all_of(path.begin(), path.end(), [&](int id) {
        return links[id].cls == PathClass::kNvlink;
      });
    };
    for (int k = 0; k < spec->nics; ++k) {
      const int nv = nic(k);
      std::size_t best = 0;
      int own = -1;
      for (int g = 0; g < gpus(); ++g) {
        const std::size_t hops = paths[g][nv].size();
        if (hops == 0) continue;
        const bool mine = nearest_nic[g] == k;
        if (own < 0 || hops < best || (hops == best && mine && nearest_nic[own] != k)) {
          own = g;
          best = hops;
        }
      }
      if (own < 0 || crosses_cpu(paths[own][nv])) continue;
      const std::vector<int> relay = paths[own][nv];
      for (int g = 0; g < gpus(); ++g) {
        if (g == own || !nvlink_only(paths[g][own])) continue;
        auto& direct = paths[g][nv];
        if (!direct.empty() && !crosses_cpu(direct) && bottleneck(direct) >= bottleneck(relay)) {
          continue;
        }
        std::vector<int> via = paths[g][own];
        via.insert(via.end(), relay.begin(), relay.end());
        direct = std::move(via);
      }
    }
  }

  // Every GPU reaches every other GPU, and a NIC when the job leaves the node.
  void check(bool needs_nic) const {
    const auto& file = spec->about.file;
    for (int a = 0; a < gpus(); ++a) {
      for (int b = 0; b < gpus(); ++b) {
        if (a != b && paths[a][b].empty()) {
          fail_at({file}, "links",
                  fmt::format("node '{}': gpu{} cannot reach gpu{} over its links (GPUs do not "
                              "forward traffic)",
                              spec->about.name, a, b));
        }
      }
      if (needs_nic && nearest_nic[a] < 0) {
        fail_at({file}, spec->nics == 0 ? "nics" : "links",
                fmt::format("node '{}': gpu{} reaches no NIC, so it cannot talk to other nodes",
                            spec->about.name, a));
      }
    }
  }
};

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;

Topology::Topology(const hardware::ClusterSpec& cluster, std::vector<int> cluster_nodes, int rails)
    : cluster_(&cluster) {
  std::map<const hardware::NodeSpec*, const Template*> made;
  for (int node : cluster_nodes) {
    const auto& spec = node_spec(cluster, node);
    auto& t = made[&spec];
    if (!t) {
      if (rails > spec.nics || rails < 0) {
        fail_at({}, "rails",
                fmt::format("{} rails, but node '{}' has {} NIC{}", rails, spec.about.name,
                            spec.nics, spec.nics == 1 ? "" : "s"));
      }
      templates_.push_back(std::make_unique<Template>(spec, cluster.library, rails));
      t = templates_.back().get();
      t->check(cluster_nodes.size() > 1);
    }
    const int slot = static_cast<int>(slots_.size());
    slots_.push_back({t, static_cast<int>(vertices_.size()), static_cast<int>(links_.size()),
                      networks::hostname(cluster, node)});
    for (int v = 0; v < static_cast<int>(t->kinds.size()); ++v) {
      vertices_.push_back({t->kinds[v], slot, v});
      boost::add_vertex(graph_);
    }
    const int base = slots_.back().first_vertex;
    for (const auto& l : t->links) {
      const int id = static_cast<int>(links_.size());
      links_.push_back({l.from + base, l.to + base, l.bandwidth, l.latency, l.cls});
      boost::add_edge(static_cast<std::size_t>(l.from + base),
                      static_cast<std::size_t>(l.to + base), EdgeProps{id}, graph_);
    }
  }
  fabric_ = network_fabrics().at(cluster.network.topology.kind).make(cluster.network);
  fabric_->build(*this, cluster_nodes);
}

const hardware::NodeSpec& Topology::node(int slot) const { return *templ(slot).spec; }

int Topology::gpu_vertex(int slot, int gpu) const { return slots_[slot].first_vertex + gpu; }
int Topology::host_vertex(int slot) const { return slots_[slot].first_vertex + templ(slot).cpu(0); }
int Topology::nic_vertex(int slot, int nic) const {
  return slots_[slot].first_vertex + templ(slot).nic(nic);
}

std::string Topology::vertex_name(int v) const {
  const auto& info = vertices_[v];
  if (info.slot < 0) return fmt::format("net{}", info.local);
  return slots_[info.slot].hostname + "/" + templ(info.slot).names[info.local];
}

int Topology::add_network_switch() {
  const int id = static_cast<int>(vertices_.size());
  vertices_.push_back({VertexKind::kNetworkSwitch, -1, network_switches_++});
  boost::add_vertex(graph_);
  return id;
}

int Topology::add_link(int from, int to, Bandwidth bandwidth, Seconds latency, PathClass cls) {
  const int id = static_cast<int>(links_.size());
  links_.push_back({from, to, bandwidth, latency, cls});
  boost::add_edge(static_cast<std::size_t>(from), static_cast<std::size_t>(to), EdgeProps{id},
                  graph_);
  return id;
}

void Topology::route(int src, int dst, int rail, std::vector<int>& out) const {
  const auto& s = vertices_[src];
  const auto& d = vertices_[dst];
  auto local = [&](int slot, int from, int to) {
    const auto& t = templ(slot);
    const auto& path = t.paths[from][to];
    if (path.empty() && from != to) {
      fail_at({t.spec->about.file}, "links",
              fmt::format("node '{}': {} cannot reach {} over its links (GPUs and NICs do not "
                          "forward traffic)",
                          t.spec->about.name, t.names[from], t.names[to]));
    }
    const int base = slots_[slot].first_link;
    for (int id : path) out.push_back(base + id);
  };
  if (s.slot == d.slot) {
    local(s.slot, s.local, d.local);
    return;
  }
  const auto& ts = templ(s.slot);
  const auto& td = templ(d.slot);
  const int na = rail >= 0 ? rail % ts.nics_used : ts.nearest_nic[s.local];
  const int nb = rail >= 0 ? rail % td.nics_used : td.nearest_nic[d.local];
  local(s.slot, s.local, ts.nic(na));
  fabric_->route(s.slot, na, d.slot, nb, out);
  local(d.slot, td.nic(nb), d.local);
}

PathClass Topology::path_class(const std::vector<int>& links) const {
  bool nvlink = !links.empty();
  for (int id : links) {
    if (links_[id].cls == PathClass::kNetwork) return PathClass::kNetwork;
    nvlink = nvlink && links_[id].cls == PathClass::kNvlink;
  }
  return nvlink ? PathClass::kNvlink : PathClass::kPcie;
}

std::vector<int> Topology::search_route(int src, int dst) const {
  const std::size_t n = vertices_.size();
  std::vector<int> via(n, -1);
  std::vector<bool> seen(n, false);
  std::deque<int> queue{src};
  seen[src] = true;
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    // GPUs never forward; a NIC forwards between its node and the network.
    if (u != src && vertices_[u].kind == VertexKind::kGpu) continue;
    for (auto [e, end] = boost::out_edges(static_cast<std::size_t>(u), graph_); e != end; ++e) {
      const int id = graph_[*e].link;
      const int v = links_[id].to;
      if (seen[v]) continue;
      seen[v] = true;
      via[v] = id;
      queue.push_back(v);
    }
  }
  std::vector<int> path;
  if (src == dst || via[dst] < 0) return path;
  for (int v = dst; v != src; v = links_[via[v]].from) path.push_back(via[v]);
  std::reverse(path.begin(), path.end());
  return path;
}

int Topology::nvswitch_vertex(int slot) const {
  const int local = templ(slot).nvswitch;
  return local < 0 ? -1 : slots_[slot].first_vertex + local;
}

int Topology::nearest_nic(int vertex) const {
  const auto& info = vertices_[vertex];
  return info.slot < 0 ? -1 : templ(info.slot).nearest_nic[info.local];
}

int Topology::usable_nics(int slot) const { return templ(slot).nics_used; }

int Topology::nvlink_lanes(int slot, int a, int b) const {
  const auto& t = templ(slot);
  return t.lanes[a * t.gpus() + b];
}

std::optional<Bandwidth> Topology::per_flow_cap() const {
  const auto& a = cluster_->network.topology.per_flow_cap;
  const auto& b = cluster_->network.transport.stream_bandwidth;
  if (a && b) return Bandwidth(std::min(a->value(), b->value()));
  return a ? a : b;
}

}  // namespace dlsim::networks
