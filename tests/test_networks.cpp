// Hardware profiles, topology, routing, placement and collective algorithms.

#include <doctest/doctest.h>

#include <fmt/format.h>
#include "approx.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/hostlist.hpp"
#include "hardware/loader.hpp"
#include "networks/collective.hpp"
#include "networks/nccl.hpp"

using namespace dlsim;
using namespace dlsim::networks;

namespace {

const std::string kFixtures = DLSIM_TEST_HARDWARE_DIR;

struct Job {
  hardware::ClusterSpec cluster;
  std::unique_ptr<Topology> topo;
  Placement placement;
  Communicator comm;
  Job(hardware::ClusterSpec c, int gpus, std::optional<int> per_node = std::nullopt,
      int servers = 0)
      : cluster(std::move(c)) {
    placement = place(cluster, {gpus, per_node, ""});
    const auto job = with_server_nodes(cluster, placement, servers);
    topo = std::make_unique<Topology>(cluster, job.nodes);
    comm = make_communicator(*topo, placement, job.server_slots);
  }
};

CollectiveRequest request(CollectiveOp op, double bytes) {
  CollectiveRequest r;
  r.op = op;
  r.size = Bytes(bytes);
  return r;
}

}  // namespace

TEST_CASE("every_algorithm_and_topology_kind_is_registered") {
  for (const char* name : {"auto", "ring", "tree", "nvls", "hd", "hierarchical", "ps"}) {
    CHECK_MESSAGE(collective_algorithms().find(name) != nullptr, name);
  }
  for (const auto& kind : hardware::topology_kinds()) {
    CHECK_MESSAGE(network_fabrics().find(kind) != nullptr, kind);
  }
}

TEST_CASE("every_preset_loads_and_clusters_build_a_connected_topology") {
  int clusters = 0;
  for (const auto& p : hardware::list_presets()) {
    CAPTURE(p.name);
    CHECK_NOTHROW(hardware::load_any(p.name, p.kind));
    if (p.kind != "cluster") continue;
    const auto c = hardware::load_cluster(p.name);
    std::vector<int> nodes;
    for (int i = 0; i < std::min(c.node_count(), 3); ++i) nodes.push_back(i);
    const Topology t(c, nodes);
    // Structured routes are as short as a breadth-first search over the whole graph.
    for (int a = 0; a < static_cast<int>(nodes.size()); ++a) {
      for (int b = 0; b < static_cast<int>(nodes.size()); ++b) {
        for (int g = 0; g < t.node(b).gpus; ++g) {
          std::vector<int> route;
          t.route(t.gpu_vertex(a, 0), t.gpu_vertex(b, g), -1, route);
          if (a == b && g == 0) continue;
          CHECK(route.size() == t.search_route(t.gpu_vertex(a, 0), t.gpu_vertex(b, g)).size());
        }
      }
    }
    ++clusters;
  }
  CHECK(clusters >= 14);
}

TEST_CASE("extends_overrides_only_what_it_sets") {
  const auto a = hardware::load_gpu("v100-sxm2-16gb");
  const auto b = hardware::load_gpu("v100-sxm2-32gb");
  CHECK(a.memory_capacity.value() == 16.0 * (1 << 30));
  CHECK(b.memory_capacity.value() == 32.0 * (1 << 30));
  CHECK(b.peak.at("fp32").value() == a.peak.at("fp32").value());
  CHECK(a.peak.at("fp32").value() == dlsim_test::approx(15.7e12));
  CHECK(a.memory_bandwidth.value() == dlsim_test::approx(900e9));
  CHECK(a.peak_for(Precision::kBf16).value() == a.peak.at("fp32").value());  // no bf16 on V100
}

TEST_CASE("default_cluster_is_16_nodes_of_4_v100_with_one_edr_nic") {
  const auto c = hardware::load_cluster("default");
  CHECK(c.node_count() == 16);
  CHECK(c.gpu_count() == 64);
  CHECK(c.groups[0].node.nics == 1);
  CHECK(c.network.port.bandwidth.value() == dlsim_test::approx(12.5e9));
  CHECK(c.groups[0].hostnames.front() == "iris-169");
  CHECK(c.groups[0].hostnames.back() == "iris-184");
}

TEST_CASE("slurm_host_lists_expand_like_scontrol") {
  CHECK(expand_hostlist("iris-[001-003,010]") ==
        std::vector<std::string>{"iris-001", "iris-002", "iris-003", "iris-010"});
  CHECK(expand_hostlist("a[1-2]b[0-1],c") ==
        std::vector<std::string>{"a1b0", "a1b1", "a2b0", "a2b1", "c"});
  CHECK_THROWS(expand_hostlist("n[3-1]"));
  CHECK_THROWS(expand_hostlist("n[1-2"));
}

TEST_CASE("placement_packs_gpus_onto_the_first_nodes") {
  const auto c = hardware::load_cluster("dgx1-v100");
  CHECK(place(c, {8, std::nullopt, ""}).nodes == std::vector<int>{0});
  CHECK(place(c, {16, 4, ""}).nodes == std::vector<int>{0, 1, 2, 3});
  const auto p = place(c, {3, 1, "node[003,001],node010"});
  CHECK(p.nodes == std::vector<int>{2, 0, 9});
  CHECK_THROWS_AS(place(c, {257, std::nullopt, ""}), InputError);
  CHECK_THROWS_AS(place(c, {8, 9, ""}), InputError);
}

TEST_CASE("nccl_style_ring_search_finds_the_dgx1_nvlink_rings") {
  // DGX-1 P100: two edge-disjoint Hamiltonian cycles of the hybrid cube-mesh, each used in both
  // directions: 4 rings. DGX-1 V100 (6 lanes per GPU): 6 rings. (NCCL 2.3: one ring per lane.)
  Job p100(hardware::load_cluster("dgx1-p100"), 8);
  const auto r1 = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), p100.comm, "ring");
  CHECK(r1.cost.channels == 4);
  Job v100(hardware::load_cluster("dgx1-v100"), 8);
  const auto r2 = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), v100.comm, "ring");
  CHECK(r2.cost.channels == 6);
}

TEST_CASE("nccl_1_runs_one_ring_in_device_order_through_host_memory_between_sockets") {
  // NCCL 1.3 (src/core.cu): one ring in NVML order, no search. On a DGX-1 P100, 0-1-2-3 are
  // joined by NVLink (one lane: 20 GB/s x 0.8 = 16, the search speed below it 15 GB/s); with
  // all 8 GPUs the hops 3->4 and 7->0 cross the sockets through host memory, one each way, at
  // the node's rate with both directions busy: host.shm_bandwidth 4.6 GB/s, half the 9.19 GB/s
  // that tartan_pnnl measured in total between GPUs that are not peers with both directions
  // busy (dgx1_ascending.txt), below NCCL's figure for Broadwell's QPI (BDW_QPI_BW, 6 GB/s).
  // Latency: nccl-2.3's Simple table, 8.4 + 2(n-1) x 5.7 us.
  struct Expected {
    int gpus;
    double bw, lat;
  };
  for (const auto& e :
       {Expected{4, 15e9, 8.4e-6 + 6 * 5.7e-6}, Expected{8, 4.6e9, 8.4e-6 + 14 * 5.7e-6}}) {
    CAPTURE(e.gpus);
    Job job(hardware::load_cluster("dgx1-p100", std::string("nccl-1")), e.gpus);
    const double bytes = 1 << 30;
    const auto r = run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "auto");
    CHECK(r.cost.algorithm == "ring");
    CHECK(r.cost.protocol == "Simple");
    CHECK(r.cost.channels == 1);
    CHECK(r.cost.latency.value() == dlsim_test::approx(e.lat).epsilon(1e-9));
    CHECK(r.time.value() ==
          dlsim_test::approx(e.lat + 2.0 * (e.gpus - 1) / e.gpus * bytes / e.bw).epsilon(1e-3));
  }
}

TEST_CASE("a_ring_across_sockets_runs_at_nccls_figure_for_the_cpus_interconnect") {
  // NCCL takes the link between two sockets at its figure for the CPU (ncclTopoGetInterCpuBw:
  // BDW_QPI_BW 6 GB/s, SKL_QPI_BW 10 GB/s), whatever the interconnect's own rate. GPUs 0-4 of a
  // DGX-1 have no NVLink cycle (GPU 4's only NVLink peer among them is GPU 0), so the one ring
  // crosses the sockets: busbw 6.0 GB/s, against 5.57 GB/s measured for 1 GiB (collectives.csv,
  // tartan_pnnl, 5 GPUs); 12.0 GB/s (the PCIe uplinks) before. hkbu-ib's generic Skylake node
  // (4 GPUs, two under each socket) without its measured SHM rate: 10 GB/s. A node without a
  // generation keeps its link's rate. The DGX-1's ring crosses through host memory one way only
  // (back from GPU 4 to GPU 0 over NVLink), so its rate with both directions busy
  // (host.shm_bandwidth) does not apply.
  struct Expected {
    std::string cluster;
    int gpus;
    double busbw;
    bool keep_shm;
  };
  for (const auto& e : {Expected{"dgx1-p100", 5, 6e9, true}, Expected{"hkbu-ib", 4, 10e9, false}}) {
    CAPTURE(e.cluster);
    auto spec = hardware::load_cluster(e.cluster);
    if (!e.keep_shm) {
      for (auto& g : spec.groups) g.node.host.shm_bandwidth.reset();
    }
    Job job(spec, e.gpus);
    const double bytes = 1 << 30;
    const auto r = run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "ring");
    CHECK(r.cost.algorithm == "ring");
    CHECK(r.busbw == dlsim_test::approx(e.busbw).epsilon(0.01));
  }
  auto cluster = hardware::load_cluster("dgx1-p100");
  for (auto& g : cluster.groups) g.node.host.generation.clear();
  Job job(cluster, 5);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), job.comm, "ring");
  CHECK(r.busbw == dlsim_test::approx(12e9).epsilon(0.01));
}

TEST_CASE("gpus_beyond_nccls_p2p_level_exchange_through_host_memory_at_the_nodes_shm_rate") {
  // hkbu-ib's node (pcie-4gpu) puts two GPUs under each socket's PCIe switch, and NCCL connects
  // GPUs peer to peer only up to PXB on Intel (ncclTopoCheckP2p), so its ring crosses the sockets
  // through host memory: every channel at most the node's host.shm_bandwidth, 3.9 GB/s
  // (NVIDIA/nccl#384), bus bandwidth 3.9 GB/s where NCCL's own model says 10. Two GPUs under one
  // switch (PIX) stay peer to peer: 12 GB/s (PCI_BW).
  Job four(hardware::load_cluster("hkbu-ib"), 4);
  const double bytes = 1 << 30;
  const auto r = run_collective(request(CollectiveOp::kAllReduce, bytes), four.comm, "ring");
  CHECK(r.busbw == dlsim_test::approx(3.9e9).epsilon(0.01));
  CHECK(r.cost.time.value() == dlsim_test::approx(r.time.value()).epsilon(1e-3));
  CHECK(r.cost.why.find("SHM transport at 3.90 GB/s") != std::string::npos);
  Job two(hardware::load_cluster("hkbu-ib"), 2);
  const auto p = run_collective(request(CollectiveOp::kAllReduce, bytes), two.comm, "ring");
  CHECK(p.busbw == dlsim_test::approx(12e9).epsilon(0.01));
  CHECK(p.cost.why.find("SHM") == std::string::npos);
  // GPUs 0 and 1 moved under different sockets: on Intel through host memory; a pair of GPUs
  // on an AMD host is peer to peer (ncclTopoCheckP2p), no SHM ceiling.
  auto split = hardware::load_cluster("hkbu-ib");
  for (auto& g : split.groups) {
    for (auto& l : g.node.links) {
      if (l.a == "gpu1" && l.b == "plx0") l.b = "plx1";
    }
  }
  Job intel(split, 2);
  const auto i = run_collective(request(CollectiveOp::kAllReduce, bytes), intel.comm, "ring");
  CHECK(i.busbw == dlsim_test::approx(3.9e9).epsilon(0.01));
  for (auto& g : split.groups) {
    g.node.host.vendor = "amd";
    g.node.host.generation = "zen2";
  }
  Job amd(split, 2);
  const auto q = run_collective(request(CollectiveOp::kAllReduce, bytes), amd.comm, "ring");
  CHECK(q.cost.why.find("SHM") == std::string::npos);
  CHECK(q.busbw > 3.9e9 * 2);
  // Across nodes, each node's chain crosses its sockets the same way.
  Job eight(hardware::load_cluster("hkbu-ib"), 8);
  const auto m = run_collective(request(CollectiveOp::kAllReduce, bytes), eight.comm, "ring");
  CHECK(m.busbw == dlsim_test::approx(3.9e9).epsilon(0.01));
  // A broadcast between the two sockets flows one way (measured 10.3-11.1 GB/s through host
  // memory, NVIDIA/nccl#384 and the log corpus' GeForce pair): not held to the SHM rate.
  auto b = request(CollectiveOp::kBroadcast, bytes);
  b.root = 0;
  const auto one_way = run_collective(b, intel.comm, "ring");
  CHECK(one_way.busbw > 3.9e9 * 2);
  CHECK(one_way.cost.why.find("SHM") == std::string::npos);
  // On the 4-GPU node the ring 0 1 2 3 crosses the sockets at 1 -> 2 and 3 -> 0. A broadcast
  // leaves out the hop into its root, a reduce the hop out of it: from root 0 a broadcast
  // crosses once (one way, unbounded) and a reduce twice (both ways, 3.9 GB/s); from root 1 the
  // broadcast crosses twice, and from root 3 the reduce once.
  const auto rooted = [&](CollectiveOp op, int root) {
    auto req = request(op, bytes);
    req.root = root;
    return run_collective(req, four.comm, "ring").cost.why.find("SHM transport") !=
           std::string::npos;
  };
  CHECK_FALSE(rooted(CollectiveOp::kBroadcast, 0));
  CHECK(rooted(CollectiveOp::kReduce, 0));
  CHECK(rooted(CollectiveOp::kBroadcast, 1));
  CHECK_FALSE(rooted(CollectiveOp::kReduce, 3));
}

TEST_CASE("mpi_ring_allreduce_time_is_its_closed_form_with_latency_once_per_step") {
  // switched.yaml with the MPI test library: a step's alpha is its route's latencies, gpu-cpu-nic
  // 0.5 + 0.5, ports 1 + 1, nic-cpu-gpu 0.5 + 0.5 = 4 us (no message overhead, no per-step
  // library latency on top); beta = 1 / 10 GB/s. n = 8, S = 8 MB: 14 steps of 4 us + 1 MB /
  // 10 GB/s.
  Job job(hardware::load_cluster(kFixtures + "/switched.yaml"), 8);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 8e6), job.comm, "ring");
  CHECK(r.time.value() == dlsim_test::approx(14 * (4e-6 + 1e6 / 10e9)).epsilon(1e-12));
  CHECK(r.cost.time.value() == dlsim_test::approx(r.time.value()).epsilon(1e-12));
  CHECK(r.busbw == dlsim_test::approx(8e6 / r.time.value() * 14 / 8));
  CHECK(r.cost.protocol.empty());
}

TEST_CASE("every_algorithm_takes_its_cost_on_a_quiet_network") {
  // Point-to-point schedules (MPI library) against their closed forms, and NCCL's algorithms
  // (nccl preset) against NCCL's own tuner time: on one non-blocking switch with one GPU per
  // node, every channel's flows fit their links, so execution adds nothing.
  const auto switched = hardware::load_cluster(kFixtures + "/switched.yaml");
  const auto nccl = hardware::load_cluster(kFixtures + "/switched-nccl.yaml");
  const auto rails = hardware::load_cluster(kFixtures + "/rails.yaml");
  for (const auto& name : collective_algorithms().names()) {
    if (name == "nvls") continue;  // needs Hopper NVSwitch nodes: dgx_h100_nvls_* below
    for (const auto* cluster : {&switched, &nccl}) {
      for (auto op : all_ops()) {
        if (!collective_algorithms().at(name).make()->supports(op, cluster->library)) continue;
        for (int n : {2, 5, 8, 16}) {
          const bool pow2 = (n & (n - 1)) == 0;
          if (name == "hd" && !pow2 && op != CollectiveOp::kAllReduce &&
              op != CollectiveOp::kBroadcast && op != CollectiveOp::kReduce) {
            continue;
          }
          if (name == "hierarchical" && n % 4 != 0) continue;
          const bool rail = name == "hierarchical" && cluster == &switched;
          Job job(rail ? rails : *cluster, n, std::nullopt, name == "ps" ? 2 : 0);
          for (double bytes : {4096.0, 3e6, 256e6}) {
            auto req = request(op, bytes);
            req.ps.servers = 2;
            const auto r = run_collective(req, job.comm, name);
            CAPTURE(name);
            CAPTURE(cluster->library.about.name);
            CAPTURE(to_string(op));
            CAPTURE(n);
            CAPTURE(bytes);
            CHECK(r.time.value() == dlsim_test::approx(r.cost.time.value()).epsilon(1e-9));
          }
        }
      }
    }
  }
}

TEST_CASE("halving_doubling_allreduce_counts_steps_like_rabenseifner") {
  // n = 6: p = 4, r = 2 -> fold in + 2 halvings + 2 doublings + fold out = 6 steps.
  Job job(hardware::load_cluster(kFixtures + "/switched.yaml"), 6);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 4e6), job.comm, "hd");
  CHECK(r.steps == 6);
  // Bandwidth term: S + S/2 + S/4 + S/4 + S/2 + S at 10 GB/s; 6 alphas of 4 us.
  CHECK(r.time.value() == dlsim_test::approx(6 * 4e-6 + 3.5 * 4e6 / 10e9).epsilon(1e-12));
}

TEST_CASE("large_ring_busbw_approaches_the_bottleneck_link") {
  Job job(hardware::load_cluster(kFixtures + "/switched.yaml"), 16);
  const auto r =
      run_collective(request(CollectiveOp::kAllReduce, 4.0 * (1 << 30)), job.comm, "ring");
  CHECK(r.busbw == dlsim_test::approx(10e9).epsilon(0.01));
}

TEST_CASE("nccl_latency_is_its_table_counted_once") {
  // NCCL 2.21 (tuning.cc): ring allreduce latency = baseLat[ring][LL] + 2(n-1) x
  // hwLat[NVLink][ring][LL] = 6.6 + 14 x 0.6 = 15.0 us on one DGX A100; no link latencies and
  // no transport overhead on top. 8 B move in a few ns more.
  Job job(hardware::load_cluster("dgx-a100"), 8);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 8), job.comm, "auto");
  CHECK(r.cost.algorithm == "ring");
  CHECK(r.cost.protocol == "LL");
  CHECK(r.cost.latency.value() == dlsim_test::approx(15.0e-6).epsilon(1e-9));
  CHECK(r.time.value() == dlsim_test::approx(15.0e-6).epsilon(1e-3));
  CHECK(r.steps == 1);
  // Across 8 single-GPU nodes: ring LL 6.6 + 14 x 2.7 = 44.4 us; the tree's LL latency
  // 6.8 + 2 (log2 8 = 3) x 5.0 = 36.8 us wins.
  Job spread(hardware::load_cluster(kFixtures + "/switched-nccl.yaml"), 8);
  const auto ring = run_collective(request(CollectiveOp::kAllReduce, 8), spread.comm, "ring");
  const auto tree = run_collective(request(CollectiveOp::kAllReduce, 8), spread.comm, "auto");
  CHECK(ring.cost.latency.value() == dlsim_test::approx(44.4e-6).epsilon(1e-9));
  CHECK(tree.cost.algorithm == "tree");
  CHECK(tree.cost.latency.value() == dlsim_test::approx(36.8e-6).epsilon(1e-9));
}

TEST_CASE("a_pipelined_tree_pays_its_latency_once_whatever_the_size") {
  // NCCL: tree latency = baseLat + 2((ppn-1) intraLat + log2(nNodes) netLat), independent of
  // the size; tree/Simple across 16 single-GPU nodes: 0 + 2 x 4 x 28 us = 224 us.
  Job job(hardware::load_cluster("default"), 16, 1);
  for (double bytes : {1e6, 1073741824.0}) {
    const auto r = run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "tree");
    CAPTURE(bytes);
    CHECK(r.cost.protocol == "Simple");
    CHECK(r.cost.latency.value() == dlsim_test::approx(224e-6).epsilon(1e-9));
    CHECK(r.steps == 1);
  }
}

TEST_CASE("auto_is_what_forcing_its_own_choice_gives") {
  // NCCL_ALGO forces the algorithm, the protocol and channels still come from the tuner: forcing
  // what the tuner picked changes nothing.
  for (const char* cluster : {"dgx-a100", "default", "dgx-h100"}) {
    const auto c = hardware::load_cluster(cluster);
    Job job(c, std::min(c.gpu_count(), 32));
    for (double bytes : {8.0, 65536.0, 4e6, 256e6}) {
      const auto best = run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "auto");
      const auto forced =
          run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, best.cost.algorithm);
      CAPTURE(cluster);
      CAPTURE(bytes);
      CHECK(forced.cost.protocol == best.cost.protocol);
      CHECK(forced.cost.channels == best.cost.channels);
      CHECK(forced.cost.time.value() == best.cost.time.value());
    }
  }
}

TEST_CASE("ll128_only_where_nccl_enables_it") {
  // NCCL 2.21 enables LL128 on sm70/80/90 only inside NVLink nodes and, across nodes, where the
  // GPU reaches its NIC within a PCIe switch (PXB). virtualwall (PCIe, NIC on the CPU) and the
  // default cluster (NIC on a CPU root port: PHB) get none; a DGX A100 pair does.
  const auto protocol_of = [](const char* cluster, int gpus, double bytes) {
    Job job(hardware::load_cluster(cluster), gpus);
    return run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "auto").cost.protocol;
  };
  for (double bytes = 4096; bytes <= 1 << 30; bytes *= 8) {
    CAPTURE(bytes);
    CHECK(protocol_of("virtualwall-10gbe", 4, bytes) != "LL128");
    CHECK(protocol_of("default", 16, bytes) != "LL128");
  }
  CHECK(protocol_of("dgx-a100", 16, 16 << 20) == "LL128");
}

TEST_CASE("gpus_equally_near_several_nics_spread_over_them") {
  // DGX A100: GPU k and NIC k share a PCIe switch with GPU k^1 and NIC k^1; NCCL gives GPU k
  // NIC (k mod 2) of its switch's pair, so every NIC has a GPU of its own.
  const auto c = hardware::load_cluster("dgx-a100");
  const Topology t(c, {0, 1});
  for (int g = 0; g < 8; ++g) CHECK(t.nearest_nic(t.gpu_vertex(0, g)) == g);
  // The hierarchical allreduce's inter-node level then crosses all 8 NICs of each node.
  Job job(c, 16);
  const auto s = collective_algorithms()
                     .at("hierarchical")
                     .make()
                     ->schedule(request(CollectiveOp::kAllReduce, 1 << 30), job.comm);
  std::set<int> nics;
  for (const auto& ph : s.phases) {
    if (ph.label.find("inter-node") == std::string::npos) continue;
    for (const auto& tr : ph.transfers) {
      std::vector<int> route;
      job.topo->route(tr.src, tr.dst, tr.rail, route);
      for (int id : route) {
        const int v = job.topo->link(id).from;
        if (job.topo->kind(v) == VertexKind::kNic) nics.insert(v);
      }
    }
  }
  CHECK(nics.size() == 16);
}

TEST_CASE("rings_use_every_rail_and_the_nics_bound_them") {
  // DGX A100 pair: one ring per HDR NIC at NCCL's 24 GB/s per channel, 8 x 24 = 192 GB/s
  // busbw (NVIDIA/nccl#812); the links give 8 x 25 x 0.95 = 190 GB/s.
  Job a100(hardware::load_cluster("dgx-a100"), 16);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), a100.comm, "auto");
  CHECK(r.busbw == dlsim_test::approx(192e9).epsilon(0.10));
  const auto s = collective_algorithms().at("auto").make()->schedule(
      request(CollectiveOp::kAllReduce, 1 << 30), a100.comm);
  std::set<int> nics;
  for (const auto& tr : s.phases.front().transfers) {
    std::vector<int> route;
    a100.topo->route(tr.src, tr.dst, tr.rail, route);
    for (int id : route) {
      const int v = a100.topo->link(id).from;
      if (a100.topo->kind(v) == VertexKind::kNic) nics.insert(v);
    }
  }
  CHECK(nics.size() == 16);
  // DGX-1 V100 pair: 4 EDR NICs, each ring entering and leaving through the GPUs of its NIC's
  // switch, so the NICs bound it (4 x 12.5 x 0.95 = 47.5 GB/s), not one GPU's PCIe link.
  Job v100(hardware::load_cluster("dgx1-v100"), 16);
  const auto d = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), v100.comm, "auto");
  CHECK(d.busbw == dlsim_test::approx(47.5e9).epsilon(0.05));
  CHECK(d.execution.phases.front().bottleneck.find("/nic") != std::string::npos);
}

TEST_CASE("a_dgx_h100_pair_sends_through_pxn_on_all_eight_rails") {
  // DGX H100: one GPU and one NDR NIC per PCIe switch, so a ring's exit GPU reaches its
  // channel's NIC only through a CPU, or, from NCCL 2.12 (PXN, src/graph/paths.cc), over
  // NVLink to the NIC's own GPU. The search then fits 8 channels of 45 GB/s (8 x 48 GB/s would
  // exceed the GPUs' 360 GB/s of NVLink), one per NIC, where 4 NICs carried 2 channels of 24.
  // NCCL's maintainers expect 46-48 GB/s per NDR NIC from a 2-node ring (NVIDIA/nccl-tests#290):
  // 8 x 47 = 376 GB/s busbw.
  Job h100(hardware::load_cluster("dgx-h100"), 16);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), h100.comm, "ring");
  CHECK(r.busbw == dlsim_test::approx(376e9).epsilon(0.10));
  const auto s = collective_algorithms().at("ring").make()->schedule(
      request(CollectiveOp::kAllReduce, 1 << 30), h100.comm);
  std::set<int> nics;
  bool relayed = false;
  for (const auto& tr : s.phases.front().transfers) {
    std::vector<int> route;
    h100.topo->route(tr.src, tr.dst, tr.rail, route);
    for (std::size_t i = 0; i < route.size(); ++i) {
      const int v = h100.topo->link(route[i]).from;
      if (h100.topo->kind(v) == VertexKind::kNic) nics.insert(v);
      // A send that passes a GPU on its way to the NIC: the NIC's own GPU relays it.
      relayed = relayed || (i > 0 && h100.topo->kind(v) == VertexKind::kGpu);
    }
  }
  CHECK(nics.size() == 16);
  CHECK(relayed);
  // The GPU-to-NIC path of gpu1 to nic0 is gpu1 -> NVSwitch -> gpu0 -> its switch -> nic0 under
  // NCCL 2.21; NCCL 2.3 had no PXN and goes through the CPU; the NIC-to-GPU direction never
  // relays.
  const int nic0 = h100.topo->nic_vertex(0, 0), gpu0 = h100.topo->gpu_vertex(0, 0),
            gpu1 = h100.topo->gpu_vertex(0, 1);
  std::vector<int> route;
  h100.topo->route(gpu1, nic0, 0, route);
  REQUIRE(route.size() == 4);
  CHECK(h100.topo->link(route[1]).to == gpu0);
  // Which GPUs a route passes on its way (not its ends).
  const auto gpus_passed = [](const Topology& topo, const std::vector<int>& links) {
    int n = 0;
    for (std::size_t i = 0; i + 1 < links.size(); ++i) {
      n += topo.kind(topo.link(links[i]).to) == VertexKind::kGpu ? 1 : 0;
    }
    return n;
  };
  route.clear();
  h100.topo->route(nic0, gpu1, 0, route);
  CHECK(gpus_passed(*h100.topo, route) == 0);
  auto old = hardware::load_cluster("dgx-h100");
  old.library = hardware::load_library("nccl-2.3");
  Job h100_old(old, 16);
  route.clear();
  h100_old.topo->route(gpu1, nic0, 0, route);
  CHECK(gpus_passed(*h100_old.topo, route) == 0);
}

TEST_CASE("a_tcp_transport_bounds_each_sending_rank_to_one_streams_worth") {
  // IPoIB (ib-edr-ipoib): one TCP stream moves 20 Gbit/s (open-mpi/ompi#9087), far below the
  // 100 Gbit/s port. The pcie-4gpu node's one ring leaves each node from one rank, so a 1 GiB
  // allreduce between nodes reaches 2.5 GB/s bus bandwidth, and the flows take the tuner's own
  // time. The same cluster over RDMA is bound by the node's sockets instead: its ring crosses
  // them through host memory (NCCL's SHM transport, 3.9 GB/s).
  Job ipoib(hardware::load_cluster("hkbu-ipoib"), 16);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), ipoib.comm, "auto");
  CHECK(r.busbw == dlsim_test::approx(2.5e9).epsilon(0.01));
  CHECK(r.cost.why.find("bound by the transport") != std::string::npos);
  CHECK(r.time.value() == dlsim_test::approx(r.cost.time.value()).epsilon(0.01));
  Job rdma(hardware::load_cluster("hkbu-ib"), 16);
  const auto d = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), rdma.comm, "auto");
  CHECK(d.busbw == dlsim_test::approx(3.9e9).epsilon(0.01));
  CHECK(d.cost.why.find("bound by the transport") == std::string::npos);
  CHECK(d.cost.why.find("bound by host memory") != std::string::npos);
}

TEST_CASE("nccl_runs_fewer_channels_for_small_messages") {
  // enqueue.cc: from the 24 channels ncclTopoPostset gives one DGX A100 (12 search channels x 2),
  // one fewer while bytes < channels x threads x threshold; LL's threshold is 8 B x 8 ranks per
  // thread of 512: 64 KiB runs 2 channels, 1 MiB all 24, 4 KiB one (and fewer threads).
  Job job(hardware::load_cluster("dgx-a100"), 8);
  const auto channels = [&](double bytes) {
    return run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "auto").cost.channels;
  };
  CHECK(channels(4096) == 1);
  CHECK(channels(65536) == 2);
  CHECK(channels(1 << 20) == 24);
}

TEST_CASE("lls_cap_bounds_the_whole_collective_not_each_launched_channel") {
  // tuning.cc caps ring LL's busBw at llMaxBw (Hopper, one node: 141 GB/s) for all channels
  // together; enqueue.cc launches fewer channels for small messages. Those give their share of
  // the channels' own rate (busBw before the cap x launched / runtime channels), capped again
  // only where the share reaches the cap: more than the cap's share. 8 H100 at 64 KiB: 2 of 24.
  const auto cluster = hardware::load_cluster("dgx-h100");
  Job job(cluster, 8);
  const auto topo = nccl_search(job.comm);
  const auto c = nccl_tune(cluster.library, topo, CollectiveOp::kAllReduce, 65536, "ring", 0);
  REQUIRE(c.best.protocol == "LL");
  CHECK(c.launched_channels == 2);
  CHECK(c.runtime_channels == 24);
  CHECK(c.best.bus_bw == dlsim_test::approx(141e9).epsilon(1e-9));
  CHECK(c.best.channel_bus_bw > c.best.bus_bw);
  const double share = 2.0 / 24;
  CHECK(c.alg_bw ==
        dlsim_test::approx(std::min(141e9, c.best.channel_bus_bw * share) * 8 / 14).epsilon(1e-9));
  CHECK(c.alg_bw > c.best.alg_bw * share * 1.1);
  // With every channel launched the cap holds as NCCL's tuner has it.
  const auto big = nccl_tune(cluster.library, topo, CollectiveOp::kAllReduce, 1 << 20, "ring", 0);
  REQUIRE(big.best.protocol == "LL");
  CHECK(big.launched_channels == big.runtime_channels);
  CHECK(big.alg_bw == dlsim_test::approx(141e9 * 8 / 14).epsilon(1e-9));
}

TEST_CASE("colocated_servers_share_their_hosts_memory_bandwidth") {
  // 8 servers on 2 nodes sum as fast as 2: a node's 4 servers share its memory, doing the same
  // per-node work (W + 2) S / 2 as one server with half the model.
  Job job(hardware::load_cluster("default"), 8);
  auto req = request(CollectiveOp::kAllReduce, 64e6);
  req.ps.colocated = true;
  const auto sum_time = [&](int servers) {
    req.ps.servers = servers;
    const auto r = run_collective(req, job.comm, "ps");
    for (const auto& p : r.execution.phases) {
      if (p.label == "sum on servers") return p.time.value();
    }
    return -1.0;
  };
  const double host = job.topo->node(0).host.memory_bandwidth.value();
  CHECK(sum_time(2) == dlsim_test::approx((8 + 2) * 32e6 / host).epsilon(1e-9));
  CHECK(sum_time(8) == dlsim_test::approx(sum_time(2)).epsilon(1e-9));
}

TEST_CASE("parameter_server_push_is_bound_by_the_busier_nic_side") {
  // W workers, k dedicated servers, S split evenly: each worker's NIC sends S, each server's NIC
  // takes W S / k; the push takes alpha + max(S, W S / k) / 10 GB/s, alpha = gpu-cpu-nic 1 us +
  // ports 2 us + nic-cpu 0.5 us. More servers help until they match the workers.
  const auto c = hardware::load_cluster(kFixtures + "/switched.yaml");
  const double S = 64e6;
  for (int workers : {4, 8, 16}) {
    for (int k : {1, 2, 4, 8, 16}) {
      Job job(c, workers, std::nullopt, k);
      auto req = request(CollectiveOp::kAllReduce, S);
      req.ps.servers = k;
      const auto r = run_collective(req, job.comm, "ps");
      const auto& push = r.execution.phases.front();
      CAPTURE(workers);
      CAPTURE(k);
      CHECK(push.time.value() ==
            dlsim_test::approx(3.5e-6 + std::max(S, workers * S / k) / 10e9).epsilon(1e-9));
    }
  }
}

TEST_CASE("a_ring_through_a_pcie_node_is_charged_every_link_it_crosses") {
  // hkbu-ib: 4 GPUs per node under two PCIe switches (one per socket), the NIC on socket 0. A
  // channel enters at gpu0 and leaves at gpu1, both under plx0, and in between visits gpu2 and
  // gpu3 under plx1: it crosses the plx0 -> cpu0 uplink twice (gpu0 -> gpu2, gpu1 -> nic0), so
  // NCCL's search (search.cc, ncclTopoFollowPath subtracting the speed on every link each
  // time) leaves it half of the link's 12.0 GB/s (15.75 GB/s x 0.762): 6.0 GB/s, one channel.
  Job job(hardware::load_cluster("hkbu-ib"), 16);
  const auto t = nccl_search(job.comm);
  CHECK(t.ring.channels == 1);
  CHECK(t.ring.bw_inter == dlsim_test::approx(6e9).epsilon(1e-9));
  const auto& ring = t.ring.rings.front();
  REQUIRE(ring.size() == 16);
  CHECK(std::vector<int>(ring.begin(), ring.begin() + 4) == std::vector<int>{0, 2, 3, 1});
}

TEST_CASE("a_ps_lite_process_receives_one_streams_worth_from_all_its_peers") {
  // ps-lite over ZeroMQ: one receiving socket per process moves about one TCP stream
  // (zeromq/libzmq#3525), however many peers send. On hkbu-ipoib (100 Gbit/s IPoIB, 20 Gbit/s a
  // stream) N worker nodes pushing S each to one dedicated server: the server's socket takes
  // N S / 2.5 GB/s, where N separate connections alone would take S / 2.5 GB/s; the pull fills
  // each worker's socket with S from the server. Without a stream ceiling (RDMA) the socket
  // changes nothing.
  const auto c = hardware::load_cluster("hkbu-ipoib");
  const double S = 64e6, stream = 20e9 / 8;
  for (int nodes : {2, 4}) {
    Job job(c, 4 * nodes, std::nullopt, 1);
    auto req = request(CollectiveOp::kAllReduce, S);
    req.ps.aggregation = PsAggregation::kHost;
    const auto phase = [](const CollectiveResult& r, const std::string& label) {
      for (const auto& p : r.execution.phases) {
        if (p.label == label) return p;
      }
      return networks::PhaseTime{};
    };
    const auto apart = run_collective(req, job.comm, "ps");
    req.ps.shared_receive = true;
    const auto shared = run_collective(req, job.comm, "ps");
    CAPTURE(nodes);
    const double alpha = phase(apart, "push gradients").time.value() - S / stream;
    CHECK(alpha == dlsim_test::approx(20e-6).epsilon(0.25));  // 18 us per message + the route
    CHECK(phase(shared, "push gradients").time.value() ==
          dlsim_test::approx(alpha + nodes * S / stream).epsilon(1e-9));
    CHECK(phase(shared, "push gradients").bottleneck.find("receiving socket") != std::string::npos);
    CHECK(phase(shared, "pull parameters").time.value() ==
          dlsim_test::approx(phase(apart, "pull parameters").time.value()).epsilon(1e-9));
  }
  Job rdma(hardware::load_cluster("hkbu-ib"), 8, std::nullopt, 1);
  auto req = request(CollectiveOp::kAllReduce, S);
  const auto apart = run_collective(req, rdma.comm, "ps");
  req.ps.shared_receive = true;
  CHECK(run_collective(req, rdma.comm, "ps").time.value() ==
        dlsim_test::approx(apart.time.value()).epsilon(1e-12));
}

TEST_CASE("a_node_that_sums_before_it_pushes_sends_its_gradient_once") {
  // Local aggregation (TensorFlow, MXNet): 4 GPUs per node push once per node, so the server's
  // NIC takes N copies, not 4N.
  const auto c = hardware::load_cluster("default");
  Job job(c, 16, std::nullopt, 1);
  auto req = request(CollectiveOp::kAllReduce, 64e6);
  const auto flat = run_collective(req, job.comm, "ps");
  req.ps.aggregation = PsAggregation::kHost;
  const auto local = run_collective(req, job.comm, "ps");
  const auto push_time = [](const CollectiveResult& r) {
    for (const auto& p : r.execution.phases) {
      if (p.label == "push gradients") return p.time.value();
    }
    return -1.0;
  };
  const double nic = c.network.port.bandwidth.value() * c.network.transport.efficiency;
  CHECK(push_time(flat) == dlsim_test::approx(16 * 64e6 / nic).epsilon(0.01));
  CHECK(push_time(local) == dlsim_test::approx(4 * 64e6 / nic).epsilon(0.01));
}

TEST_CASE("a_server_that_applies_each_push_moves_three_shards_per_pusher") {
  // TensorFlow's between-graph replication: each of W workers' sums is applied on its own,
  // reading the variable and the gradient and writing the variable, 3 W S of the server's
  // memory; a sum of all pushes reads W + 1 buffers and writes one, (W + 2) S
  // (docs/networks.md, "Parameter server"). 16 GPUs of the default cluster: W = 4 nodes.
  const auto c = hardware::load_cluster("default");
  Job job(c, 16, std::nullopt, 1);
  const double S = 64e6;
  auto req = request(CollectiveOp::kAllReduce, S);
  req.ps.aggregation = PsAggregation::kHost;
  const auto sum_time = [](const CollectiveResult& r) {
    for (const auto& p : r.execution.phases) {
      if (p.label == "sum on servers") return p.time.value();
    }
    return -1.0;
  };
  const double memory = job.topo->node(0).host.memory_bandwidth.value();
  const auto together = run_collective(req, job.comm, "ps");
  req.ps.apply_each = true;
  const auto each = run_collective(req, job.comm, "ps");
  CHECK(sum_time(together) == dlsim_test::approx((4 + 2) * S / memory).epsilon(1e-9));
  CHECK(sum_time(each) == dlsim_test::approx(3 * 4 * S / memory).epsilon(1e-9));
}

namespace {

struct Point {
  std::string op;
  double bytes, busbw;  // B, GB/s
};

std::vector<Point> dgx1_curves() {
  std::ifstream in(DLSIM_VALIDATION_DIR "/collectives.csv");
  std::vector<Point> out;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    // Rows of the 8-GPU DGX-1 size sweeps; fields are comma separated with quoted commas.
    std::vector<std::string> f;
    std::string cur;
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"')
        quoted = !quoted;
      else if (ch == ',' && !quoted) {
        f.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
    f.push_back(cur);
    if (f.size() < 12 || f[0] != "tartan_pnnl" || f[4] != "8" || f[9] != "busbw") continue;
    if (f[6].find("hybrid cube-mesh") == std::string::npos) continue;
    const double bytes = std::stod(f[8]);
    if (bytes < 1e6) continue;  // the acceptance range: 1 MB and up
    out.push_back({f[1], bytes, std::stod(f[10])});
  }
  return out;
}

}  // namespace

TEST_CASE("dgx1_nccl_tests_curves_are_reproduced_with_alpha_beta_fitted_on_every_other_size") {
  // For each operation: NCCL's Simple ring latency per NVLink step and the NVLink bandwidth are
  // fitted by least squares on relative time error over the even-indexed sizes from 1 MB, and
  // the prediction is checked on the odd-indexed ones. With the Simple protocol alone and no
  // speed quantization, dlsim's time is c + steps x alpha + wire x (bw0 / bw): three probes per
  // size give c, the alpha coefficient and the wire term. nccl-tests ran -g 8 (one thread, 8
  // GPUs): 8 kernel launches are in c.
  const auto points = dgx1_curves();
  REQUIRE(points.size() >= 20);
  std::map<std::string, std::vector<Point>> by_op;
  for (const auto& p : points) by_op[p.op].push_back(p);
  const std::map<std::string, CollectiveOp> ops = {{"all_reduce", CollectiveOp::kAllReduce},
                                                   {"broadcast", CollectiveOp::kBroadcast},
                                                   {"reduce_scatter", CollectiveOp::kReduceScatter},
                                                   {"all_gather", CollectiveOp::kAllGather}};
  auto base = hardware::load_cluster("dgx1-p100");
  base.library.protocols = {*base.library.protocol("Simple")};
  base.library.tuner.speeds_intra.clear();
  base.library.tuner.speeds_intra_hopper.clear();
  const double bw0 = 1e10;  // probe NVLink bandwidth, B/s
  auto run = [&](double alpha, double bw, CollectiveOp op, double bytes) {
    auto c = base;
    c.groups[0].node.link_types.at("nvlink").bandwidth =
        Bandwidth(bw / c.library.nvlink_efficiency);
    c.library.tuner.step_latency[hardware::PathClass::kNvlink]["ring"][2] = Seconds(alpha);
    Job job(c, 8);
    auto req = request(op, bytes);
    req.gpus_per_thread = 8;
    return run_collective(req, job.comm, "ring");
  };
  std::ostringstream report;
  report
      << "DGX-1 (8 GPUs) nccl-tests busbw, measured vs dlsim ring/Simple, fitted on even rows:\n";
  std::map<std::string, double> worst_by_op;
  for (const auto& op_curve : by_op) {
    const auto& name = op_curve.first;  // lambdas below use it (clang < 16: no bindings)
    const auto& curve = op_curve.second;
    const auto op = ops.at(name);
    std::vector<double> c(curve.size()), a(curve.size()), w(curve.size()), t(curve.size());
    for (std::size_t i = 0; i < curve.size(); ++i) {
      c[i] = run(0, 1e18, op, curve[i].bytes).time.value();
      const double t0 = run(0, bw0, op, curve[i].bytes).time.value();
      a[i] = (run(1e-6, bw0, op, curve[i].bytes).time.value() - t0) / 1e-6;
      w[i] = (t0 - c[i]) * bw0;
      const double algbw = curve[i].busbw * 1e9 / busbw_factor(op, 8);
      t[i] = curve[i].bytes / algbw;
    }
    // Weighted least squares for (alpha, 1/bw) on even rows: minimise sum (1 - model/t)^2.
    double saa = 0, saw = 0, sww = 0, sat = 0, swt = 0;
    for (std::size_t i = 0; i < curve.size(); i += 2) {
      const double wa = a[i] / t[i], ww = w[i] / t[i], rest = 1 - c[i] / t[i];
      saa += wa * wa;
      saw += wa * ww;
      sww += ww * ww;
      sat += wa * rest;
      swt += ww * rest;
    }
    const double det = saa * sww - saw * saw;
    const double alpha = (sat * sww - swt * saw) / det;
    const double inv_bw = (saa * swt - saw * sat) / det;
    report << fmt::format("  {}: fitted step latency {:.2f} us, NVLink {:.2f} GB/s per lane\n",
                          name, alpha * 1e6, 1e-9 / inv_bw);
    for (std::size_t i = 0; i < curve.size(); ++i) {
      const auto r = run(alpha, 1 / inv_bw, op, curve[i].bytes);
      const double err = r.busbw / 1e9 / curve[i].busbw - 1;
      report << fmt::format("    {:>12.0f} B  measured {:6.2f}  dlsim {:6.2f} GB/s  {:+6.1f}%{}\n",
                            curve[i].bytes, curve[i].busbw, r.busbw / 1e9, 100 * err,
                            i % 2 == 0 ? "  (fit)" : "");
      if (i % 2 == 1) worst_by_op[name] = std::max(worst_by_op[name], std::abs(err));
    }
  }
  MESSAGE(report.str());
  // All-reduce (11 sizes) and all-gather hold within 10 %. Broadcast and reduce-scatter have
  // 4 sizes each; their 16 MB points sit off an alpha-beta line, so they are held to 20 %
  // (docs/networks.md, "Validation").
  for (const auto& op_limit : std::map<std::string, double>{{"all_reduce", 0.10},
                                                            {"all_gather", 0.10},
                                                            {"broadcast", 0.20},
                                                            {"reduce_scatter", 0.20}}) {
    const auto& name = op_limit.first;  // CAPTURE needs a variable, not a binding (clang < 16)
    const double limit = op_limit.second;
    CAPTURE(name);
    CHECK(worst_by_op[name] <= limit);
  }
}

TEST_CASE("nvls_on_a_dgx_h100_takes_its_tuner_time_and_reaches_nvlink_sharp_figures") {
  // NCCL 2.21 on 8 H100 (NVIDIA/nccl-tests#212): ring ~370 GB/s busbw, NVLS ~480.
  Job job(hardware::load_cluster("dgx-h100"), 8);
  const auto nvls = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), job.comm, "nvls");
  CHECK(nvls.time.value() == dlsim_test::approx(nvls.cost.time.value()).epsilon(1e-9));
  CHECK(nvls.busbw == dlsim_test::approx(480e9).epsilon(0.10));
  const auto ring = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), job.comm, "ring");
  CHECK(ring.busbw == dlsim_test::approx(370e9).epsilon(0.10));
  CHECK(
      run_collective(request(CollectiveOp::kAllReduce, 1 << 30), job.comm, "auto").cost.algorithm ==
      "nvls");
  // 8 A100 (NVIDIA/nccl-tests#149): ~230 GB/s.
  Job a100(hardware::load_cluster("dgx-a100"), 8);
  CHECK(
      run_collective(request(CollectiveOp::kAllReduce, 8.0 * (1 << 30)), a100.comm, "auto").busbw ==
      dlsim_test::approx(230e9).epsilon(0.10));
  // NVLS is not there on two nodes, nor before Hopper: one line naming why.
  Job two(hardware::load_cluster("dgx-h100"), 16);
  CHECK_THROWS_WITH_AS(run_collective(request(CollectiveOp::kAllReduce, 1 << 20), two.comm, "nvls"),
                       doctest::Contains("NVLS"), InputError);
}
