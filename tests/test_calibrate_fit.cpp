// Alpha-beta fitting: exact recovery of known parameters, relative weighting, regimes at a
// protocol change, and series grouped by op, backend, ranks and variant.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include "approx.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "calibrate/fit.hpp"
#include "calibrate/import.hpp"
#include "calibrate/profile.hpp"
#include "common/error.hpp"
#include "hardware/loader.hpp"

namespace cal = dlsim::calibrate;

namespace {

std::vector<double> sizes(double from, double to) {
  std::vector<double> s;
  for (double b = from; b <= to; b *= 2) s.push_back(b);
  return s;
}

}  // namespace

TEST_CASE("alpha-beta: noiseless points give back alpha and beta") {
  const double alpha = 5e-6, bw = 12.5e9;
  const auto s = sizes(8, 256.0 * 1024 * 1024);
  std::vector<double> t;
  for (double b : s) t.push_back(alpha + b / bw);
  const auto f = cal::fit_alpha_beta(s, t);
  CHECK(f.alpha == dlsim_test::approx(alpha).epsilon(1e-9));
  CHECK(f.bandwidth() == dlsim_test::approx(bw).epsilon(1e-9));
  CHECK(f.r2 == dlsim_test::approx(1.0));
  CHECK(f.worst_relative_error < 1e-9);
  CHECK(f.points == s.size());
  CHECK(f.min_bytes == 8);
}

TEST_CASE("alpha-beta: relative residuals keep small sizes as accurate as large ones") {
  // 10 % too slow or too fast at every size: the relative fit is off by about 10 % everywhere
  // (11.9 % at worst: alpha and beta move to fit the alternation), not 0 % at the large end and
  // 100 %+ at the small end as an absolute fit would be.
  const auto s = sizes(1024, 64.0 * 1024 * 1024);
  std::vector<double> t;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const double base = 2e-6 + s[i] / 10e9;
    t.push_back(base * (i % 2 ? 1.1 : 0.9));
  }
  const auto f = cal::fit_alpha_beta(s, t);
  CHECK(f.worst_relative_error >= 0.1);
  CHECK(f.worst_relative_error <= 0.125);
  CHECK(f.alpha == dlsim_test::approx(2e-6).epsilon(0.05));
}

TEST_CASE("alpha-beta: a negative intercept is refitted through the origin") {
  const std::vector<double> s = {1e6, 2e6, 4e6};
  const std::vector<double> t = {0.9e-4, 2.0e-4, 4.1e-4};
  const auto f = cal::fit_alpha_beta(s, t);
  CHECK(f.alpha == 0);
  CHECK(f.beta > 0);
}

TEST_CASE("piecewise: a protocol change is found as two regimes") {
  // LL-like below 64 KiB (low latency, low bandwidth), Simple-like above.
  std::vector<double> s, t;
  for (double b : sizes(8, 16.0 * 1024 * 1024)) {
    s.push_back(b);
    t.push_back(b < 65536 ? 3e-6 + b / 2e9 : 20e-6 + b / 20e9);
  }
  const auto f = cal::fit_piecewise(s, t);
  REQUIRE(f.regimes.size() == 2);
  CHECK(f.regimes[0].max_bytes == 32768);
  CHECK(f.regimes[1].min_bytes == 65536);
  CHECK(f.regimes[0].alpha == dlsim_test::approx(3e-6).epsilon(1e-6));
  CHECK(f.regimes[1].bandwidth() == dlsim_test::approx(20e9).epsilon(1e-6));
  CHECK(f.worst_relative_error() < 1e-9);
  CHECK(f.time(1024) == dlsim_test::approx(3e-6 + 1024 / 2e9));
  CHECK(f.time(1 << 24) == dlsim_test::approx(20e-6 + (1 << 24) / 20e9));
}

TEST_CASE("piecewise: one straight line stays one regime") {
  std::vector<double> s, t;
  for (double b : sizes(8, 1 << 26)) {
    s.push_back(b);
    t.push_back(4e-6 + b / 10e9);
  }
  CHECK(cal::fit_piecewise(s, t).regimes.size() == 1);
}

TEST_CASE("series: grouped by op, backend, ranks and variant; repeated sizes take the median") {
  auto m = [](const char* op, int ranks, double bytes, double t, const char* algo = nullptr) {
    cal::Measurement x;
    x.op = op;
    x.backend = "nccl";
    x.ranks = ranks;
    x.bytes = bytes;
    x.samples_s = {t};
    if (algo) x.params["algorithm"] = algo;
    return x;
  };
  const std::vector<cal::Measurement> ms = {
      m("allreduce", 8, 1024, 1e-5), m("allreduce", 8, 2048, 2e-5),
      m("allreduce", 8, 2048, 4e-5), m("allreduce", 8, 2048, 3e-5),
      m("allreduce", 4, 1024, 1e-5), m("allreduce", 8, 1024, 9e-6, "tree"),
      m("allgather", 8, 1024, 1e-5)};
  const auto series = cal::group_series(ms);
  REQUIRE(series.size() == 4);
  const auto it = std::find_if(series.begin(), series.end(), [](const cal::Series& s) {
    return s.op == "allreduce" && s.ranks == 8 && s.variant.empty();
  });
  REQUIRE(it != series.end());
  CHECK(it->bytes == std::vector<double>{1024, 2048});
  CHECK(it->seconds[1] == dlsim_test::approx(3e-5));
  const auto fits = cal::fit_series(ms);
  CHECK(fits.size() == 1);  // only the 8-rank allreduce without variant has two sizes
}

TEST_CASE("fit: bad points are InputErrors") {
  CHECK_THROWS_AS(cal::fit_alpha_beta({8}, {1e-6}), dlsim::InputError);
  CHECK_THROWS_AS(cal::fit_alpha_beta({8, 16}, {1e-6, 0}), dlsim::InputError);
  CHECK_THROWS_AS(cal::fit_alpha_beta({16, 8}, {1e-6, 2e-6}), dlsim::InputError);
}

TEST_CASE("saturating: rate = R x / (x + h) is recovered from noiseless points") {
  std::vector<double> x, r;
  for (double v = 1e6; v <= 1e11; v *= 4) {
    x.push_back(v);
    r.push_back(2e12 * v / (v + 5e8));
  }
  const auto f = cal::fit_saturating(x, r);
  CHECK(f.rate == dlsim_test::approx(2e12).epsilon(1e-9));
  CHECK(f.half == dlsim_test::approx(5e8).epsilon(1e-9));
  CHECK(f.worst_relative_error < 1e-9);
  CHECK(f.at(5e8) == dlsim_test::approx(1e12));
}

namespace {

// Point-to-point bandwidth between two nodes: `pairs` connections in parallel, moving `rate`
// B/s together after 20 us per message (osu_bw for one pair, osu_mbw_mr for several).
std::vector<cal::Measurement> p2p_bandwidth(int pairs, double rate) {
  std::vector<cal::Measurement> out;
  for (double b : sizes(64 * 1024, 8 << 20)) {
    cal::Measurement m;
    m.op = "p2p_bandwidth";
    m.backend = "mpi";
    m.ranks = 2 * pairs;
    m.nodes = 2;
    m.bytes = b * pairs;
    m.samples_s = {20e-6 + m.bytes / rate};
    if (pairs > 1) m.params["pairs"] = std::to_string(pairs);
    out.push_back(m);
  }
  return out;
}

cal::FittedProfile fit_network(double one, double eight) {
  cal::Results r;
  r.provenance.tool = "test";
  r.measurements = p2p_bandwidth(1, one);
  const auto more = p2p_bandwidth(8, eight);
  r.measurements.insert(r.measurements.end(), more.begin(), more.end());
  cal::ProfileOptions o;
  o.base = "hkbu-ipoib";
  o.name = "fitted";
  return cal::fit_profile({r}, o);
}

}  // namespace

TEST_CASE("profile: one stream below what parallel pairs move together is a stream ceiling") {
  // Kernel TCP over 100 Gbit/s IPoIB (12.5 GB/s line rate): one pair 1.9 GB/s, eight pairs
  // 11 GB/s together. The link's efficiency comes from the pairs (11 / 12.5 = 0.88), the one
  // connection's ceiling from the single pair.
  const auto tcp = fit_network(1.9e9, 11e9);
  CHECK(tcp.yaml.find("stream_bandwidth: \"1.9000GB/s\"") != std::string::npos);
  CHECK(tcp.yaml.find("efficiency: 0.8800") != std::string::npos);
  // RDMA: one pair fills the link (within 10 % of the pairs): no ceiling.
  const auto rdma = fit_network(11.5e9, 11.8e9);
  CHECK(rdma.yaml.find("stream_bandwidth") == std::string::npos);
  CHECK(rdma.yaml.find("efficiency: 0.9440") != std::string::npos);
}

TEST_CASE("layer_table_report_lists_each_layer_and_the_step_it_adds_up_to") {
  // Two layers, one of them twice in the model (instances 2), and the update: the step is
  // 1 x (10 + 20) us + 2 x (3 + 5) us + 40 us = 86 us; the spread of 9, 10, 12 us is 30 %.
  std::vector<dlsim::calibrate::Measurement> ms;
  const auto add = [&](const std::string& op, const std::string& shape, const std::string& layer,
                       const std::string& n, std::vector<double> s) {
    dlsim::calibrate::Measurement m;
    m.op = op;
    m.backend = "torch";
    m.shape = shape;
    m.samples_s = std::move(s);
    m.params = {{"model", "tiny"}, {"batch", "8"},        {"threads", "1"},
                {"layer", layer},  {"op_kind", "conv2d"}, {"instances", n}};
    ms.push_back(m);
  };
  add("layer_forward", "conv a", "conv1", "1", {9e-6, 10e-6, 12e-6});
  add("layer_backward", "conv a", "conv1", "1", {20e-6});
  add("layer_forward", "conv b", "conv2", "2", {3e-6});
  add("layer_backward", "conv b", "conv2", "2", {5e-6});
  add("optimizer_update", "sgd", "", "1", {40e-6});
  ms.back().params["tensors"] = "4";
  const auto text = dlsim::calibrate::layer_table_report(ms, dlsim::calibrate::Statistic::kMedian);
  CHECK(text.find("tiny on cpu, fp32, batch 8, 1 thread(s)") != std::string::npos);
  CHECK(text.find("conv1") != std::string::npos);
  CHECK(text.find("30.0") != std::string::npos);
  CHECK(text.find("forward 0.016 ms + backward 0.030 ms (every instance) + update 0.040 ms "
                  "(4 tensors) = 0.086 ms") != std::string::npos);
  CHECK(dlsim::calibrate::layer_table_report({}, dlsim::calibrate::Statistic::kMedian).empty());
}

TEST_CASE("cpu_cost_report_gives_each_sizes_cpu_share_and_cpu_per_byte") {
  // 1 MiB in 2 ms of which 1.5 ms CPU: 75 % and 1.5e-3 / 1048576 s = 1.4305 ns per byte.
  dlsim::calibrate::Measurement m;
  m.op = "allreduce";
  m.backend = "gloo";
  m.ranks = 2;
  m.bytes = 1048576;
  m.samples_s = {2e-3};
  m.params["cpu_s_per_call"] = "0.0015";
  const auto text = dlsim::calibrate::cpu_cost_report({m}, dlsim::calibrate::Statistic::kMedian);
  CHECK(text.find("allreduce gloo ranks=2 nodes=1") != std::string::npos);
  CHECK(text.find("2000.000") != std::string::npos);
  CHECK(text.find("1500.000") != std::string::npos);
  CHECK(text.find("75.0") != std::string::npos);
  CHECK(text.find("1.4305") != std::string::npos);
  m.params.clear();
  CHECK(dlsim::calibrate::cpu_cost_report({m}, dlsim::calibrate::Statistic::kMedian).empty());
}

TEST_CASE("profile: gloo between two ranks of a host becomes the node's path and its host cpu") {
  // gloo's ring allreduce on 2 ranks: t = 2 alpha + S / B with alpha = 200 us and B = 1 GB/s
  // (one straight line), each call taking 0.1 ms + 0.8 ns/B of process CPU. The ring the mpi
  // library runs has 2(n-1) = 2 steps of two hops (rank -> host -> rank): each hop 100 us / 2 =
  // 50 us, and each carries S/2 per step at B. On a host of 2 cores.
  cal::Results r;
  r.provenance.tool = "test";
  r.provenance.devices = {{"cpu", "Test CPU"}, {"cpu_cores", "2"}, {"memory", "8589934592B"}};
  for (double b : sizes(1 << 20, 64 << 20)) {
    cal::Measurement m;
    m.op = "allreduce";
    m.backend = "gloo";
    m.ranks = 2;
    m.bytes = b;
    m.samples_s = {200e-6 + b / 1e9};
    m.params["cpu_s_per_call"] = fmt::format("{:.9g}", 100e-6 + 0.8e-9 * b);
    // Beside a busy thread in each rank (run gloo --cpu-cost): 2 ms + 0.5 ns/B later than alone.
    m.params["s_per_call_beside_compute"] =
        fmt::format("{:.9g}", m.samples_s[0] + 2e-3 + 0.5e-9 * b);
    r.measurements.push_back(m);
  }
  cal::ProfileOptions o;
  o.name = "host";
  const auto p = cal::fit_profile({r}, o);
  CAPTURE(p.yaml);
  CHECK(p.yaml.find("  gpus: 2\n") != std::string::npos);
  CHECK(p.yaml.find("loopback: {bandwidth: \"1GB/s\", latency: \"50us\"}") != std::string::npos);
  CHECK(p.yaml.find("cores: 2") != std::string::npos);
  CHECK(p.yaml.find("memory: \"8589934592B\"") != std::string::npos);
  CHECK(
      p.yaml.find("host_cpu: {per_call: \"100us\", per_byte: \"0.8ns\", wait_per_call: \"2000us\", "
                  "wait_per_byte: \"0.5ns\"}") != std::string::npos);
  CHECK(p.yaml.find("extends: \"mpi\"") != std::string::npos);
}

TEST_CASE("profile: gloo between nodes becomes the network, the library and each node's cores") {
  // run gloo --store on 2 nodes, one rank each: t = 2 alpha + S / B with alpha = 300 us per
  // ring step (2(n-1) = 2 steps) and bus bandwidth B = 0.12 GB/s; each call 0.1 ms + 1 ns/B of
  // process CPU. The network's transport efficiency is B over the default network's 12.5 GB/s
  // line rate (0.0096); the two nodes are namespaces of one kernel whose ranks may use 2 cores:
  // one core each.
  cal::Results r;
  r.provenance.tool = "test";
  r.provenance.devices = {{"cpu", "Test CPU"}, {"cpu_cores", "2"}};
  for (double b : sizes(1 << 20, 64 << 20)) {
    cal::Measurement m;
    m.op = "allreduce";
    m.backend = "gloo";
    m.ranks = 2;
    m.nodes = 2;
    m.bytes = b;
    m.samples_s = {600e-6 + b / 0.12e9};
    m.params["cpu_s_per_call"] = fmt::format("{:.9g}", 100e-6 + 1e-9 * b);
    m.params["rank_cores"] = "2";
    m.params["ranks_per_node"] = "1";
    m.params["nodes_per_kernel"] = "2";
    r.measurements.push_back(m);
  }
  cal::ProfileOptions o;
  o.name = "emulated";
  const auto p = cal::fit_profile({r}, o);
  CAPTURE(p.yaml);
  CHECK(p.yaml.find("efficiency: 0.0096") != std::string::npos);
  CHECK(p.yaml.find("  gpus: 1\n") != std::string::npos);
  CHECK(p.yaml.find("cores: 1") != std::string::npos);
  CHECK(p.yaml.find("host_cpu: {per_call: \"100us\", per_byte: \"1ns\"") != std::string::npos);
  CHECK(p.yaml.find("between 2 nodes") != std::string::npos);
}

TEST_CASE(
    "profile: mpi's cpu cost beside compute becomes the library's host cpu and the node's cores") {
  // run mpi --cpu-cost between two nodes, one rank each bound to one core: each allreduce of S
  // bytes took 20 us + 4 ns/B from a busy thread beside it (least squares on the seconds). The
  // library extends mpi with that host_cpu, and the node has the one core its rank ran on, so the
  // shared-cores model charges it.
  cal::Results r;
  r.provenance.tool = "test";
  r.measurements = p2p_bandwidth(1, 0.12e9);
  for (double b : sizes(64 * 1024, 32 << 20)) {
    cal::Measurement m;
    m.op = "allreduce";
    m.backend = "mpi";
    m.ranks = 2;
    m.nodes = 2;
    m.bytes = b;
    m.samples_s = {100e-6 + b / 0.12e9};
    m.params["cpu_s_per_call"] = fmt::format("{:.9g}", 20e-6 + 4e-9 * b);
    // Beside the busy thread each call also ends 15 ms + 0.5 ns/B later than alone.
    m.params["s_per_call_beside_compute"] =
        fmt::format("{:.9g}", m.samples_s[0] + 15e-3 + 0.5e-9 * b);
    m.params["rank_cores"] = "1";
    m.params["ranks_per_node"] = "1";
    r.measurements.push_back(m);
  }
  cal::ProfileOptions o;
  o.name = "live";
  const auto p = cal::fit_profile({r}, o);
  CAPTURE(p.yaml);
  CHECK(p.yaml.find("extends: \"mpi\"") != std::string::npos);
  CHECK(p.yaml.find("host_cpu: {per_call: \"20us\", per_byte: \"4ns\", wait_per_call: \"15000us\", "
                    "wait_per_byte: \"0.5ns\"}") != std::string::npos);
  CHECK(p.yaml.find("cores: 1") != std::string::npos);
  // Without the cpu cost: the plain mpi library, the base node's cores.
  for (auto& m : r.measurements) m.params.clear();
  const auto plain = cal::fit_profile({r}, o);
  CHECK(plain.yaml.find("library: mpi\n") != std::string::npos);
  CHECK(plain.yaml.find("host_cpu") == std::string::npos);
}

TEST_CASE(
    "profile: gloo times that do not grow with size still give the host's path, with a warning") {
  // A loaded machine: the 1 MiB all-reduce came out faster than the 64 KiB one. No slope to
  // read, so the rank -> host -> rank rate is the largest size's bus bandwidth, 1 MiB / 150 us
  // (bus factor 1 on 2 ranks), and fit says so instead of finding nothing to fit.
  cal::Results r;
  r.provenance.tool = "test";
  r.provenance.devices = {{"cpu", "Test CPU"}, {"cpu_cores", "2"}};
  for (const auto& [b, t] : {std::pair{65536.0, 200e-6}, std::pair{1048576.0, 150e-6}}) {
    cal::Measurement m;
    m.op = "allreduce";
    m.backend = "gloo";
    m.ranks = 2;
    m.bytes = b;
    m.samples_s = {t};
    r.measurements.push_back(m);
  }
  cal::ProfileOptions o;
  o.name = "loaded";
  const auto p = cal::fit_profile({r}, o);
  CAPTURE(p.yaml);
  CHECK(p.yaml.find("loopback: {bandwidth: \"6.99051GB/s\"") != std::string::npos);
  REQUIRE(!p.warnings.empty());
  CHECK(p.warnings.back().find("do not grow with size") != std::string::npos);
}

namespace {

// A host copy sweep: `rates` (B/s) at 2 MiB per array and doubling (16 bytes per element moved
// per call, as STREAM counts copy: 4 MiB per call at 2 MiB per array).
cal::FittedProfile fit_copies(const std::vector<double>& rates) {
  cal::Results r;
  r.provenance.tool = "test";
  double bytes = 4 << 20;
  for (const double rate : rates) {
    cal::Measurement m;
    m.op = "copy";
    m.backend = "cpu";
    m.bytes = bytes;
    m.samples_s = {bytes / rate};
    r.measurements.push_back(m);
    bytes *= 2;
  }
  cal::ProfileOptions o;
  o.name = "copies";
  return cal::fit_profile({r}, o);
}

// Everything the fit says: its report lines, then its warnings.
std::string report(const cal::FittedProfile& f) {
  std::string all;
  for (const auto& line : f.report) all += line + "\n";
  for (const auto& line : f.warnings) all += line + "\n";
  return all;
}

}  // namespace

TEST_CASE("host_memory_bandwidth_is_the_plateau_the_largest_copies_reach_past_the_caches") {
  // This VM's copy rates (GB/s, 2 .. 256 MiB per array): caches to 32 MiB, memory from 64 MiB.
  // A sweep to 256 MiB: the plateau is the 3 largest (14.0, 12.4, 12.5), median 12.5 GB/s.
  const auto full =
      fit_copies({63.6e9, 28.4e9, 27.9e9, 28.3e9, 28.7e9, 25.2e9, 14.0e9, 12.4e9, 12.5e9});
  CHECK(full.yaml.find("memory_bandwidth: \"12.5GB/s\"") != std::string::npos);
  CHECK(report(full).find("median of the 3 largest size(s) on that plateau") != std::string::npos);
  CHECK(report(full).find("still falls") == std::string::npos);
  // A sweep that stops at 64 MiB: only its largest size is past the caches (25.2 is 81 % above
  // 13.9), so that is the rate, and the report asks for larger arrays. (The median of the three
  // largest, 25.2 GB/s, was the cache's rate.)
  const auto cut = fit_copies({63.6e9, 28.4e9, 27.9e9, 28.3e9, 28.7e9, 25.2e9, 13.9e9});
  CHECK(cut.yaml.find("memory_bandwidth: \"13.9GB/s\"") != std::string::npos);
  CHECK(report(cut).find("the rate still falls at the largest sizes") != std::string::npos);
}

TEST_CASE(
    "profile: a layer table goes to a JSON file beside the profile and loads back as fitted") {
  // Two layers (one in fp32 with the host's times, one in bf16 without) and an update: the
  // profile names NAME.layers.json, and loading the profile reads every time back in s.
  cal::Results r;
  r.provenance.tool = "test";
  const auto add = [&](const std::string& op, const std::string& shape, const char* precision,
                       std::vector<double> s, std::vector<double> host) {
    cal::Measurement m;
    m.op = op;
    m.backend = "torch";
    m.shape = shape;
    m.samples_s = std::move(s);
    m.host_samples_s = std::move(host);
    m.params = {{"model", "tiny"},  {"batch", "8"},          {"threads", "1"},
                {"layer", "l"},     {"op_kind", "relu"},     {"instances", "1"},
                {"device", "cuda"}, {"precision", precision}};
    r.measurements.push_back(m);
  };
  const std::string relu = "relu {} in=[64]g out=[64]";
  const std::string tanh = "tanh {} in=[64]g out=[64]";
  add("layer_forward", relu, "fp32", {2e-6, 1e-6, 3e-6}, {5e-6, 4e-6, 6e-6});
  add("layer_backward", relu, "fp32", {3e-6}, {7e-6});
  add("layer_forward", tanh, "bf16", {1.5e-6}, {});
  add("layer_backward", tanh, "bf16", {2.5e-6}, {});
  add("optimizer_update", "sgd", "fp32", {40e-6}, {});
  r.measurements.back().params["elements"] = "4096";
  r.measurements.back().params["tensors"] = "2";
  cal::ProfileOptions o;
  o.name = "tiny_h100";
  o.base = "dgx-h100";
  o.statistic = cal::Statistic::kMin;
  const auto p = cal::fit_profile({r}, o);
  CHECK(p.layers_file == "tiny_h100.layers.json");
  CHECK(p.yaml.find("file: \"tiny_h100.layers.json\"") != std::string::npos);
  CHECK(p.yaml.find("entries:") == std::string::npos);

  const auto dir = std::filesystem::temp_directory_path() / "dlsim_test_layer_table";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tiny_h100.yaml") << p.yaml;
  std::ofstream(dir / p.layers_file) << p.layers_json;
  const auto cluster = dlsim::hardware::load_cluster((dir / "tiny_h100.yaml").string());
  const auto& k = cluster.groups.at(0).node.gpu.kernels;
  REQUIRE(k.size() == 2);
  const auto& a = k[0].layer == relu ? k[0] : k[1];
  const auto& b = k[0].layer == relu ? k[1] : k[0];
  CHECK(a.precision == "fp32");
  CHECK(a.forward.value() == dlsim_test::approx(1e-6));  // the minimum
  CHECK(a.backward.value() == dlsim_test::approx(3e-6));
  CHECK(a.forward_host.value() == dlsim_test::approx(4e-6));
  CHECK(a.backward_host.value() == dlsim_test::approx(7e-6));
  CHECK(b.precision == "bf16");
  CHECK(b.forward.value() == dlsim_test::approx(1.5e-6));
  CHECK(b.forward_host.value() == 0);
  const auto& u = cluster.groups.at(0).node.gpu.updates;
  REQUIRE(u.size() == 1);
  CHECK(u[0].elements == 4096);
  CHECK(u[0].tensors == 2);
  CHECK(u[0].time.value() == dlsim_test::approx(40e-6));
  std::filesystem::remove_all(dir);

  // The same relu measured again (another model's run): its last run's times, and a warning
  // with how far the runs differ (forward 1 us, then 1.5 us: 50 %).
  add("layer_forward", relu, "fp32", {1.5e-6}, {});
  add("layer_backward", relu, "fp32", {3e-6}, {});
  const auto again = cal::fit_profile({r}, o);
  CHECK(again.layers_json.find("\"forward_s\":1.5e-06") != std::string::npos);
  const auto w = std::find_if(again.warnings.begin(), again.warnings.end(), [](const auto& x) {
    return x.find("1 layer(s) were measured in more than one run") != std::string::npos;
  });
  REQUIRE(w != again.warnings.end());
  CHECK(w->find("differ by up to 50 %") != std::string::npos);
}

TEST_CASE("profile: an allreduce through host memory on one node is the node's shm_bandwidth") {
  // Two GeForce RTX 2080 Ti without peer-to-peer, nccl-tests all_reduce_perf -g 2 (the log
  // corpus' AutoDL run): 4.00 GB/s bus bandwidth at 1 GiB, 268,588 us. Imported with
  // --transport shm, it becomes host.shm_bandwidth, and NCCL rings of the profile that cross the
  // sockets of its base node (pcie-4gpu) are held to it.
  cal::ImportOptions shm;
  shm.transport = "shm";
  const auto r = cal::import_nccl_tests(
      std::string(DLSIM_LOG_CORPUS) +
          "/nccl-tests/autodl_2080ti_multirun_allreduce_allgather_bcast_reduce_alltoall.log",
      shm);
  cal::ProfileOptions o;
  o.base = "hkbu-ib";
  o.name = "geforce";
  const auto p = cal::fit_profile({r}, o);
  const double busbw = 1073741824 / 268588e-6;  // bus factor 1 on 2 ranks
  CHECK(p.yaml.find(fmt::format("shm_bandwidth: \"{:.6g}GB/s\"", busbw / 1e9)) !=
        std::string::npos);
  // Without the transport nothing says the GPUs went through host memory: nothing to fit.
  const auto plain = cal::import_nccl_tests(
      std::string(DLSIM_LOG_CORPUS) +
      "/nccl-tests/autodl_2080ti_multirun_allreduce_allgather_bcast_reduce_alltoall.log");
  try {
    cal::fit_profile({plain}, o);
    FAIL("fitted a profile from collectives alone");
  } catch (const dlsim::InputError& e) {
    CHECK(std::string(e.what()).find("nothing to fit") != std::string::npos);
    CHECK(std::string(e.what()).find("--transport shm") != std::string::npos);
  }
}

TEST_CASE(
    "profile: a gpu's multiprocessors as the cuda runtime reported them become its sm_count") {
  // The committed H100 calibration (run gpu on one H100 SXM5, 2026-11-22) recorded
  // cudaDeviceProp::multiProcessorCount, 132, which the H100 whitepaper gives for the SXM5 part.
  const std::string file = std::string(DLSIM_CALIBRATE_FIXTURES) +
                           "/../../../hardware/measured/h100-sxm5-2026-11-22/"
                           "h100-resnet50-fp32.jsonl";
  auto r = cal::read_results(file);
  REQUIRE(r.provenance.devices.at("gpu_multiprocessors") == "132");
  cal::ProfileOptions o;
  o.name = "h100fit";
  o.base = "dgx-h100";
  const auto p = cal::fit_profile({r}, o);
  CHECK(p.yaml.find("    extends: \"h100-sxm5\"\n    sm_count: 132\n") != std::string::npos);
  r.provenance.devices["gpu_multiprocessors"] = "0";
  CHECK_THROWS_WITH_AS(cal::fit_profile({r}, o),
                       doctest::Contains("gpu_multiprocessors: must be an SM count in 1..1024"),
                       dlsim::InputError);
}

TEST_CASE("profile: gemm results of several gpus give the spread of their own speeds") {
  // docs/calibrate.md, "The profile": the committed H100 GEMM sweep stands for four GPUs whose
  // every sample is scaled by 1 / speed, speeds 1.00, 0.97, 1.02 and 0.99. Each GPU's speed over
  // the median GPU's is the same at every shape; their coefficient of variation (sample
  // standard deviation over the mean) is 0.0208167 / 0.995 = 0.020921 -> gpu.speed_spread.
  const std::string file = std::string(DLSIM_CALIBRATE_FIXTURES) +
                           "/../../../hardware/measured/h100-sxm5-2026-11-22/"
                           "h100-resnet50-fp32.jsonl";
  const auto one = cal::read_results(file);
  cal::ProfileOptions o;
  o.name = "h100s";
  o.base = "dgx-h100";
  // One GPU: nothing to compare, the base's spread stands.
  CHECK(cal::fit_profile({one}, o).yaml.find("speed_spread") == std::string::npos);
  std::vector<cal::Results> four;
  const std::vector<double> speeds = {1.00, 0.97, 1.02, 0.99};
  for (std::size_t g = 0; g < speeds.size(); ++g) {
    auto r = one;
    r.provenance.devices["gpu_pci_bus_id"] = fmt::format("0000:{:02x}:00.0", g + 1);
    for (auto& m : r.measurements) {
      for (auto& t : m.samples_s) t /= speeds[g];
    }
    four.push_back(r);
  }
  const auto p = cal::fit_profile(four, o);
  CHECK(p.yaml.find("    speed_spread: 0.0209\n") != std::string::npos);
  const bool reported = std::any_of(p.report.begin(), p.report.end(), [](const std::string& l) {
    return l.find("GPU to GPU: 4 GPUs on") != std::string::npos &&
           l.find("speeds 0.975 .. 1.025") != std::string::npos &&
           l.find("coefficient of variation 2.09 %") != std::string::npos;
  });
  CHECK(reported);
  // The profile reads back with it.
  const auto dir = std::filesystem::temp_directory_path() / "dlsim_test_gpu_spread";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "h100s.yaml") << p.yaml;
  const auto cluster = dlsim::hardware::load_cluster((dir / "h100s.yaml").string());
  CHECK(cluster.groups.at(0).node.gpu.speed_spread == doctest::Approx(0.0209));
  std::filesystem::remove_all(dir);
  // A collected job's one file (dlcalibrate collect): each record tagged with its host and GPU.
  cal::Results merged;
  merged.provenance = one.provenance;
  for (std::size_t g = 0; g < four.size(); ++g) {
    for (auto m : four[g].measurements) {
      m.params["host"] = "node1";
      m.params["gpu_pci_bus_id"] = four[g].provenance.devices.at("gpu_pci_bus_id");
      merged.measurements.push_back(m);
    }
  }
  CHECK(cal::fit_profile({merged}, o).yaml.find("    speed_spread: 0.0209\n") != std::string::npos);
  // A fifth GPU at 0.60 of the others' speed (Sinha et al. found GPUs up to 1.5x slow) is
  // beyond Tukey's lower fence, Q1 - 1.5 IQR = 0.925 of the median GPU's: it is named, and the
  // spread is the other four's.
  auto slow = one;
  slow.provenance.devices["gpu_pci_bus_id"] = "0000:05:00.0";
  for (auto& m : slow.measurements) {
    for (auto& t : m.samples_s) t /= 0.60;
  }
  four.push_back(slow);
  const auto five = cal::fit_profile(four, o);
  CHECK(five.yaml.find("    speed_spread: 0.0209\n") != std::string::npos);
  const bool named = std::any_of(five.warnings.begin(), five.warnings.end(), [](const auto& w) {
    return w.find("0000:05:00.0 runs at 0.606 of the median") != std::string::npos;
  });
  CHECK(named);
}
