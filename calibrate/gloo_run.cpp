#include "calibrate/gloo_run.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <ostream>
#include <set>

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

std::string read_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("unknown");
}

// Where the ranks run: nodes (distinct host names), kernels (distinct boot ids: emulated nodes
// in network namespaces of one machine share its kernel and its cores) and the cores a rank may
// run on.
struct Placement {
  int nodes = 1, kernels = 1, rank_cores = 1;
};

Placement placement(c10d::Store& store, int rank, int ranks) {
  const auto put = [&](const std::string& key, const std::string& value) {
    store.set(fmt::format("{}{}", key, rank), std::vector<uint8_t>(value.begin(), value.end()));
  };
  put("host", host_name());
  put("boot", read_line("/proc/sys/kernel/random/boot_id"));
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  put("cores", std::to_string(cores));
  std::set<std::string> hosts, boots;
  Placement p;
  p.rank_cores = cores;
  for (int r = 0; r < ranks; ++r) {
    const auto get = [&](const char* key) {
      const auto v = store.get(fmt::format("{}{}", key, r));
      return std::string(v.begin(), v.end());
    };
    hosts.insert(get("host"));
    boots.insert(get("boot"));
    p.rank_cores = std::min(p.rank_cores, std::max(1, std::atoi(get("cores").c_str())));
  }
  p.nodes = static_cast<int>(hosts.size());
  p.kernels = static_cast<int>(boots.size());
  return p;
}

// One rank's part: every size's samples, each the slowest rank's (wall, CPU) per call; rank 0
// writes the records.
void rank_main(const GlooRunOptions& o, int rank, const std::string& store_path,
               const std::string& path, const std::string& command_line) {
  at::set_num_threads(1);
  auto store = c10::make_intrusive<c10d::FileStore>(store_path, o.ranks);
  auto opts = c10d::ProcessGroupGloo::Options::create();
  const bool launched = !o.store.empty();
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  opts->devices.push_back(!launched ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                          : ifname && *ifname
                              ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                              : c10d::ProcessGroupGloo::createDefaultDevice());
  opts->timeout = std::chrono::milliseconds(120000);
  const Placement where = launched ? placement(*store, rank, o.ranks) : Placement{};
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
        "{} processes {}, c10d::ProcessGroupGloo over {}, one intra-op thread each; a sample is "
        "the slowest rank's mean over its inner loop, wall clock and the process's CPU time "
        "(CLOCK_PROCESS_CPUTIME_ID, gloo's threads included)",
        o.ranks,
        launched ? fmt::format("on {} node(s) ({} kernel(s))", where.nodes, where.kernels)
                 : std::string("on this host"),
        launched ? std::string(ifname && *ifname ? ifname : "the host name's interface")
                 : std::string("loopback TCP (127.0.0.1)")));
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
    m.nodes = where.nodes;
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
    m.params["transport"] = where.nodes > 1 ? "tcp" : "tcp loopback";
    if (launched) {
      // The cores each node's ranks have: a rank's cores, shared by the nodes of one kernel.
      m.params["rank_cores"] = std::to_string(where.rank_cores);
      m.params["ranks_per_node"] = std::to_string(o.ranks / std::max(1, where.nodes));
      m.params["nodes_per_kernel"] = std::to_string(where.nodes / std::max(1, where.kernels));
    }
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

namespace {

// The rank and rank count of a launched job, from the launcher's environment.
std::pair<int, int> launched_rank() {
  const auto env = [](const char* a, const char* b) -> std::optional<int> {
    for (const char* name : {a, b}) {
      if (const char* v = std::getenv(name); v && *v) {
        char* end = nullptr;
        const long x = std::strtol(v, &end, 10);
        if (*end == '\0' && x >= 0 && x <= 1 << 20) return static_cast<int>(x);
      }
    }
    return std::nullopt;
  };
  const auto rank = env("SLURM_PROCID", "RANK");
  const auto ranks = env("SLURM_NTASKS", "WORLD_SIZE");
  if (!rank || !ranks) {
    fail_at({}, "--store",
            "needs the launcher's SLURM_PROCID and SLURM_NTASKS (or RANK and WORLD_SIZE): run it "
            "under srun");
  }
  if (*ranks < 2 || *ranks > 64 || *rank >= *ranks) {
    fail_at({}, "--store", fmt::format("rank {} of {}: needs 2..64 ranks", *rank, *ranks));
  }
  return {*rank, *ranks};
}

}  // namespace

std::size_t run_gloo(const GlooRunOptions& options, const std::string& path,
                     const std::string& command_line, std::ostream* log) {
  GlooRunOptions o = options;
  if (o.iters < 1) fail_at({}, "--iters", fmt::format("must be at least 1, got {}", o.iters));
  if (o.warmup < 0) fail_at({}, "--warmup", fmt::format("must not be negative, got {}", o.warmup));
  if (!(o.from >= 4) || !(o.to >= o.from) || !(o.factor > 1)) {
    fail_at({}, "--minbytes",
            fmt::format("the sizes {} .. {} by x{} are not a sweep from 4 B up", o.from, o.to,
                        o.factor));
  }
  if (!o.store.empty()) {
    const auto [rank, ranks] = launched_rank();
    o.ranks = ranks;
    if (rank == 0) {
      DriverOptions d;
      check_options(d, path);
    }
    try {
      rank_main(o, rank, o.store, path, command_line);
    } catch (const c10::Error& e) {
      throw std::runtime_error(
          fmt::format("run gloo rank {}: {}", rank, e.what_without_backtrace()));
    }
    if (rank != 0) return 0;
    const auto written = read_results(path).measurements.size();
    if (log)
      *log << fmt::format("dlcalibrate: gloo all-reduce, {} ranks of a launched job\n", ranks);
    return written;
  }
  if (o.ranks < 2 || o.ranks > 64) {
    fail_at({}, "--ranks", fmt::format("must be in 2..64, got {}", o.ranks));
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
