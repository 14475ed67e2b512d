// The benchmark driver and the CPU benchmarks, run for real on tiny sweeps: the bytes and FLOP
// each record counts, streaming, --resume (skipping what is there, re-measuring a cut-short last
// record), the model shapes GEMM and conv_fwd measure, and im2col's correctness.
#include <doctest/doctest.h>

#include <cmath>

#include "approx.hpp"

#include <filesystem>
#include <fstream>
#include <random>

#include "calibrate/bench_cpu.hpp"
#include "calibrate/driver.hpp"
#include "common/error.hpp"
#include "model/loader.hpp"

namespace cal = dlsim::calibrate;
namespace fs = std::filesystem;

namespace {

constexpr double kKiB = 1024;

fs::path temp_file(const std::string& name) {
  const auto dir = fs::temp_directory_path() / "dlsim_test_calibrate_bench";
  fs::create_directories(dir);
  const auto p = dir / name;
  fs::remove(p);
  return p;
}

// Quick settings: 2 samples of at least 0.1 ms, one warm-up call.
cal::DriverOptions quick(bool resume = false) {
  cal::DriverOptions o;
  o.warmup = 1;
  o.repetitions = 2;
  o.min_time_s = 1e-4;
  o.resume = resume;
  return o;
}

std::vector<cal::Benchmark> stream(double from, double to) {
  const auto sizes = cal::geometric_sizes(from, to, 2, sizeof(double));
  return {cal::stream_copy_benchmark(sizes), cal::stream_triad_benchmark(sizes)};
}

std::size_t line_count(const fs::path& p) {
  std::ifstream in(p);
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);) n += !l.empty();
  return n;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dlsim::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("geometric_sizes sweeps like nccl-tests -b -e -f, both ends included") {
  const auto s = cal::geometric_sizes(64 * kKiB, 256 * kKiB, 2, 8);
  REQUIRE(s.size() == 3);
  CHECK(s[0] == 64 * kKiB);
  CHECK(s[2] == 256 * kKiB);
  CHECK(cal::geometric_sizes(64 * kKiB, 64 * kKiB, 1, 8).size() == 1);
  CHECK(cal::geometric_sizes(64 * kKiB, 255 * kKiB, 2, 8).size() == 2);  // one step short of 256
  CHECK(error_of([] { cal::geometric_sizes(2 * kKiB, kKiB, 2); }).find("--maxbytes") == 0);
  CHECK(error_of([] { cal::geometric_sizes(kKiB, 2 * kKiB, 1); }).find("--stepfactor") == 0);
  CHECK(error_of([] { cal::geometric_sizes(0, kKiB, 2); }).find("--minbytes") == 0);
  CHECK(error_of([] { cal::parse_size_flag("-b", "-64KiB"); }).find("negative") !=
        std::string::npos);
  CHECK(error_of([] { cal::parse_size_flag("-b", "64"); }).find("no unit") != std::string::npos);
}

TEST_CASE(
    "copy and triad write one record per size with STREAM's bytes: 16 B and 24 B an element") {
  const auto path = temp_file("stream.jsonl");
  const auto report =
      cal::run_benchmarks(stream(64 * kKiB, 256 * kKiB), path.string(), "test stream", quick());
  CHECK(report.measured == 6);
  const auto r = cal::read_results(path.string());
  REQUIRE(r.measurements.size() == 6);
  CHECK(r.provenance.tool.rfind("dlcalibrate ", 0) == 0);
  CHECK(r.provenance.command == "test stream");
  CHECK(r.provenance.source == "measured");
  CHECK(r.provenance.load_before.has_value());
  CHECK(r.provenance.load_after.has_value());
  CHECK(r.provenance.versions.count("eigen") == 1);
  CHECK(r.provenance.notes.front().find("M_MMAP_THRESHOLD") != std::string::npos);
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& m = r.measurements[i];
    const double array = 64 * kKiB * (1 << (i % 3));
    const double elements = array / 8;
    CHECK(m.op == (i < 3 ? "copy" : "triad"));
    CHECK(m.backend == "cpu");
    CHECK(m.dtype == "float64");
    CHECK(m.shape == "n=" + std::to_string(static_cast<long>(elements)));
    CHECK(m.bytes == (i < 3 ? 16 : 24) * elements);
    CHECK(m.flops == 0);
    REQUIRE(m.samples_s.size() == 2);
    for (double s : m.samples_s) CHECK(s > 0);
  }
}

TEST_CASE("resume skips the sizes already measured and appends only the rest") {
  const auto path = temp_file("resume.jsonl");
  auto first = cal::run_benchmarks(stream(64 * kKiB, 64 * kKiB), path.string(), "first", quick());
  CHECK(first.measured == 2);
  const auto lines_before = line_count(path);  // header, 2 records, trailer
  CHECK(lines_before == 4);

  // Without --resume an existing file is refused and left as it was.
  CHECK(error_of([&] {
          cal::run_benchmarks(stream(64 * kKiB, 256 * kKiB), path.string(), "again", quick());
        }).find("already exists") != std::string::npos);
  CHECK(line_count(path) == lines_before);

  auto second =
      cal::run_benchmarks(stream(64 * kKiB, 256 * kKiB), path.string(), "second", quick(true));
  CHECK(second.skipped == 2);
  CHECK(second.measured == 4);
  CHECK(line_count(path) == lines_before + 4 + 1);  // 4 records and this run's trailer
  const auto r = cal::read_results(path.string());
  CHECK(r.measurements.size() == 6);
  CHECK(r.provenance.command == "first");  // the header stays the first run's
  bool resumed_note = false;
  for (const auto& n : r.provenance.notes) resumed_note |= n.find("resumed") == 0;
  CHECK(resumed_note);

  // Nothing left to do: nothing measured.
  auto third =
      cal::run_benchmarks(stream(64 * kKiB, 256 * kKiB), path.string(), "third", quick(true));
  CHECK(third.measured == 0);
  CHECK(third.skipped == 6);
}

TEST_CASE("resume re-measures a last record cut short by a crash") {
  const auto path = temp_file("truncated.jsonl");
  const auto sizes = cal::geometric_sizes(64 * kKiB, 256 * kKiB, 2, 8);
  cal::run_benchmarks({cal::stream_copy_benchmark(sizes)}, path.string(), "t", quick());
  // Keep the header and two records, then half of the third: a run killed mid-write.
  std::vector<std::string> lines;
  {
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  REQUIRE(lines.size() == 5);
  {
    std::ofstream out(path, std::ios::trunc);
    out << lines[0] << '\n' << lines[1] << '\n' << lines[2] << '\n';
    out << lines[3].substr(0, lines[3].size() / 2);
  }
  CHECK(error_of([&] { cal::read_results(path.string()); }).find("cut short") != std::string::npos);
  const auto report =
      cal::run_benchmarks({cal::stream_copy_benchmark(sizes)}, path.string(), "t", quick(true));
  CHECK(report.skipped == 2);
  CHECK(report.measured == 1);
  const auto r = cal::read_results(path.string());
  REQUIRE(r.measurements.size() == 3);
  CHECK(r.measurements[2].bytes == 2 * 256 * kKiB);
}

TEST_CASE("gemm counts 2 m n k FLOP per call and names its shape") {
  cal::GemmShape g;
  g.m = 8;
  g.n = 16;
  g.k = 32;
  g.layer = "fc";
  const auto path = temp_file("gemm.jsonl");
  cal::run_benchmarks({cal::gemm_benchmark({g}, "toy", 1)}, path.string(), "g", quick());
  const auto r = cal::read_results(path.string());
  REQUIRE(r.measurements.size() == 1);
  const auto& m = r.measurements[0];
  CHECK(m.op == "gemm");
  CHECK(m.dtype == "float32");
  CHECK(m.flops == 2.0 * 8 * 16 * 32);
  CHECK(m.bytes == 0);
  CHECK(m.shape == "m=8 n=16 k=32");
  CHECK(m.params.at("layer") == "fc");
  CHECK(m.params.at("model") == "toy");
  CHECK(m.flop_rate() > 0);
}

TEST_CASE("resnet50 at batch 32 gives the GEMM shapes of its first convolution and its fc") {
  const auto graph = dlsim::model::load_model("resnet50");
  const auto shapes = cal::model_gemm_shapes(graph, 32);
  auto find = [&](std::int64_t m, std::int64_t n, std::int64_t k) -> const cal::GemmShape* {
    for (const auto& g : shapes) {
      if (g.m == m && g.n == n && g.k == k) return &g;
    }
    return nullptr;
  };
  const auto* conv1 = find(64, 32 * 112 * 112, 3 * 7 * 7);
  REQUIRE(conv1 != nullptr);
  CHECK(conv1->layer == "conv1");
  CHECK(conv1->flops() == 2.0 * 64 * 32 * 112 * 112 * 147);
  const auto* fc = find(32, 1000, 2048);
  REQUIRE(fc != nullptr);
  CHECK(fc->layer == "fc");
  // Deduplicated: no shape twice, and the layers they stand for add up to every conv and fc.
  int layers = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    layers += shapes[i].layers;
    for (std::size_t j = i + 1; j < shapes.size(); ++j) CHECK(shapes[i].str() != shapes[j].str());
  }
  CHECK(layers == 53 + 1);  // ResNet-50: 49 convolutions + 4 projection shortcuts, and fc
}

TEST_CASE("im2col + GEMM equals a direct convolution (stride, padding, dilation, groups)") {
  cal::ConvShape s;
  s.batch = 2;
  s.in_c = 4;
  s.in_h = 7;
  s.in_w = 6;
  s.out_c = 6;
  s.kernel_h = 3;
  s.kernel_w = 2;
  s.stride_h = 2;
  s.stride_w = 1;
  s.pad_h = 1;
  s.pad_w = 1;
  s.dilation_h = 2;
  s.dilation_w = 1;
  s.groups = 2;
  // PyTorch's output size: (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1.
  s.out_h = (7 + 2 - 2 * 2 - 1) / 2 + 1;
  s.out_w = (6 + 2 - 1 * 1 - 1) / 1 + 1;
  const auto cg = s.in_c / s.groups, og = s.out_c / s.groups;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> in(static_cast<std::size_t>(s.batch * s.in_c * s.in_h * s.in_w));
  std::vector<float> w(static_cast<std::size_t>(s.out_c * cg * s.kernel_h * s.kernel_w));
  for (auto& x : in) x = u(rng);
  for (auto& x : w) x = u(rng);
  const auto pixels = s.out_h * s.out_w;
  std::vector<float> cols(
      static_cast<std::size_t>(s.in_c * s.kernel_h * s.kernel_w * s.batch * pixels));
  std::vector<float> out(static_cast<std::size_t>(s.out_c * s.batch * pixels));
  cal::conv_forward_im2col(s, in.data(), w.data(), cols.data(), out.data());

  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t o = 0; o < s.out_c; ++o) {
      for (std::int64_t y = 0; y < s.out_h; ++y) {
        for (std::int64_t x = 0; x < s.out_w; ++x) {
          double want = 0, magnitude = 0;  // the sum and the sum of its terms' sizes
          const auto g = o / og;
          for (std::int64_t c = 0; c < cg; ++c) {
            for (std::int64_t ky = 0; ky < s.kernel_h; ++ky) {
              for (std::int64_t kx = 0; kx < s.kernel_w; ++kx) {
                const auto iy = y * s.stride_h - s.pad_h + ky * s.dilation_h;
                const auto ix = x * s.stride_w - s.pad_w + kx * s.dilation_w;
                if (iy < 0 || iy >= s.in_h || ix < 0 || ix >= s.in_w) continue;
                const double term =
                    static_cast<double>(in[static_cast<std::size_t>(
                        ((b * s.in_c + g * cg + c) * s.in_h + iy) * s.in_w + ix)]) *
                    w[static_cast<std::size_t>(((o * cg + c) * s.kernel_h + ky) * s.kernel_w + kx)];
                want += term;
                magnitude += std::abs(term);
              }
            }
          }
          const auto got =
              out[static_cast<std::size_t>(o * s.batch * pixels + b * pixels + y * s.out_w + x)];
          // float accumulation: within 1e-5 of the terms' size (a sum that cancels to near zero
          // keeps the rounding of its terms, so relative to the sum itself it can be far more).
          CHECK(std::abs(got - want) <= 1e-5 * magnitude);
        }
      }
    }
  }
  CHECK(s.gemm().m == 3);
  CHECK(s.gemm().k == 2 * 3 * 2);
  CHECK(s.flops() == 2.0 * 3 * static_cast<double>(2 * pixels) * 12 * 2);
}

TEST_CASE("the CPU plan measures a few small convolutions of a zoo model as conv_fwd") {
  cal::CpuOptions o;
  o.ops = {"conv_fwd"};
  o.model = "resnet18";
  o.batch = 1;
  o.max_flops = 2e7;  // only the late 1x1 projections and the like: a fast test
  o.conv_layers = 2;
  const auto plan = cal::cpu_benchmarks(o);
  REQUIRE(plan.benchmarks.size() == 1);
  REQUIRE(plan.benchmarks[0].points.size() == 2);
  const auto path = temp_file("conv.jsonl");
  cal::run_benchmarks(plan.benchmarks, path.string(), "c", quick());
  const auto r = cal::read_results(path.string());
  REQUIRE(r.measurements.size() == 2);
  for (const auto& m : r.measurements) {
    CHECK(m.op == "conv_fwd");
    CHECK(m.flops > 0);
    CHECK(m.flops <= 2e7);
    CHECK(m.params.at("method") == "im2col+gemm");
    CHECK(m.params.at("model") == "resnet18");
  }
}

TEST_CASE("bad CPU benchmark options are one InputError each, before anything is measured") {
  auto plan_error = [](auto change) {
    cal::CpuOptions o;
    change(o);
    return error_of([&] { cal::cpu_benchmarks(o); });
  };
  CHECK(plan_error([](cal::CpuOptions& o) { o.ops = {"cpoy"}; }).find("did you mean 'copy'") !=
        std::string::npos);
  CHECK(plan_error([](cal::CpuOptions& o) { o.model = "resnet5O"; }).find("unknown model") !=
        std::string::npos);
  CHECK(plan_error([](cal::CpuOptions& o) { o.batch = 0; }).find("--batch") == 0);
  CHECK(plan_error([](cal::CpuOptions& o) {
          o.from_bytes = 1024 * kKiB;
          o.to_bytes = 64 * kKiB;
        }).find("--maxbytes") == 0);
  // The plan keeps shapes within --max-flops and says how many it left out.
  const auto plan = [] {
    cal::CpuOptions o;
    o.ops = {"gemm"};
    o.max_flops = 1e9;
    return cal::cpu_benchmarks(o);
  }();
  REQUIRE(plan.notes.size() == 1);
  CHECK(plan.notes[0].find("left out") != std::string::npos);
  for (const auto& p : plan.benchmarks[0].points) CHECK(p.flops <= 1e9);
}
