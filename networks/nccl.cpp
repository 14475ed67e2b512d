// NCCL's topology search and tuner (docs/networks.md, "NCCL's choices"). The search is NCCL's in
// outline (src/graph/search.cc): per-channel speeds from the release's speed arrays, at most the
// bandwidth of every link a channel crosses once links are derated to what NCCL's kernels get
// of them; one ring channel per NIC ("rail"), entering and leaving each node through the GPUs
// nearest that NIC; channels doubled at high speeds. The tuner is NCCL's (src/graph/tuning.cc):
// time = latency + bytes / algBw for every (algorithm, protocol), the cheapest wins.

#include "networks/nccl.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/error.hpp"
#include "networks/algorithms.hpp"
#include "networks/collective.hpp"

namespace dlsim::networks {

std::string_view to_string(PathType t) {
  switch (t) {
    case PathType::kLoc:
      return "LOC";
    case PathType::kNvl:
      return "NVL";
    case PathType::kNvb:
      return "NVB";
    case PathType::kPix:
      return "PIX";
    case PathType::kPxb:
      return "PXB";
    case PathType::kPxn:
      return "PXN";
    case PathType::kPhb:
      return "PHB";
    case PathType::kSys:
      return "SYS";
    case PathType::kNet:
      return "NET";
  }
  return "?";
}

namespace {

using hardware::PathClass;
using hardware::TunerSpec;

constexpr double kInf = std::numeric_limits<double>::infinity();

// NCCL's path type of a route inside a node.
PathType path_type(const Topology& topo, const std::vector<int>& route) {
  if (route.empty()) return PathType::kLoc;
  bool nvlink = true, relayed = false;
  int cpus = 0, switches = 0;
  for (std::size_t i = 0; i < route.size(); ++i) {
    const auto& l = topo.link(route[i]);
    if (l.cls == PathClass::kNetwork) return PathType::kNet;
    nvlink = nvlink && l.cls == PathClass::kNvlink;
    if (i + 1 < route.size()) {
      const auto k = topo.kind(l.to);
      if (k == VertexKind::kCpu) ++cpus;
      if (k == VertexKind::kSwitch) ++switches;
      if (k == VertexKind::kGpu) relayed = true;  // a peer GPU relays it: PXN (paths.cc)
    }
  }
  if (relayed) return PathType::kPxn;
  if (nvlink) return PathType::kNvl;
  if (cpus >= 2) return PathType::kSys;
  if (cpus == 1) return PathType::kPhb;
  return switches <= 1 ? PathType::kPix : PathType::kPxb;
}

// The highest of `speeds` (highest first) at most `bw`; `bw` itself below the lowest.
double quantize(double bw, const std::vector<Bandwidth>& speeds) {
  for (const auto& s : speeds) {
    if (s.value() <= bw * (1 + 1e-9)) return s.value();
  }
  return bw;
}

// A link's bandwidth as NCCL's search takes it: the link between two sockets at most NCCL's
// figure for the CPUs (hardware::nccl_inter_cpu_bandwidth; ncclTopoConnectCpus gives that link
// the figure whatever the interconnect's own rate), every other link at its own.
double search_bw(const Topology& topo, int id) {
  const auto& l = topo.link(id);
  double bw = l.bandwidth.value();
  if (topo.kind(l.from) == VertexKind::kCpu && topo.kind(l.to) == VertexKind::kCpu) {
    if (const auto figure =
            hardware::nccl_inter_cpu_bandwidth(topo.node(topo.slot_of(l.from)).host)) {
      bw = std::min(bw, figure->bandwidth.value());
    }
  }
  return bw;
}

// The farthest path type over which NCCL connects two GPUs of a node peer to peer; beyond it
// they exchange through host memory, its SHM transport (src/graph/paths.cc, ncclTopoCheckP2p,
// 2.21: PXB, "don't use P2P across CPU host bridges and further apart", except a pair of GPUs
// on an AMD host).
PathType p2p_level(const hardware::HostSpec& host, int gpus) {
  if (host.vendor == "amd" && gpus <= 2) return PathType::kSys;
  return PathType::kPxb;
}

double route_bottleneck(const Topology& topo, const std::vector<int>& route) {
  double bw = kInf;
  for (int id : route) bw = std::min(bw, search_bw(topo, id));
  return bw;
}

// The node's graph for its ranks: channels, per-channel speed and ring orders (positions into
// `ranks`), as the intra-node part of ncclTopoCompute finds them.
struct IntraGraph {
  int channels = 1;
  double bw = kInf;        // per channel
  double capacity = kInf;  // what all channels together may take (for the inter-node search)
  PathType type = PathType::kLoc;
  bool nvlink_cycles = false;
  std::vector<std::vector<int>> orders;
  // B/s, 0 for none: the node's SHM transport rate (HostSpec::shm_bandwidth) where a hop of its
  // ring goes through host memory.
  double shm = 0;
  // The hops of the node's ring in rank order that go through host memory.
  int host_hops = 0;
};

// The hops of a ring over `ranks` (GPUs of one node, in rank order, closed) that go through host
// memory: beyond the node's peer-to-peer level.
int host_memory_hops(const Communicator& comm, const std::vector<int>& ranks) {
  const int n = static_cast<int>(ranks.size());
  const auto& topo = *comm.topo;
  const auto& host = topo.node(comm.rank_slot[ranks.front()]).host;
  std::vector<int> route;
  int hops = 0;
  for (int i = 0; i < n; ++i) {
    route.clear();
    topo.route(comm.rank_vertex[ranks[i]], comm.rank_vertex[ranks[(i + 1) % n]], -1, route);
    if (path_type(topo, route) > p2p_level(host, n)) ++hops;
  }
  return hops;
}

IntraGraph intra_graph(const Communicator& comm, const std::vector<int>& ranks, const TunerSpec& t,
                       bool hopper, int max_search) {
  IntraGraph g;
  const int n = static_cast<int>(ranks.size());
  std::vector<int> identity(n);
  for (int i = 0; i < n; ++i) identity[i] = i;
  if (n < 2) {
    g.orders = {identity};
    g.channels = max_search;
    return g;
  }
  const auto& topo = *comm.topo;
  const auto& speeds = hopper ? t.speeds_intra_hopper : t.speeds_intra;
  std::vector<int> route;
  bool all_nvlink = true;
  for (int a = 0; a < n && all_nvlink; ++a) {
    for (int b = 0; b < n && all_nvlink; ++b) {
      if (a == b) continue;
      route.clear();
      topo.route(comm.rank_vertex[ranks[a]], comm.rank_vertex[ranks[b]], -1, route);
      all_nvlink = topo.path_class(route) == PathClass::kNvlink;
    }
  }
  // Rings over direct NVLink lanes where the GPUs have Hamiltonian cycles of them (DGX-1's
  // cube mesh, where not every pair is linked), else through an NVSwitch, else PCIe.
  const auto cycles = t.rank_order_ring ? std::vector<std::vector<int>>{}
                                        : detail::nvlink_cycles(comm, ranks, max_search);
  if (!t.rank_order_ring && (all_nvlink || !cycles.empty())) {
    g.type = PathType::kNvl;
    bool direct = !cycles.empty();
    if (direct) {
      // Rings on direct lanes (DGX-1): each channel takes one lane of every hop.
      const int slot = comm.rank_slot[ranks.front()];
      const int gpu0 = topo.gpu_vertex(slot, 0);
      double lane = kInf;
      for (const auto& c : cycles) {
        for (std::size_t i = 0; i < c.size(); ++i) {
          const int a = comm.rank_vertex[ranks[c[i]]];
          const int b = comm.rank_vertex[ranks[c[(i + 1) % c.size()]]];
          route.clear();
          topo.route(a, b, -1, route);
          const int lanes = std::max(1, topo.nvlink_lanes(slot, a - gpu0, b - gpu0));
          lane = std::min(lane, route_bottleneck(topo, route) / lanes);
        }
      }
      g.nvlink_cycles = true;
      g.channels = static_cast<int>(cycles.size());
      g.bw = quantize(lane, speeds);
      g.capacity = g.channels * g.bw;
      g.orders = cycles;
    } else {
      // Through an NVSwitch: every channel loads each GPU's NVLinks once each way.
      double total = kInf;
      for (int r : ranks) {
        double out = 0;
        const int v = comm.rank_vertex[r];
        for (std::size_t id = 0; id < topo.link_count(); ++id) {
          const auto& l = topo.link(static_cast<int>(id));
          if (l.from == v && l.cls == PathClass::kNvlink) out += l.bandwidth.value();
        }
        total = std::min(total, out);
      }
      g.bw = quantize(total, speeds);
      g.channels = std::max(1, std::min(max_search, static_cast<int>(total / g.bw + 1e-9)));
      g.capacity = total;
      g.orders = {identity};
    }
  } else {
    // PCIe (or mixed), or a release without a search: one ring in rank order; its speed is what
    // the most loaded link leaves it.
    std::map<int, int> load;
    PathType worst = PathType::kLoc;
    for (int i = 0; i < n; ++i) {
      route.clear();
      topo.route(comm.rank_vertex[ranks[i]], comm.rank_vertex[ranks[(i + 1) % n]], -1, route);
      for (int id : route) ++load[id];
      worst = std::max(worst, path_type(topo, route));
    }
    double bw = kInf;
    for (const auto& [id, count] : load) bw = std::min(bw, search_bw(topo, id) / count);
    g.type = worst;
    g.bw = quantize(bw, speeds);
    g.capacity = g.bw;
    g.channels = 1;
    g.orders = {identity};
    const auto& host = topo.node(comm.rank_slot[ranks.front()]).host;
    g.host_hops = host_memory_hops(comm, ranks);
    if (host.shm_bandwidth && g.host_hops > 0) g.shm = host.shm_bandwidth->value();
  }
  return g;
}

// Doubles the channels at high per-channel speeds (ncclTopoDupChannels and its predecessors).
void duplicate(int& channels, double& bw, const TunerSpec& t, int cc_min, int max_search) {
  const double from = t.duplicate_from.value();
  if (bw < from) return;
  if (cc_min > 80 && bw < 50e9 && channels > 4) return;
  const int doubled = std::min(2 * channels, max_search);
  if (doubled == channels) return;
  bw = bw * channels / doubled;
  channels = doubled;
}

// A ring order for one node: `order` (positions) rotated to start at `entry`; of the order and
// its reverse, the one that ends nearest `exit`.
std::vector<int> oriented(const std::vector<int>& order, int entry, int exit, bool reversible) {
  std::vector<int> best;
  std::ptrdiff_t best_pos = -1;
  for (int dir = 0; dir < (reversible ? 2 : 1); ++dir) {
    std::vector<int> o = order;
    if (dir == 1) std::reverse(o.begin(), o.end());
    std::rotate(o.begin(), std::find(o.begin(), o.end(), entry), o.end());
    const auto pos = std::find(o.begin(), o.end(), exit) - o.begin();
    if (pos > best_pos) {
      best = o;
      best_pos = pos;
    }
  }
  return best;
}

// A channel's way through a node without NVLink rings (positions into its ranks): in at
// `entry`, through the others in rank order, out at `exit` (`exit` out of range or equal to
// `entry`: the next position after `entry`).
std::vector<int> pcie_chain(int size, int entry, int exit) {
  if (entry >= size) entry = 0;
  if (exit >= size || exit == entry) exit = (entry + 1) % size;
  std::vector<int> pos{entry};
  for (int p = 0; p < size; ++p) {
    if (p != entry && p != exit) pos.push_back(p);
  }
  if (exit != entry) pos.push_back(exit);
  return pos;
}

}  // namespace

double node_shm_rate(const Communicator& comm, const std::vector<int>& ranks) {
  const int n = static_cast<int>(ranks.size());
  if (n < 2) return 0;
  const auto& topo = *comm.topo;
  const auto& host = topo.node(comm.rank_slot[ranks.front()]).host;
  if (!host.shm_bandwidth) return 0;
  // One hop through host memory loads it one way only; the ring comes back peer to peer.
  return host_memory_hops(comm, ranks) >= 2 ? host.shm_bandwidth->value() : 0;
}

NcclTopology nccl_search(const Communicator& comm) {
  NcclTopology out;
  const auto& topo = *comm.topo;
  const auto& t = comm.library->tuner;
  const int max_search = std::max(1, comm.library->max_channels / 2);
  const auto nodes = comm.ranks_by_node();
  out.ranks = comm.size();
  out.nodes = static_cast<int>(nodes.size());
  out.cc_min = std::numeric_limits<int>::max();
  for (const auto& ranks : nodes) {
    out.ppn = std::max(out.ppn, static_cast<int>(ranks.size()));
    const int cc = topo.node(comm.rank_slot[ranks.front()]).gpu.compute_capability;
    out.cc_min = std::min(out.cc_min, cc);
    out.cc_max = std::max(out.cc_max, cc);
  }
  const auto& node0 = topo.node(comm.rank_slot[nodes.front().front()]);
  out.amd = node0.host.vendor == "amd";
  if (out.nodes > 1) {
    if (const auto cap = topo.per_flow_cap()) out.flow_cap = cap->value();
  }
  const bool hopper = out.cc_min >= 90;

  // Intra-node graphs, once per node type and GPU set.
  std::map<std::pair<std::string, std::vector<int>>, IntraGraph> intra_of;
  std::vector<const IntraGraph*> intra(nodes.size());
  const IntraGraph* tightest = nullptr;
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    const int slot = comm.rank_slot[nodes[j].front()];
    std::vector<int> gpus;
    for (int r : nodes[j]) gpus.push_back(comm.rank_vertex[r] - topo.gpu_vertex(slot, 0));
    auto [it, added] = intra_of.try_emplace({topo.node(slot).about.name, gpus});
    if (added) it->second = intra_graph(comm, nodes[j], t, hopper, max_search);
    intra[j] = &it->second;
    // The node's rate with both directions busy bounds a ring that goes through host memory out
    // and back: a closed ring on one node with two such hops or more, and a ring between nodes,
    // whose way back to the NIC from a GPU beyond the P2P level is staged in host memory too.
    // A node's ring with one such hop keeps NCCL's figure for the CPUs' link.
    const bool both_ways = it->second.host_hops >= 2 || nodes.size() > 1;
    if (it->second.shm > 0 && both_ways) {
      out.shm_cap = out.shm_cap > 0 ? std::min(out.shm_cap, it->second.shm) : it->second.shm;
    }
    if (nodes[j].size() > 1 &&
        (!tightest || it->second.channels * it->second.bw < tightest->channels * tightest->bw)) {
      tightest = &it->second;
    }
  }

  NcclGraph ring;
  if (out.nodes == 1) {
    const auto& g = *intra.front();
    ring.channels = nodes.front().size() > 1 ? g.channels : 1;
    ring.bw_intra = g.bw;
    ring.type_intra = g.type;
    duplicate(ring.channels, ring.bw_intra, t, out.cc_min, max_search);
    for (int c = 0; c < ring.channels; ++c) {
      const auto& pos = g.orders[static_cast<std::size_t>(c) % g.orders.size()];
      std::vector<int> order;
      for (int p : pos) order.push_back(nodes.front()[static_cast<std::size_t>(p)]);
      ring.rings.push_back(order);
      ring.rail.push_back(-1);
    }
    out.summary = fmt::format("{} channel(s) of {:.1f} GB/s over {}", ring.channels,
                              ring.bw_intra / 1e9, to_string(ring.type_intra));
  } else {
    // Between nodes: per NIC, the GPU that enters the node from it (the GPU whose own NIC it is,
    // else the nearest) and the one that leaves through it (the next nearest); the NIC's speed
    // is its line rate (what NCCL reads from the device) or less where the GPUs' paths to it are
    // slower. Channels at one speed go to the NICs of the best path type in turn, as long as the
    // NIC, the GPUs' paths and the node's intra-node graph have room for them.
    struct Nic {
      int index = 0;
      double capacity = 0;  // line rate, B/s
      double speed = 0;     // min(capacity, the entry GPU's path in, the exit GPU's path out)
      int entry = 0, exit = 0;
      double entry_bw = 0, exit_bw = 0;
      PathType type = PathType::kSys;
      bool own = false;  // the entry GPU's own NIC (the one NCCL pairs with it)
      // Without NVLink rings: how often one channel crosses each link of the node (NIC to the
      // entry GPU, the chain through the other GPUs, the exit GPU to the NIC).
      std::map<int, int> links;
    };
    std::vector<Nic> nics;
    const auto& first = nodes.front();
    const int slot = comm.rank_slot[first.front()];
    const double line = topo.cluster().network.port.bandwidth.value();
    std::vector<int> route;
    for (int k = 0; k < topo.usable_nics(slot); ++k) {
      Nic nic;
      nic.index = k;
      nic.capacity = line;
      const int nv = topo.nic_vertex(slot, k);
      struct Candidate {
        bool own;
        PathType type;
        double in, out;
        std::size_t hops;
        int pos;
      };
      std::vector<Candidate> cands;
      for (std::size_t p = 0; p < first.size(); ++p) {
        const int gv = comm.rank_vertex[first[p]];
        route.clear();
        topo.route(gv, nv, -1, route);
        const double out_bw = route_bottleneck(topo, route);
        const auto type = path_type(topo, route);
        const auto hops = route.size();
        route.clear();
        topo.route(nv, gv, -1, route);
        cands.push_back({topo.nearest_nic(gv) == k, type, route_bottleneck(topo, route), out_bw,
                         hops, static_cast<int>(p)});
      }
      std::stable_sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
        if (a.own != b.own) return a.own;
        if (a.type != b.type) return a.type < b.type;
        if (a.in != b.in) return a.in > b.in;
        return a.hops < b.hops;
      });
      const auto& in = cands.front();
      // The exit: the nearest of the others, whichever NIC they call their own.
      const Candidate* exit_c = &cands.front();
      for (std::size_t i = 1; i < cands.size(); ++i) {
        const auto& c = cands[i];
        if (exit_c == &cands.front() || c.type < exit_c->type ||
            (c.type == exit_c->type &&
             (c.out > exit_c->out || (c.out == exit_c->out && c.hops < exit_c->hops)))) {
          exit_c = &c;
        }
      }
      const auto& out_c = *exit_c;
      nic.entry = in.pos;
      nic.exit = out_c.pos;
      nic.own = in.own;
      nic.entry_bw = in.in;
      nic.exit_bw = out_c.out;
      nic.type = std::max(in.type, out_c.type);
      nic.speed = std::min({nic.capacity, nic.entry_bw, nic.exit_bw});
      if (first.size() > 1 && !(intra.front()->nvlink_cycles)) {
        // NCCL's search takes a channel's speed from every link its path crosses, each time
        // it crosses it (search.cc, ncclTopoFollowPath): a ring that enters and leaves the node
        // through GPUs under one switch crosses that switch's uplink twice on its way around.
        const auto chain = pcie_chain(static_cast<int>(first.size()), nic.entry, nic.exit);
        const auto add = [&](int a, int b) {
          route.clear();
          topo.route(a, b, -1, route);
          for (int id : route) ++nic.links[id];
        };
        add(nv, comm.rank_vertex[first[static_cast<std::size_t>(chain.front())]]);
        for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
          add(comm.rank_vertex[first[static_cast<std::size_t>(chain[i])]],
              comm.rank_vertex[first[static_cast<std::size_t>(chain[i + 1])]]);
        }
        add(comm.rank_vertex[first[static_cast<std::size_t>(chain.back())]], nv);
        for (const auto& [id, count] : nic.links) {
          nic.speed = std::min(nic.speed, search_bw(topo, id) / count);
        }
      }
      nics.push_back(nic);
    }
    PathType best_type = PathType::kNet;
    for (const auto& n : nics) best_type = std::min(best_type, n.type);
    const auto& speeds = hopper ? t.speeds_inter_hopper : t.speeds_inter;
    double best = 0;
    for (const auto& n : nics) {
      if (n.type == best_type) best = std::max(best, n.speed);
    }
    if (tightest && tightest->nvlink_cycles) best = std::min(best, tightest->bw);
    // The channels at speed `s`: round robin over the NICs of the best path type that reach `s`
    // (a GPU's own NIC before the others it reaches as well), while every NIC and every link
    // of the channel's path through the node (or, on NVLink rings, its entry and exit GPU) has
    // room for one more channel, up to what the node's own graph takes at that speed.
    const auto assign = [&](double s) {
      int fit = max_search;
      if (tightest) {
        fit = tightest->nvlink_cycles
                  ? tightest->channels
                  : std::max(1, static_cast<int>(tightest->capacity / s + 1e-9));
      }
      std::vector<const Nic*> rails;
      for (const auto& n : nics) {
        if (n.type == best_type && n.speed + 1e-6 >= s) rails.push_back(&n);
      }
      std::stable_sort(rails.begin(), rails.end(),
                       [](const Nic* a, const Nic* b) { return a->own && !b->own; });
      std::map<int, double> nic_load, in_load, out_load, link_load;
      std::vector<const Nic*> chosen;
      const int most = std::min(fit, max_search);
      bool added = true;
      while (added && static_cast<int>(chosen.size()) < most) {
        added = false;
        for (const Nic* n : rails) {
          if (static_cast<int>(chosen.size()) >= most) break;
          const double eps = 1 + 1e-9;
          // With the path's links counted, they bound it (a PXN exit loads the relaying GPU's
          // PCIe link, not the exit GPU's); on NVLink rings, the entry and exit GPUs' paths.
          const bool by_links = !n->links.empty();
          if (nic_load[n->index] + s > n->capacity * eps ||
              (!by_links && (in_load[n->entry] + s > n->entry_bw * eps ||
                             out_load[n->exit] + s > n->exit_bw * eps)) ||
              std::any_of(n->links.begin(), n->links.end(), [&](const auto& l) {
                return link_load[l.first] + l.second * s > search_bw(topo, l.first) * eps;
              })) {
            continue;
          }
          for (const auto& [id, count] : n->links) link_load[id] += count * s;
          nic_load[n->index] += s;
          in_load[n->entry] += s;
          out_load[n->exit] += s;
          chosen.push_back(n);
          added = true;
        }
      }
      if (chosen.empty() && !rails.empty()) chosen.push_back(rails.front());
      return chosen;
    };
    // NCCL's search keeps, over the speeds it tries from the highest down, the graph with the
    // most bandwidth (channels x speed; search.cc, ncclTopoCompute): a speed a step lower may
    // fit one more channel on every NIC (8 NDR rails of a DGX H100: 8 x 45 GB/s where 48 GB/s
    // fits 7). It goes down only while the next speed is more than 0.49 of the best graph's
    // (`speedArray[speedIndex+1]/graph->bwInter > .49`), so many slow channels never replace a
    // fast one. Equal totals keep the higher speed.
    double s = quantize(best, speeds);
    std::vector<const Nic*> channel_rail = assign(s);
    for (const auto& speed : speeds) {
      const double v = speed.value();
      if (v >= s * (1 - 1e-9)) continue;
      if (!(v / s > 0.49)) break;
      const auto c = assign(v);
      if (static_cast<double>(c.size()) * v >
          static_cast<double>(channel_rail.size()) * s * (1 + 1e-9)) {
        channel_rail = c;
        s = v;
      }
    }
    const int channels = static_cast<int>(channel_rail.size());
    ring.channels = channels;
    ring.bw_intra = ring.bw_inter = s;
    ring.type_intra = tightest ? tightest->type : PathType::kLoc;
    ring.type_inter = best_type;
    // Inside nodes with NVLink rings, each channel threads a path from its entry GPU to its exit
    // GPU (per node type and GPU set, as the intra-node graphs).
    std::map<const IntraGraph*, std::vector<std::vector<int>>> paths;
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      if (!intra[j]->nvlink_cycles || paths.count(intra[j])) continue;
      const int size = static_cast<int>(nodes[j].size());
      std::vector<std::pair<int, int>> ends;
      for (const Nic* nic : channel_rail) {
        const int entry = nic->entry < size ? nic->entry : 0;
        const int exit = nic->exit < size && nic->exit != entry ? nic->exit : (entry + 1) % size;
        ends.emplace_back(entry, exit);
      }
      paths[intra[j]] = detail::nvlink_paths(comm, nodes[j], ends);
    }
    for (int c = 0; c < channels; ++c) {
      const Nic& nic = *channel_rail[static_cast<std::size_t>(c)];
      std::vector<int> order;
      for (std::size_t j = 0; j < nodes.size(); ++j) {
        const auto& g = *intra[j];
        const auto& ranks = nodes[j];
        if (ranks.size() == 1) {
          order.push_back(ranks.front());
          continue;
        }
        // The GPUs next to the channel's NIC enter and leave the node (the node types of a
        // job are alike in practice; other nodes take the same positions where they exist).
        const int size = static_cast<int>(ranks.size());
        const int entry = nic.entry < size ? nic.entry : 0;
        const int exit = nic.exit < size && nic.exit != entry ? nic.exit : (entry + 1) % size;
        std::vector<int> pos;
        if (g.nvlink_cycles) {
          pos = paths[&g][static_cast<std::size_t>(c)];
          if (pos.empty()) {
            pos = oriented(g.orders[static_cast<std::size_t>(c) % g.orders.size()], entry, exit,
                           false);
          }
        } else {
          pos = pcie_chain(size, entry, exit);
        }
        for (int p : pos) order.push_back(ranks[static_cast<std::size_t>(p)]);
      }
      ring.rings.push_back(order);
      ring.rail.push_back(nic.index);
    }
    duplicate(ring.channels, ring.bw_intra, t, out.cc_min, max_search);
    if (ring.channels > static_cast<int>(ring.rings.size())) {
      // Duplicated channels repeat the rings (and rails) of the first ones.
      const auto base = ring.rings.size();
      for (std::size_t c = base; c < static_cast<std::size_t>(ring.channels); ++c) {
        ring.rings.push_back(ring.rings[c % base]);
        ring.rail.push_back(ring.rail[c % base]);
      }
      ring.bw_inter = ring.bw_intra;
    }
    std::set<int> used(ring.rail.begin(), ring.rail.end());
    out.summary = fmt::format(
        "{} channel(s) of {:.1f} GB/s, one per NIC over {} of {} NICs ({} to the NIC), {} inside "
        "the node",
        ring.channels, ring.bw_inter / 1e9, used.size(), topo.usable_nics(slot),
        to_string(ring.type_inter), to_string(ring.type_intra));
  }
  out.ring = ring;
  out.tree = ring;  // NCCL's trees use the ring's channels and speeds (init.cc)
  // Which hops of the first ring go through host memory: inside a node whose host gives its SHM
  // rate, beyond NCCL's P2P level.
  if (out.shm_cap > 0 && !ring.rings.empty()) {
    std::map<int, int> local;  // slot -> the job's GPUs on it
    for (const auto& ranks : nodes) {
      local[comm.rank_slot[ranks.front()]] = static_cast<int>(ranks.size());
    }
    const auto& order = ring.rings.front();
    std::vector<int> hop;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int a = order[i], b = order[(i + 1) % order.size()];
      const int slot = comm.rank_slot[a];
      const auto& host = topo.node(slot).host;
      bool shm = false;
      if (slot == comm.rank_slot[b] && host.shm_bandwidth) {
        hop.clear();
        topo.route(comm.rank_vertex[a], comm.rank_vertex[b], -1, hop);
        shm = path_type(topo, hop) > p2p_level(host, local[slot]);
      }
      out.shm_hops.push_back(shm);
    }
  }

  // NVLS: Hopper GPUs that all reach one NVSwitch, on one node of more than two GPUs.
  const bool offered =
      std::find(t.algorithms.begin(), t.algorithms.end(), "nvls") != t.algorithms.end();
  if (offered && hopper && out.nodes == 1 && out.ppn > 2 && intra.front()->type == PathType::kNvl &&
      !intra.front()->nvlink_cycles) {
    // Each NVLS channel loads its head GPU's NVLinks twice and the others once: with one head per
    // GPU, (ppn + 1) x speed fits in a GPU's NVLink bandwidth.
    const double total = intra.front()->capacity;
    NcclGraph g;
    g.channels = out.ppn;
    g.bw_intra = quantize(total / (out.ppn + 1), t.speeds_intra_hopper);
    g.bw_inter = g.bw_intra;
    g.type_intra = PathType::kNvl;
    out.nvls_graph = g;
    out.nvls = true;
  }
  return out;
}

namespace {

int protocol_index(const std::string& p) { return p == "LL" ? 0 : p == "LL128" ? 1 : 2; }

// The generation row of NCCL's tables: below sm80 Volta's, sm80 Ampere's, from sm90 Hopper's.
const char* generation(int cc) { return cc >= 90 ? "hopper" : cc >= 80 ? "ampere" : "volta"; }

// A per-generation cap (B/s) for the node-count class; +inf where the table has none.
double cap(const std::map<std::string, hardware::PerNodeCount>& table, const std::string& row,
           int nodes) {
  const auto it = table.find(row);
  if (it == table.end()) return kInf;
  const double v = it->second[static_cast<std::size_t>(nodes <= 2 ? nodes - 1 : 2)].value();
  return v > 0 ? v : kInf;
}

}  // namespace

NcclChoice nccl_tune(const hardware::LibrarySpec& library, const NcclTopology& topo,
                     CollectiveOp op, double bytes, const std::string& algorithm, int root) {
  const auto& t = library.tuner;
  const int n = topo.ranks;
  const int nodes = topo.nodes;
  const bool allreduce = op == CollectiveOp::kAllReduce;
  const bool rooted = op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce;
  if (!algorithm.empty() &&
      std::find(t.algorithms.begin(), t.algorithms.end(), algorithm) == t.algorithms.end()) {
    fail_at({}, "algorithm",
            fmt::format("NCCL {} ({}) does not offer the '{}' algorithm (it offers {})", t.version,
                        library.about.name, algorithm, fmt::join(t.algorithms, ", ")));
  }
  NcclChoice choice;
  // Steps of a ring: allreduce 2(n-1), allgather and reduce-scatter n-1, broadcast and reduce n;
  // of them, those that cross the network.
  const int nsteps = allreduce ? 2 * (n - 1) : rooted ? n : n - 1;
  const int inter_steps = nodes == 1 ? 0 : allreduce ? 2 * (nodes - 1) : nodes - 1;
  const int log2_nodes = static_cast<int>(std::floor(std::log2(std::max(1, nodes))));
  const bool ll128_arch =
      topo.cc_min == topo.cc_max &&
      std::find(t.ll128_compute_capabilities.begin(), t.ll128_compute_capabilities.end(),
                topo.cc_min) != t.ll128_compute_capabilities.end();
  for (const auto& a : t.algorithms) {
    const NcclGraph& g = a == "nvls" ? topo.nvls_graph : a == "tree" ? topo.tree : topo.ring;
    for (const auto& proto : library.protocols) {
      NcclCost c;
      c.algorithm = a;
      c.protocol = proto.name;
      c.channels = g.channels;
      const int p = protocol_index(proto.name);
      // Where NCCL offers the pair (tuning.cc's enable matrix); the algorithm's own reasons
      // come last and name the entry.
      if (a == "nvls" && proto.name != "Simple") c.why_not = "NVLS is Simple only";
      if (proto.name == "LL128") {
        const bool intra_ok = g.type_intra <= PathType::kNvb || topo.ppn == 1;
        const std::string& net_path =
            topo.cc_min >= 90 ? t.ll128_network_path_hopper : t.ll128_network_path;
        const PathType limit = net_path == "pix"   ? PathType::kPix
                               : net_path == "pxb" ? PathType::kPxb
                               : net_path == "pxn" ? PathType::kPxn
                                                   : PathType::kPhb;
        const bool inter_ok = nodes == 1 || g.type_inter <= limit;
        if (!ll128_arch) {
          c.why_not = fmt::format("LL128 is not enabled on compute capability {}", topo.cc_min);
        } else if (!intra_ok) {
          c.why_not = "LL128 needs NVLink between the node's GPUs";
        } else if (!inter_ok) {
          c.why_not = fmt::format("LL128 needs each GPU's NIC within {} ({} here)", net_path,
                                  to_string(g.type_inter));
        }
      }
      if (a == "tree" && n < 2) c.why_not = "one rank";
      if (a == "nvls" && !topo.nvls) {
        c.why_not = "NVLS needs Hopper GPUs on one NVSwitch node of more than 2 GPUs";
      }
      if (a == "tree" && !allreduce) c.why_not = "trees run allreduce only";
      if (a == "nvls" && !allreduce) c.why_not = "NVLS runs allreduce only here";
      if (g.channels < 1) c.why_not = c.why_not.empty() ? "no channels" : c.why_not;
      c.enabled = c.why_not.empty();
      if (!c.enabled) {
        choice.table.push_back(c);
        continue;
      }
      // Bandwidth (tuning.cc): channels x per-channel speed, then the algorithm and protocol's
      // factors and caps, then the ratio to algorithm bandwidth.
      const double bw = nodes <= 2 ? g.bw_intra : g.bw_inter;
      double bus = g.channels * (a == "nvls" ? std::min(g.bw_intra, g.bw_inter) : bw);
      const std::string row = nodes == 1 ? generation(topo.cc_min) : topo.amd ? "ampere" : "volta";
      const double ll_max = cap(t.ll_max, row, nodes);
      const std::string gen = generation(topo.cc_min);
      if (a == "ring" && proto.name == "LL") bus *= t.ring_ll;
      if (a == "ring" && proto.name == "LL128") {
        bus = std::min(bus * (topo.ppn < 2 ? t.ring_ll128_one_gpu : t.ring_ll128),
                       g.channels * cap(t.ring_ll128_per_channel, gen, nodes));
      }
      if (a == "tree")
        bus = std::min(bus * t.tree, g.channels * cap(t.tree_per_channel, gen, nodes));
      if (a == "tree" && proto.name == "LL") bus *= t.tree_ll;
      if (a == "tree" && proto.name == "LL128") {
        bus = std::min(bus * (nodes == 1 ? t.tree_ll128_one_node : t.tree_ll128_nodes),
                       g.channels * cap(t.tree_ll128_per_channel, gen, nodes));
      }
      const double ratio = a == "ring"   ? static_cast<double>(n) / nsteps
                           : a == "tree" ? 0.5
                                         : t.nvls_ratio;
      // LL's cap (llMaxBw) bounds the whole collective, not each channel: what the channels
      // alone give is kept, for fewer launched channels to scale down (below).
      c.channel_bus_bw = bus;
      if (proto.name == "LL" && (a == "ring" || a == "tree")) bus = std::min(bus, ll_max);
      c.bus_bw = bus;
      c.alg_bw = bus * ratio;
      // Latency (tuning.cc): the base, then hardware latency per step inside and between nodes.
      const auto intra_cls = g.type_intra <= PathType::kNvb ? PathClass::kNvlink : PathClass::kPcie;
      double intra = t.step_latency.at(intra_cls).at(a)[static_cast<std::size_t>(p)].value();
      const double inter =
          t.step_latency.at(PathClass::kNetwork).at(a)[static_cast<std::size_t>(p)].value();
      double lat = t.base_latency.at(a)[static_cast<std::size_t>(p)].value();
      if (a == "ring") {
        if (nodes > 1 && t.network_overhead_simple_factor > 1) {
          const double overhead =
              (topo.amd ? t.network_overhead_amd : t.network_overhead_intel).value() *
              (proto.name == "Simple" ? t.network_overhead_simple_factor : 1.0);
          intra = std::max(intra, overhead);
        }
        if (rooted) {
          lat += nodes > 1 ? inter : intra;  // sameChannels: one step's latency
        } else {
          lat += (nsteps - inter_steps) * intra + inter_steps * inter;
        }
        if (allreduce && nodes > 1 && proto.name == "Simple" && t.plateau_bytes.value() > 0 &&
            bytes / (g.channels * n) >= t.plateau_bytes.value()) {
          lat *= topo.cc_min < 80 ? t.plateau_factor_pre_ampere : t.plateau_factor;
        }
      } else if (a == "tree") {
        lat += 2 * ((topo.ppn - 1) * intra + log2_nodes * inter);
        // The tree's size correction (treeCorrectionFactor) on its bandwidth.
        const auto& corr = t.tree_correction[static_cast<std::size_t>(p)];
        const double lg = std::floor(std::log2(std::max(1.0, bytes / 64.0)));
        if (bytes >= 64 && lg < static_cast<double>(corr.size())) {
          c.alg_bw *= corr[static_cast<std::size_t>(lg)];
        }
      } else {
        lat = intra + (nodes > 1 ? inter : 0.0);
      }
      c.latency = lat;
      c.time = lat + (c.alg_bw > 0 ? bytes / c.alg_bw : kInf);
      choice.table.push_back(c);
    }
  }
  const NcclCost* best = nullptr;
  for (const auto& c : choice.table) {
    if (!c.enabled || (!algorithm.empty() && c.algorithm != algorithm)) continue;
    if (!best || c.time < best->time) best = &c;
  }
  if (!best) {
    std::string why;
    for (const auto& c : choice.table) {
      if (c.algorithm == (algorithm.empty() ? "ring" : algorithm) && !c.why_not.empty()) {
        why = c.why_not;
        break;
      }
    }
    fail_at({}, "algorithm",
            fmt::format("NCCL's '{}' cannot run {} here: {}",
                        algorithm.empty() ? "ring" : algorithm, to_string(op), why));
  }
  choice.best = *best;
  // Channels the kernel runs (ncclTopoPostset), then fewer while each thread would have less
  // than the protocol's threshold of bytes (enqueue.cc): what small messages really use.
  const auto* proto = library.protocol(best->protocol);
  const int runtime = best->algorithm == "nvls"
                          ? t.nvls_channels
                          : std::min(library.max_channels, best->channels * t.runtime_factor);
  int nc = runtime;
  int nt = proto->max_threads;
  const double threshold = proto->thread_threshold.value() *
                           (best->algorithm == "ring" && best->protocol == "LL" ? n : 1);
  while (bytes < static_cast<double>(nc) * nt * threshold) {
    if (nc >= 2) {
      --nc;
    } else if (nt % 128 == 0) {
      nt /= 2;
    } else {
      break;
    }
  }
  choice.runtime_channels = runtime;
  choice.launched_channels = nc;
  // The launched channels give their share of the channels' rate; a cap on the whole
  // collective still holds where that share reaches it.
  const double share = std::min(1.0, static_cast<double>(nc) / runtime);
  const double scale = best->bus_bw > 0
                           ? std::min(best->bus_bw, best->channel_bus_bw * share) / best->bus_bw
                           : share;
  choice.alg_bw = best->alg_bw * scale;
  // The tuner does not know the transport's ceiling; the data does. Each of the search graph's
  // rings leaves a node from one rank, whose proxy thread drives all of that rank's sockets
  // (NCCL_SOCKET_NTHREADS 0 since 2.5.6 outside AWS and GCP): the channels NCCL launches on the
  // same ring share that rank's one stream's worth.
  const auto& graph = best->algorithm == "tree" ? topo.tree : topo.ring;
  if (topo.flow_cap > 0 && best->bus_bw > 0 && best->algorithm != "nvls") {
    const double bus = best->bus_bw * scale;
    const double limit =
        static_cast<double>(std::max<std::size_t>(1, graph.rings.size())) * topo.flow_cap;
    if (bus > limit) {
      choice.alg_bw *= limit / bus;
      choice.transport_bound = true;
    }
  }
  // Nor the host's: GPUs that NCCL does not connect peer to peer exchange through host memory
  // (its SHM transport), whose rate with both directions busy is the platform's
  // (HostSpec::shm_bandwidth); every channel of the graph crosses that hop, so the bus bandwidth
  // is at most that rate. A broadcast or reduce is a chain along the ring that leaves out one
  // hop (the one into the root for a broadcast, out of it for a reduce): where it crosses host
  // memory once, its data flow one way, which was measured at 10-11 GB/s, near the PCIe path's
  // own rate, and it is left to that; where it crosses twice or more, the crossings go both ways
  // (a ring between two sockets crosses them alternately) and the rate holds.
  bool both_ways = !rooted;
  if (rooted && root >= 0 && !topo.shm_hops.empty()) {
    const auto& order = topo.ring.rings.front();
    const auto at =
        static_cast<std::size_t>(std::find(order.begin(), order.end(), root) - order.begin());
    const std::size_t size = order.size();
    const std::size_t skipped = op == CollectiveOp::kBroadcast ? (at + size - 1) % size : at;
    int crossings = 0;
    for (std::size_t i = 0; i < size; ++i) crossings += i != skipped && topo.shm_hops[i];
    both_ways = crossings >= 2;
  }
  if (topo.shm_cap > 0 && both_ways && best->bus_bw > 0 && best->alg_bw > 0 &&
      best->algorithm != "nvls") {
    const double bus = best->bus_bw * choice.alg_bw / best->alg_bw;
    if (bus > topo.shm_cap) {
      choice.alg_bw *= topo.shm_cap / bus;
      choice.shm_bound = true;
    }
  }
  choice.time = best->latency + (choice.alg_bw > 0 ? bytes / choice.alg_bw : kInf);
  return choice;
}

}  // namespace dlsim::networks
