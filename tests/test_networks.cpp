// Hardware profiles, topology, routing, placement and collective algorithms.

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "common/hostlist.hpp"
#include "hardware/loader.hpp"
#include "networks/collective.hpp"

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
  for (const char* name : {"ring", "tree", "hd", "hierarchical", "ps"}) {
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
  CHECK(a.peak.at("fp32").value() == doctest::Approx(15.7e12));
  CHECK(a.memory_bandwidth.value() == doctest::Approx(900e9));
  CHECK(a.peak_for(Precision::kBf16).value() == a.peak.at("fp32").value());  // no bf16 on V100
}

TEST_CASE("default_cluster_is_16_nodes_of_4_v100_with_one_edr_nic") {
  const auto c = hardware::load_cluster("default");
  CHECK(c.node_count() == 16);
  CHECK(c.gpu_count() == 64);
  CHECK(c.groups[0].node.nics == 1);
  CHECK(c.network.port.bandwidth.value() == doctest::Approx(12.5e9));
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
  // directions: 4 rings. DGX-1 V100 (6 lanes per GPU): 6 rings.
  Job p100(hardware::load_cluster("dgx1-p100"), 8);
  const auto r1 = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), p100.comm, "ring");
  CHECK(r1.channels == 4);
  Job v100(hardware::load_cluster("dgx1-v100"), 8);
  const auto r2 = run_collective(request(CollectiveOp::kAllReduce, 1 << 30), v100.comm, "ring");
  CHECK(r2.channels == 6);
}

TEST_CASE("ring_allreduce_time_matches_closed_form_without_contention") {
  // switched.yaml: alpha = 5 us (network step) + 0.5 + 0.5 (gpu-cpu-nic) + 1 + 1 (ports)
  // + 0.5 + 0.5 us = 9 us; beta = 1 / 10 GB/s; base 10 us. n = 8, S = 8 MB: 14 steps of
  // 9 us + 1 MB / 10 GB/s.
  Job job(hardware::load_cluster(kFixtures + "/switched.yaml"), 8);
  const auto r = run_collective(request(CollectiveOp::kAllReduce, 8e6), job.comm, "ring");
  CHECK(r.time.value() == doctest::Approx(10e-6 + 14 * (9e-6 + 1e6 / 10e9)).epsilon(1e-12));
  CHECK(r.model_time.value() == doctest::Approx(r.time.value()).epsilon(1e-12));
  CHECK(r.busbw == doctest::Approx(8e6 / r.time.value() * 14 / 8));
}

TEST_CASE("every_algorithm_matches_its_closed_form_on_an_uncontended_topology") {
  const auto switched = hardware::load_cluster(kFixtures + "/switched.yaml");
  const auto rails = hardware::load_cluster(kFixtures + "/rails.yaml");
  for (const auto& name : collective_algorithms().names()) {
    for (auto op : all_ops()) {
      if (!collective_algorithms().at(name).make()->supports(op)) continue;
      for (int n : {2, 5, 8, 16}) {
        const bool pow2 = (n & (n - 1)) == 0;
        if (name == "hd" && !pow2 && op != CollectiveOp::kAllReduce &&
            op != CollectiveOp::kBroadcast && op != CollectiveOp::kReduce) {
          continue;
        }
        if (name == "hierarchical" && n % 4 != 0) continue;
        const bool rail = name == "hierarchical";
        Job job(rail ? rails : switched, n, std::nullopt, name == "ps" ? 2 : 0);
        for (double bytes : {4096.0, 3e6, 256e6}) {
          auto req = request(op, bytes);
          req.ps.servers = 2;
          const auto r = run_collective(req, job.comm, name);
          CAPTURE(name);
          CAPTURE(to_string(op));
          CAPTURE(n);
          CAPTURE(bytes);
          CHECK(r.time.value() == doctest::Approx(r.model_time.value()).epsilon(1e-9));
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
  // Bandwidth term: S + S/2 + S/4 + S/4 + S/2 + S at 10 GB/s; 6 alphas of 9 us; base 10 us.
  CHECK(r.time.value() == doctest::Approx(10e-6 + 6 * 9e-6 + 3.5 * 4e6 / 10e9).epsilon(1e-12));
}

TEST_CASE("large_ring_busbw_approaches_the_bottleneck_link") {
  Job job(hardware::load_cluster(kFixtures + "/switched.yaml"), 16);
  const auto r =
      run_collective(request(CollectiveOp::kAllReduce, 4.0 * (1 << 30)), job.comm, "ring");
  CHECK(r.busbw == doctest::Approx(10e9).epsilon(0.01));
}

TEST_CASE("tree_beats_ring_for_small_messages_at_64_gpus") {
  Job job(hardware::load_cluster("default"), 64);
  for (double bytes : {8.0, 8192.0, 65536.0}) {
    const auto ring = run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "ring");
    const auto tree = run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "tree");
    CAPTURE(bytes);
    CHECK(tree.time < ring.time);
  }
}

TEST_CASE("hierarchical_beats_a_flat_ring_across_nvlink_nodes") {
  Job job(hardware::load_cluster("default"), 64);
  for (double bytes : {1e6, 4e6, 32e6}) {
    const auto ring = run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "ring");
    const auto hier =
        run_collective(request(CollectiveOp::kAllReduce, bytes), job.comm, "hierarchical");
    CAPTURE(bytes);
    CHECK(hier.time < ring.time);
  }
}

TEST_CASE("parameter_server_time_grows_with_workers_and_is_bound_by_the_server_nic") {
  const auto c = hardware::load_cluster(kFixtures + "/switched.yaml");
  double last = 0;
  for (int workers : {4, 8, 16, 32}) {
    Job job(c, workers, std::nullopt, 1);
    auto req = request(CollectiveOp::kAllReduce, 64e6);
    const auto r = run_collective(req, job.comm, "ps");
    CHECK(r.time.value() > last);
    last = r.time.value();
    // The push ends when the server's NIC has taken W copies of the model at 10 GB/s; alpha is
    // 5 us + gpu-cpu-nic 1 us + ports 2 us + nic-cpu 0.5 us.
    const auto& push = r.execution.phases.front();
    CHECK(push.bottleneck.find("-> " + job.topo->hostname(job.comm.server_slots[0]) + "/nic0") !=
          std::string::npos);
    CHECK(push.time.value() == doctest::Approx(8.5e-6 + workers * 64e6 / 10e9).epsilon(1e-9));
  }
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
  // For each operation: alpha (per-step latency on NVLink) and beta (NVLink bandwidth) are
  // fitted by least squares on relative time error over the even-indexed sizes, and the
  // prediction is checked on the odd-indexed ones. dlsim's time is affine in alpha and in
  // 1/bandwidth, so two probe runs give the coefficients.
  const auto points = dgx1_curves();
  REQUIRE(points.size() >= 20);
  std::map<std::string, std::vector<Point>> by_op;
  for (const auto& p : points) by_op[p.op].push_back(p);
  const std::map<std::string, CollectiveOp> ops = {{"all_reduce", CollectiveOp::kAllReduce},
                                                   {"broadcast", CollectiveOp::kBroadcast},
                                                   {"reduce_scatter", CollectiveOp::kReduceScatter},
                                                   {"all_gather", CollectiveOp::kAllGather}};
  auto base = hardware::load_cluster("dgx1-p100");
  hardware::ProtocolSpec proto = base.library.protocols.back();  // Simple
  proto.base_latency = Seconds(0);
  const double bw0 = 1e10;  // probe NVLink bandwidth, B/s
  auto run = [&](double alpha, double bw, CollectiveOp op, double bytes) {
    auto c = base;
    c.groups[0].node.link_types.at("nvlink").bandwidth = Bandwidth(bw);
    c.groups[0].node.link_types.at("nvlink").latency = Seconds(0);
    auto pr = proto;
    pr.step_nvlink = pr.step_pcie = Seconds(alpha);
    c.library.protocols = {pr};
    Job job(c, 8);
    return run_collective(request(op, bytes), job.comm, "ring");
  };
  std::ostringstream report;
  report << "DGX-1 (8 GPUs) nccl-tests busbw, measured vs dlsim ring, fitted on even rows:\n";
  std::map<std::string, double> worst_by_op;
  for (const auto& op_curve : by_op) {
    const auto& name = op_curve.first;  // lambdas below use it (clang < 16: no bindings)
    const auto& curve = op_curve.second;
    const auto op = ops.at(name);
    // t = steps * alpha + wire(S) * bw0 / bw, from two probes per size.
    std::vector<double> a(curve.size()), w(curve.size()), t(curve.size());
    for (std::size_t i = 0; i < curve.size(); ++i) {
      const double t0 = run(0, bw0, op, curve[i].bytes).time.value();
      a[i] = (run(1e-6, bw0, op, curve[i].bytes).time.value() - t0) / 1e-6;
      w[i] = t0 * bw0;
      const double algbw = curve[i].busbw * 1e9 / busbw_factor(op, 8);
      t[i] = curve[i].bytes / algbw;
    }
    // Weighted least squares for (alpha, 1/bw) on even rows: minimise sum (1 - model/t)^2.
    double saa = 0, saw = 0, sww = 0, sat = 0, swt = 0;
    for (std::size_t i = 0; i < curve.size(); i += 2) {
      const double wa = a[i] / t[i], ww = w[i] / t[i];
      saa += wa * wa;
      saw += wa * ww;
      sww += ww * ww;
      sat += wa;
      swt += ww;
    }
    const double det = saa * sww - saw * saw;
    const double alpha = (sat * sww - swt * saw) / det;
    const double inv_bw = (saa * swt - saw * sat) / det;
    report << fmt::format("  {}: fitted step latency {:.2f} us, NVLink {:.2f} GB/s per direction\n",
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
  // 4 sizes each; their 16 MB points sit off an alpha-beta line (NCCL's channel count grows
  // with size there), so they are held to 20 % (docs/networks.md, "Validation").
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
