#include "calibrate/gloo_run.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <ostream>

#include "calibrate/busy_thread.hpp"
#include "calibrate/driver.hpp"
#include "calibrate/results.hpp"
#include "calibrate/torch_step.hpp"
#include "common/error.hpp"

namespace dlsim::calibrate {
namespace {

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One rank's part: every size's samples, each the slowest rank's (wall, CPU) per call; rank 0
// writes the records.
void rank_main(const GlooRunOptions& o, int rank, const std::string& store_path,
               const std::string& path, const std::string& command_line) {
  at::set_num_threads(1);
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, o.ranks);
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  opts->timeout = std::chrono::milliseconds(120000);
  c10d::ProcessGroupGloo pg(store, rank, o.ranks, opts);
  const auto reduce_max = [&pg](std::vector<double> v) {
    std::vector<at::Tensor> t{torch::tensor(v, torch::kFloat64)};
    c10d::AllreduceOptions ao;
    ao.reduceOp = c10d::ReduceOp::MAX;
    pg.allreduce(t, ao)->wait();
    return std::vector<double>(t[0].data_ptr<double>(), t[0].data_ptr<double>() + v.size());
  };
  std::unique_ptr<ResultsWriter> out;
  if (rank == 0) {
    auto prov = host_provenance(command_line);
    prov.versions["libtorch"] = torch_version();
    prov.notes.push_back(fmt::format(
        "{} processes on this host, c10d::ProcessGroupGloo over loopback TCP (127.0.0.1), one "
        "intra-op thread each; a sample is the slowest rank's mean over its inner loop, wall "
        "clock and the process's CPU time (CLOCK_PROCESS_CPUTIME_ID, gloo's threads included)",
        o.ranks));
    out = std::make_unique<ResultsWriter>(path, prov);
  }
  for (const double bytes : geometric_sizes(o.from, o.to, o.factor, 4)) {
    const auto n = static_cast<std::int64_t>(bytes / 4);
    if (n < 1) continue;
    std::vector<at::Tensor> t{torch::ones({n}, torch::kFloat32)};
    const auto call = [&] { pg.allreduce(t)->wait(); };
    for (int i = 0; i < o.warmup; ++i) call();
    // The same inner-loop count everywhere: from the slowest rank's one call.
    const double t0 = wall_now();
    call();
    const double one = reduce_max({wall_now() - t0})[0];
    const long inner =
        std::clamp(static_cast<long>(o.min_time_s / std::max(one, 1e-9)), 1L, 100000L);
    Measurement m;
    m.op = "allreduce";
    m.backend = "gloo";
    m.ranks = o.ranks;
    m.nodes = 1;
    m.bytes = static_cast<double>(n) * 4;
    std::vector<double> cpu;
    for (int s = 0; s < o.iters; ++s) {
      pg.barrier()->wait();
      const double w0 = wall_now(), c0 = cpu_now();
      for (long i = 0; i < inner; ++i) call();
      const auto worst = reduce_max({(wall_now() - w0) / static_cast<double>(inner),
                                     (cpu_now() - c0) / static_cast<double>(inner)});
      m.samples_s.push_back(worst[0]);
      cpu.push_back(worst[1]);
    }
    std::sort(cpu.begin(), cpu.end());
    m.params["transport"] = "tcp loopback";
    m.params["cpu_s_per_call"] = fmt::format("{:.6g}", cpu[cpu.size() / 2]);
    if (o.beside_compute) {
      // The same calls while a busy thread of each rank computes (a loop of at least 50 ms):
      // the slowest rank's time per call, median of the samples.
      BusyThread busy;
      const long loop = std::clamp(
          static_cast<long>(std::max(o.min_time_s, kBesideLoopSeconds) / std::max(one, 1e-9)), 1L,
          100000L);
      std::vector<double> beside;
      for (int s = 0; s < o.iters; ++s) {
        pg.barrier()->wait();
        const double w0 = wall_now();
        for (long i = 0; i < loop; ++i) call();
        beside.push_back(reduce_max({(wall_now() - w0) / static_cast<double>(loop)})[0]);
      }
      std::sort(beside.begin(), beside.end());
      m.params["s_per_call_beside_compute"] = fmt::format("{:.6g}", beside[beside.size() / 2]);
    }
    if (out) out->add(m);
  }
  if (out) {
    Provenance end;
    end.load_after = load_average();
    out->finish(end);
  }
}

}  // namespace

std::size_t run_gloo(const GlooRunOptions& o, const std::string& path,
                     const std::string& command_line, std::ostream* log) {
  if (o.ranks < 2 || o.ranks > 64) {
    fail_at({}, "--ranks", fmt::format("must be in 2..64, got {}", o.ranks));
  }
  if (o.iters < 1) fail_at({}, "--iters", fmt::format("must be at least 1, got {}", o.iters));
  if (o.warmup < 0) fail_at({}, "--warmup", fmt::format("must not be negative, got {}", o.warmup));
  if (!(o.from >= 4) || !(o.to >= o.from) || !(o.factor > 1)) {
    fail_at({}, "--minbytes",
            fmt::format("the sizes {} .. {} by x{} are not a sweep from 4 B up", o.from, o.to,
                        o.factor));
  }
  DriverOptions d;
  check_options(d, path);
  const auto store = std::filesystem::temp_directory_path() /
                     fmt::format("dlcalibrate-gloo-{}", static_cast<long>(getpid()));
  std::filesystem::remove(store);
  std::vector<pid_t> children;
  for (int r = 0; r < o.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) fail_at({}, "--ranks", "could not start a process (fork)");
    if (pid == 0) {
      int code = 0;
      try {
        rank_main(o, r, store.string(), path, command_line);
      } catch (const std::exception& e) {
        std::cerr << fmt::format("dlcalibrate: error: run gloo rank {}: {}\n", r, e.what());
        code = 1;
      }
      std::cerr.flush();
      _exit(code);
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (const pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::filesystem::remove(store);
  if (!ok) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    throw std::runtime_error("run gloo: a rank failed (its error is above)");
  }
  const auto written = read_results(path).measurements.size();
  if (log) *log << fmt::format("dlcalibrate: gloo all-reduce, {} ranks on this host\n", o.ranks);
  return written;
}

}  // namespace dlsim::calibrate
