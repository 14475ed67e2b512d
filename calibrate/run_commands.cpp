#include "calibrate/run_commands.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "calibrate/bench_cpu.hpp"
#ifdef DLSIM_HAVE_CUDA
#include "calibrate/bench_cuda.hpp"
#endif
#ifdef DLSIM_HAVE_MPI
#include "calibrate/bench_mpi.hpp"
#endif
#ifdef DLSIM_HAVE_NCCL
#include "calibrate/bench_nccl.hpp"
#endif
#include "calibrate/driver.hpp"
#include "calibrate/gloo_run.hpp"
#include "calibrate/torch_run.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace dlsim::calibrate {
namespace {

template <class Parse>
double parse_flag(const std::string& flag, const std::string& text, Parse parse) {
  try {
    return parse(text).value();
  } catch (const std::invalid_argument& e) {
    fail_at({}, flag, e.what());
  }
}

void add_run_cpu(CLI::App& run, const std::string& command_line) {
  auto* c = run.add_subcommand(
      "cpu", "Memory bandwidth (STREAM copy, triad) and float32 GEMM/conv at a model's shapes");
  struct Opt {
    std::string ops = "copy,triad,gemm,conv_fwd";
    std::string model = "resnet50";
    std::int64_t batch = 32;
    std::string from = "64KiB", to = "256MiB";
    double factor = 2;
    int iters = 10, warmup = 3, conv_layers = 4;
    std::string min_time = "1ms", max_flops = "20GFLOP";
    bool resume = false;
    std::string out;
  };
  auto o = std::make_shared<Opt>();
  c->add_option("--ops", o->ops, "Comma-separated: copy, triad, gemm, conv_fwd")
      ->capture_default_str();
  c->add_option("--model", o->model,
                "Zoo model or model file whose layer shapes gemm and "
                "conv_fwd measure")
      ->capture_default_str();
  c->add_option("--batch", o->batch, "Batch size of those shapes")->capture_default_str();
  c->add_option("-b,--minbytes", o->from, "Smallest array (copy, triad), e.g. 64KiB")
      ->capture_default_str();
  c->add_option("-e,--maxbytes", o->to, "Largest array (copy, triad)")->capture_default_str();
  c->add_option("-f,--stepfactor", o->factor, "Size multiplier between steps")
      ->capture_default_str();
  c->add_option("-n,--iters", o->iters, "Timed samples per point")->capture_default_str();
  c->add_option("-w,--warmup", o->warmup, "Untimed calls per point")->capture_default_str();
  c->add_option("--min-time", o->min_time, "Least time of one sample's inner loop, e.g. 1ms")
      ->capture_default_str();
  c->add_option("--max-flops", o->max_flops,
                "Leave out products and convolutions above this work per call, e.g. 20GFLOP")
      ->capture_default_str();
  c->add_option("--conv-layers", o->conv_layers,
                "How many of the model's convolutions conv_fwd measures")
      ->capture_default_str();
  c->add_flag("--resume", o->resume,
              "Continue an existing results file: skip the points it has, append the rest");
  c->add_option("-o,--output", o->out, "Results file (JSON Lines), written as points complete")
      ->required();
  c->callback([o, command_line] {
    if (o->out == "-") fail_at({}, "--output", "needs a file (results are appended as measured)");
    CpuOptions cpu;
    cpu.ops = split_list(o->ops);
    cpu.model = o->model;
    cpu.batch = o->batch;
    cpu.from_bytes = parse_size_flag("--minbytes", o->from);
    cpu.to_bytes = parse_size_flag("--maxbytes", o->to);
    cpu.factor = o->factor;
    cpu.max_flops = parse_flag("--max-flops", o->max_flops, parse_flops);
    cpu.conv_layers = o->conv_layers;
    DriverOptions d;
    d.warmup = o->warmup;
    d.repetitions = o->iters;
    d.min_time_s = parse_flag("--min-time", o->min_time, parse_seconds);
    d.resume = o->resume;
    d.log = &std::cerr;
    d.progress = isatty(STDERR_FILENO) != 0;
    // Every input is checked (and the model loaded) before the results file is created.
    check_options(d, o->out);
    const CpuPlan plan = cpu_benchmarks(cpu);
    for (const auto& n : plan.notes) std::cerr << "dlcalibrate: " << n << "\n";
    d.notes = plan.notes;
    const auto report = run_benchmarks(plan.benchmarks, o->out, command_line, d);
    std::cerr << fmt::format(
        "dlcalibrate: {} points measured into {}{}\n", report.measured, o->out,
        report.skipped ? fmt::format(" ({} already there)", report.skipped) : "");
  });
}

void add_run_torch(CLI::App& run, const std::string& command_line) {
  auto* c = run.add_subcommand(
      "torch",
      "A model's training step through libtorch (PyTorch's kernels), timed layer by layer");
  struct Opt {
    std::string model = "resnet18";
    std::string batch = "8";
    int threads = 1, iters = 10, warmup = 3;
    std::uint64_t seed = 1;
    std::string device = "cpu", precision = "fp32";
    std::string out;
  };
  auto o = std::make_shared<Opt>();
  c->add_option("--model", o->model, "Zoo model or model file")->capture_default_str();
  c->add_option("--batch", o->batch, "Batch sizes, comma-separated (e.g. 8,16)")
      ->capture_default_str();
  c->add_option("--threads", o->threads, "Intra-op threads (torch.set_num_threads)")
      ->capture_default_str();
  c->add_option("--device", o->device, "cpu, or cuda (a libtorch built with CUDA)")
      ->capture_default_str();
  c->add_option("--precision", o->precision,
                "fp32 (TF32 off); on cuda also tf32 (TF32 in cuBLAS and cuDNN), amp (forward "
                "under autocast float16 with a gradient scaler) or bf16 (autocast bfloat16)")
      ->capture_default_str();
  c->add_option("-n,--iters", o->iters, "Timed steps per batch size")->capture_default_str();
  c->add_option("-w,--warmup", o->warmup, "Untimed steps first")->capture_default_str();
  c->add_option("--seed", o->seed, "Seed of the parameters and data")->capture_default_str();
  c->add_option("-o,--output", o->out, "Results file (JSON Lines)")->required();
  c->callback([o, command_line] {
    if (o->out == "-") fail_at({}, "--output", "needs a file");
    TorchRunOptions t;
    t.model = o->model;
    t.batches.clear();
    for (const auto& b : split_list(o->batch)) {
      std::int64_t v = 0;
      try {
        std::size_t used = 0;
        v = std::stoll(b, &used);
        if (used != b.size()) v = 0;
      } catch (const std::exception&) {
        v = 0;
      }
      if (v < 1 || v > 65536) {
        fail_at({}, "--batch", fmt::format("'{}' is not a batch size in 1..65536", b));
      }
      t.batches.push_back(v);
    }
    if (t.batches.empty()) fail_at({}, "--batch", "needs at least one batch size");
    t.threads = o->threads;
    t.device = o->device;
    t.precision = o->precision;
    t.iters = o->iters;
    t.warmup = o->warmup;
    t.seed = o->seed;
    const auto n = run_torch(t, o->out, command_line, &std::cerr);
    std::cerr << fmt::format("dlcalibrate: {} records measured into {}\n", n, o->out);
  });
}

void add_run_gloo(CLI::App& run, const std::string& command_line) {
  auto* c = run.add_subcommand(
      "gloo", "PyTorch's gloo all-reduce between local processes (DDP's CPU backend), per size");
  struct Opt {
    int ranks = 2, iters = 5, warmup = 2;
    std::string from = "4B", to = "64MiB";
    double factor = 4;
    bool cpu_cost = false;
    std::string out, store;
  };
  auto o = std::make_shared<Opt>();
  c->add_option("--ranks", o->ranks, "Local processes")->capture_default_str();
  c->add_option("--store", o->store,
                "Run as one rank of a job on several nodes (under srun): the ranks meet through a "
                "file at this path that every node sees; rank 0 writes the results");
  c->add_flag("--cpu-cost", o->cpu_cost,
              "Also time each size beside a busy compute thread in each rank "
              "(params.s_per_call_beside_compute: the exchange's wait for the cores)");
  c->add_option("-b,--minbytes", o->from, "Smallest all-reduce")->capture_default_str();
  c->add_option("-e,--maxbytes", o->to, "Largest all-reduce")->capture_default_str();
  c->add_option("-f,--stepfactor", o->factor, "Size factor between points")->capture_default_str();
  c->add_option("-n,--iters", o->iters, "Timed samples per size")->capture_default_str();
  c->add_option("-w,--warmup", o->warmup, "Untimed calls first")->capture_default_str();
  c->add_option("-o,--output", o->out, "Results file (JSON Lines)")->required();
  c->callback([o, command_line] {
    if (o->out == "-") fail_at({}, "--output", "needs a file");
    GlooRunOptions g;
    g.ranks = o->ranks;
    g.from = parse_flag("--minbytes", o->from, parse_bytes);
    g.to = parse_flag("--maxbytes", o->to, parse_bytes);
    g.factor = o->factor;
    g.iters = o->iters;
    g.warmup = o->warmup;
    g.beside_compute = o->cpu_cost;
    g.store = o->store;
    const auto n = run_gloo(g, o->out, command_line, &std::cerr);
    if (n > 0) std::cerr << fmt::format("dlcalibrate: {} sizes measured into {}\n", n, o->out);
  });
}

// A `run` subcommand this build lacks: it takes any arguments and fails with one line saying how
// to build it.
[[maybe_unused]] void add_unavailable(CLI::App& run, const char* name, const char* help,
                                      const char* why) {
  auto* c = run.add_subcommand(name, help);
  c->allow_extras();
  c->callback([name, why] { fail_at({}, fmt::format("run {}", name), why); });
}

}  // namespace

void add_run_commands(CLI::App& app, const std::string& command_line) {
  auto* run = app.add_subcommand("run", "Measure this machine and stream a results file");
  run->require_subcommand(1);
  add_run_cpu(*run, command_line);
  add_run_torch(*run, command_line);
  add_run_gloo(*run, command_line);
#ifdef DLSIM_HAVE_MPI
  add_run_mpi(*run, command_line);
#else
  add_unavailable(*run, "mpi", "MPI benchmarks (this dlcalibrate was built without MPI)",
                  "this dlcalibrate was built without MPI (install libopenmpi-dev and configure "
                  "with -DDLSIM_WITH_MPI=ON)");
#endif
#ifdef DLSIM_HAVE_CUDA
  add_run_gpu(*run, command_line);
#else
  add_unavailable(*run, "gpu", "GPU benchmarks (this dlcalibrate was built without CUDA)",
                  "this dlcalibrate was built without CUDA (install the CUDA toolkit with cuBLAS "
                  "and cuDNN 9, and configure with -DDLSIM_WITH_CUDA=ON)");
#endif
#ifdef DLSIM_HAVE_NCCL
  add_run_nccl(*run, command_line);
#else
  add_unavailable(*run, "nccl",
                  "NCCL benchmarks (this dlcalibrate was built without CUDA and MPI together)",
                  "this dlcalibrate was built without CUDA and MPI together (install the CUDA "
                  "toolkit with NCCL and libopenmpi-dev, and configure with -DDLSIM_WITH_CUDA=ON "
                  "-DDLSIM_WITH_MPI=ON)");
#endif
}

}  // namespace dlsim::calibrate
