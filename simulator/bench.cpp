// dlsim-bench: how fast dlsim predicts, and how much memory it needs, from 8 to 65,536 GPUs.
//
// For each GPU count, model (resnet50, googlenet) and engine (des, analytic) it measures
//   (a) predict() in this process: wall time, median of --repeat runs (steady_clock);
//   (b) the whole `dlsim predict ... --format json >/dev/null` process: wall time from fork
//       to wait4(), median of --repeat runs;
//   (c) that process's peak resident memory (ru_maxrss from its own wait4());
//   (d) the DES events dispatched and events per second of (a).
// The clusters are generated YAML files of N/4 nodes of the default node type (4 GPUs each).
// It then times `dlsim predict --model googlenet --gpus 64` on the default cluster (median of
// --repeat-small runs) and one DES iteration of ResNet-50 on 1,024 GPUs, and prints a Markdown
// fragment (docs/performance.md shows one run).
//
// Peak memory per child: ru_maxrss of a child also counts what it inherited. A child forked
// from this process starts with this process's resident pages (and a vfork/posix_spawn child
// records this process's own peak when it calls exec), so after a large in-process predict()
// every child would report at least that. Each dlsim process is therefore started by a small
// helper, this program re-executed with --spawn-helper: the helper forks, execs dlsim, waits for
// it with wait4() and reports the wall time and the child's own rusage through a pipe.
//
// Usage: dlsim-bench --dlsim build/simulator/dlsim [--max-gpus 16384] [--out FILE.md]

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "simulator/predict.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kGpusPerNode = 4;  // the default cluster's node (iris-v100x4)
const std::vector<int> kGpuCounts = {8, 64, 512, 1024, 4096, 16384, 65536};
const std::vector<std::string> kModels = {"resnet50", "googlenet"};
const std::vector<std::string> kEngines = {"des", "analytic"};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double tv_seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
}

// ---- the helper: fork, exec, wait4 -------------------------------------------------------

// argv: dlsim-bench --spawn-helper PROGRAM ARGS...; prints "status wall_s maxrss_kb cpu_s".
int spawn_helper(int argc, char** argv) {
  if (argc < 3) return 2;
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("dlsim-bench: fork");
    return 2;
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      close(null);
    }
    execv(argv[2], argv + 2);
    std::perror("dlsim-bench: exec");
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      std::perror("dlsim-bench: wait4");
      return 2;
    }
  }
  const double wall = seconds_since(t0);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::printf("%d %.9f %ld %.6f\n", code, wall, usage.ru_maxrss,
              tv_seconds(usage.ru_utime) + tv_seconds(usage.ru_stime));
  return 0;
}

struct ChildRun {
  int status = -1;  // exit code; 128 + signal when killed
  double wall_s = 0;
  long maxrss_kb = 0;
  double cpu_s = 0;
};

// Runs `args` (args[0] an absolute path) through the helper; stdout goes to /dev/null.
ChildRun run_child(const std::string& self, const std::vector<std::string>& args) {
  std::vector<std::string> all = {self, "--spawn-helper"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error(fmt::format("cannot start {}: {}", self, std::strerror(rc)));
  }
  std::string out;
  char buffer[256];
  for (;;) {
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ChildRun run;
  std::istringstream in(out);
  if (!(in >> run.status >> run.wall_s >> run.maxrss_kb >> run.cpu_s)) {
    run.status = -1;
  }
  return run;
}

// ---- clusters --------------------------------------------------------------------------------

// bench-<nodes>.yaml in `dir`: `nodes` nodes of the default node type. Host names are not
// given: the default cluster names 16 hosts, and a cluster that extends it with another node
// count drops them and names its hosts node00001, node00002, ... (hardware/loader.cpp).
std::string write_cluster(const fs::path& dir, int nodes) {
  const std::string name = fmt::format("bench-{}", nodes);
  const fs::path path = dir / (name + ".yaml");
  std::ofstream f(path);
  f << "kind: cluster\n"
    << "name: " << name << "\n"
    << "description: " << nodes << " nodes of the default node type, for benchmarks\n"
    << "source: generated by dlsim-bench\n"
    << "extends: default\n"
    << "nodes: " << nodes << "\n";
  if (!f) throw std::runtime_error("cannot write " + path.string());
  return fs::absolute(path).string();
}

// ---- measurements ----------------------------------------------------------------------------

struct InProcess {
  double median_s = 0;
  double step_time_s = 0;  // simulated
  std::uint64_t events = 0;
  int iterations = 0;
  std::string error;
};

InProcess time_predict(const dlsim::simulator::PredictOptions& o, int repeat) {
  InProcess r;
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    try {
      const auto t0 = Clock::now();
      const auto p = dlsim::simulator::predict(o);
      times.push_back(seconds_since(t0));
      r.step_time_s = p.step_time_s;
      r.events = p.events;
      r.iterations = p.iterations;
    } catch (const std::exception& e) {
      r.error = e.what();
      return r;
    }
  }
  r.median_s = median(times);
  return r;
}

struct Process {
  double median_s = 0, min_s = 0, max_s = 0;
  long maxrss_kb = 0;  // the largest of the runs
  double cpu_s = 0;    // median
  int failed_status = 0;
};

Process time_process(const std::string& self, const std::vector<std::string>& args, int repeat) {
  Process r;
  std::vector<double> walls, cpus;
  for (int i = 0; i < repeat; ++i) {
    const ChildRun c = run_child(self, args);
    if (c.status != 0) {
      r.failed_status = c.status;
      return r;
    }
    walls.push_back(c.wall_s);
    cpus.push_back(c.cpu_s);
    r.maxrss_kb = std::max(r.maxrss_kb, c.maxrss_kb);
  }
  r.median_s = median(walls);
  r.min_s = *std::min_element(walls.begin(), walls.end());
  r.max_s = *std::max_element(walls.begin(), walls.end());
  r.cpu_s = median(cpus);
  return r;
}

std::vector<std::string> dlsim_args(const std::string& dlsim, const std::string& model, int gpus,
                                    const std::string& cluster, const std::string& engine,
                                    std::optional<int> iterations = std::nullopt) {
  std::vector<std::string> a = {
      dlsim, "predict", "--model", model, "--gpus", std::to_string(gpus), "--engine", engine};
  if (!cluster.empty()) {
    a.push_back("--cluster");
    a.push_back(cluster);
  }
  if (iterations) {
    a.push_back("--iterations");
    a.push_back(std::to_string(*iterations));
  }
  // The JSON goes to standard output, which the helper points at /dev/null: a child never names
  // a device node as its output file.
  for (const char* s : {"--format", "json"}) a.emplace_back(s);
  return a;
}

// ---- formatting ------------------------------------------------------------------------------

std::string duration(double s) {
  if (s < 1) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

std::string mib(long kb) { return fmt::format("{:.1f}", static_cast<double>(kb) / 1024.0); }

std::string count(double v) {
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

struct Row {
  std::string model, engine;
  int gpus = 0, nodes = 0;
  InProcess in;
  std::optional<Process> proc;  // absent without --dlsim
};

std::string met(bool ok) { return ok ? "**met**" : "**not met**"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--spawn-helper") == 0) return spawn_helper(argc, argv);

  CLI::App app{"dlsim-bench: speed and memory of dlsim predict from 8 to 65,536 GPUs"};
  int max_gpus = 16384;
  int min_gpus = 8;
  int repeat = 3;
  int repeat_small = 10;
  std::string out_path, dlsim, cluster_dir;
  std::vector<std::string> models = kModels, engines = kEngines;
  app.add_option("--max-gpus", max_gpus, "Largest GPU count (8 ... 65536)")->capture_default_str();
  app.add_option("--min-gpus", min_gpus, "Smallest GPU count of the table")->capture_default_str();
  app.add_option("--dlsim", dlsim, "The dlsim program, for whole-process runs");
  app.add_option("--out", out_path, "Also write the Markdown fragment to this file");
  app.add_option("--repeat", repeat, "Runs per measurement (median)")->capture_default_str();
  app.add_option("--repeat-small", repeat_small, "Runs of the googlenet/64-GPU process")
      ->capture_default_str();
  app.add_option("--models", models, "Models")->delimiter(',')->capture_default_str();
  app.add_option("--engines", engines, "Engines")->delimiter(',')->capture_default_str();
  app.add_option("--cluster-dir", cluster_dir, "Keep the generated cluster files here");
  CLI11_PARSE(app, argc, argv);
  if (repeat < 1 || repeat_small < 1) {
    std::cerr << "dlsim-bench: --repeat and --repeat-small must be at least 1\n";
    return 2;
  }

  std::error_code ec;
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) {
    std::cerr << "dlsim-bench: cannot find its own program: " << ec.message() << "\n";
    return 2;
  }
  if (!dlsim.empty()) {
    dlsim = fs::absolute(dlsim).string();
    if (access(dlsim.c_str(), X_OK) != 0) {
      std::cerr << "dlsim-bench: " << dlsim << " is not an executable program\n";
      return 2;
    }
  } else {
    std::cerr << "dlsim-bench: no --dlsim: measuring predict() in this process only\n";
  }

  const bool temporary = cluster_dir.empty();
  fs::path dir;
  if (temporary) {
    std::string tmpl = (fs::temp_directory_path() / "dlsim-bench-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) {
      std::perror("dlsim-bench: mkdtemp");
      return 2;
    }
    dir = tmpl;
  } else {
    dir = cluster_dir;
    fs::create_directories(dir);
  }

  const auto bench_start = Clock::now();
  std::vector<Row> rows;
  for (int gpus : kGpuCounts) {
    if (gpus > max_gpus) break;
    if (gpus < min_gpus) continue;
    const int nodes = (gpus + kGpusPerNode - 1) / kGpusPerNode;
    const std::string cluster = write_cluster(dir, nodes);
    for (const auto& model : models) {
      for (const auto& engine : engines) {
        Row row;
        row.model = model;
        row.engine = engine;
        row.gpus = gpus;
        row.nodes = nodes;
        dlsim::simulator::PredictOptions o;
        o.model = model;
        o.gpus = gpus;
        o.cluster = cluster;
        o.engine = *dlsim::simulator::parse_engine(engine);
        std::cerr << fmt::format("{} {} {} GPUs: predict() ...", model, engine, gpus) << std::flush;
        row.in = time_predict(o, repeat);
        if (!row.in.error.empty()) {
          std::cerr << " failed: " << row.in.error << "\n";
        } else {
          std::cerr << " " << duration(row.in.median_s);
        }
        if (!dlsim.empty()) {
          std::cerr << ", process ..." << std::flush;
          row.proc = time_process(self, dlsim_args(dlsim, model, gpus, cluster, engine), repeat);
          if (row.proc->failed_status != 0) {
            std::cerr << " failed (exit " << row.proc->failed_status << ")";
          } else {
            std::cerr << " " << duration(row.proc->median_s) << ", " << mib(row.proc->maxrss_kb)
                      << " MiB";
          }
        }
        std::cerr << "\n";
        rows.push_back(std::move(row));
      }
    }
  }

  // The targets' own runs.
  std::optional<Process> small, startup;
  InProcess small_in;
  if (!dlsim.empty()) {
    std::cerr << "googlenet des 64 GPUs, default cluster: process x" << repeat_small << " ..."
              << std::flush;
    small = time_process(self, dlsim_args(dlsim, "googlenet", 64, "", "des"), repeat_small);
    std::cerr << " " << duration(small->median_s) << "\n";
    // What any dlsim process costs before it predicts anything.
    startup = time_process(self, {dlsim, "--version"}, repeat_small);
  }
  {
    dlsim::simulator::PredictOptions o;
    o.model = "googlenet";
    o.gpus = 64;
    small_in = time_predict(o, repeat_small);
  }
  InProcess one_step;
  std::optional<Process> one_step_proc;
  bool one_step_run = false;
  if (max_gpus >= 1024 && std::find(models.begin(), models.end(), "resnet50") != models.end()) {
    one_step_run = true;
    dlsim::simulator::PredictOptions o;
    o.model = "resnet50";
    o.gpus = 1024;
    o.cluster = write_cluster(dir, 1024 / kGpusPerNode);
    o.engine = dlsim::simulator::Engine::kDes;
    o.iterations = 1;
    std::cerr << "resnet50 des 1024 GPUs, 1 iteration: predict() ..." << std::flush;
    one_step = time_predict(o, repeat);
    std::cerr << " " << duration(one_step.median_s);
    if (!dlsim.empty()) {
      one_step_proc =
          time_process(self, dlsim_args(dlsim, "resnet50", 1024, o.cluster, "des", 1), repeat);
      std::cerr << ", process " << duration(one_step_proc->median_s);
    }
    std::cerr << "\n";
  }
  const double bench_s = seconds_since(bench_start);

  // ---- the report ----
  std::ostringstream md;
  md << fmt::format(
      "Each cell: median of {} runs. predict(): the library call in one process (default {} "
      "iterations); process: `dlsim predict ... --format json >/dev/null` from fork to "
      "wait4(); peak RSS: that process's ru_maxrss (largest of the runs); per GPU: peak RSS / "
      "GPUs, and the growth from the previous GPU count (Δ); events/s: DES events / predict() "
      "time.\n\n",
      repeat, dlsim::simulator::PredictOptions{}.iterations);
  md << "| model | engine | GPUs | nodes | predict() | per iteration | process | peak RSS MiB "
        "| KiB/GPU | Δ KiB/GPU | DES events | events/s | simulated step |\n";
  md << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (!r.in.error.empty()) {
      md << fmt::format("| {} | {} | {} | {} | failed: {} |||||||||\n", r.model, r.engine, r.gpus,
                        r.nodes, r.in.error);
      continue;
    }
    std::string process = "–", rss = "–", per_gpu = "–", delta = "–";
    if (r.proc && r.proc->failed_status != 0) {
      process = fmt::format("exit {}", r.proc->failed_status);
    } else if (r.proc) {
      process = duration(r.proc->median_s);
      rss = mib(r.proc->maxrss_kb);
      per_gpu = fmt::format("{:.1f}", static_cast<double>(r.proc->maxrss_kb) / r.gpus);
      // The previous GPU count of the same model and engine.
      for (std::size_t j = i; j-- > 0;) {
        const Row& q = rows[j];
        if (q.model == r.model && q.engine == r.engine) {
          if (q.proc && q.proc->failed_status == 0) {
            delta =
                fmt::format("{:.1f}", static_cast<double>(r.proc->maxrss_kb - q.proc->maxrss_kb) /
                                          static_cast<double>(r.gpus - q.gpus));
          }
          break;
        }
      }
    }
    const bool des = r.engine == "des";
    md << fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} ms |\n", r.model,
        r.engine, r.gpus, r.nodes, duration(r.in.median_s),
        duration(r.in.median_s / std::max(1, r.in.iterations)), process, rss, per_gpu, delta,
        des ? count(static_cast<double>(r.in.events)) : "–",
        des && r.in.median_s > 0 ? count(static_cast<double>(r.in.events) / r.in.median_s) : "–",
        r.in.step_time_s * 1e3);
  }

  auto find = [&](const std::string& model, const std::string& engine, int gpus) -> const Row* {
    for (const auto& r : rows) {
      if (r.model == model && r.engine == engine && r.gpus == gpus && r.in.error.empty()) {
        return &r;
      }
    }
    return nullptr;
  };

  md << "\nTargets:\n\n";
  if (small && small->failed_status == 0) {
    md << fmt::format(
        "- `dlsim predict --model googlenet --gpus 64` (default cluster, des) as a whole "
        "process within 20 ms: median {} of {} runs (min {}, max {}): {}\n",
        duration(small->median_s), repeat_small, duration(small->min_s), duration(small->max_s),
        met(small->median_s <= 0.020));
    if (small_in.error.empty()) {
      md << fmt::format("  (the same predict() in one process: median {}",
                        duration(small_in.median_s));
      if (startup && startup->failed_status == 0) {
        md << fmt::format("; `dlsim --version` as a process: median {}",
                          duration(startup->median_s));
      }
      md << ")\n";
    }
  }
  if (one_step_run && one_step.error.empty()) {
    std::string proc;
    if (one_step_proc && one_step_proc->failed_status == 0) {
      proc =
          fmt::format(", whole process with --iterations 1 {}", duration(one_step_proc->median_s));
    }
    md << fmt::format(
        "- One DES step of ResNet-50 on 1,024 GPUs within 0.5 s: predict() with iterations = 1 "
        "takes {}{}: {}\n",
        duration(one_step.median_s), proc, met(one_step.median_s <= 0.5));
    if (const Row* r = find("resnet50", "des", 1024)) {
      md << fmt::format("  (with the default {} iterations: predict() {}, {} per iteration)\n",
                        r->in.iterations, duration(r->in.median_s),
                        duration(r->in.median_s / std::max(1, r->in.iterations)));
    }
  }
  for (const std::string engine : {"des", "analytic"}) {
    if (const Row* r = find("resnet50", engine, 512)) {
      const double t = r->proc && r->proc->failed_status == 0 ? r->proc->median_s : r->in.median_s;
      md << fmt::format("- ResNet-50 on 512 GPUs ({}) in <= 0.1 s: {} {}: {}\n", engine,
                        r->proc ? "whole process" : "predict()", duration(t), met(t <= 0.1));
    }
  }
  if (max_gpus >= 65536) {
    double worst = 0;
    std::string which;
    for (const auto& r : rows) {
      if (r.gpus != 65536) continue;
      const double t = r.proc && r.proc->failed_status == 0 ? r.proc->median_s : r.in.median_s;
      if (t > worst) {
        worst = t;
        which = r.model + " " + r.engine;
      }
    }
    if (!which.empty()) {
      md << fmt::format("- 65,536 GPUs within a minute: slowest {} {}: {}\n", which,
                        duration(worst), met(worst <= 60));
    }
  }
  md << fmt::format("\nBenchmark wall time: {:.0f} s.\n", bench_s);

  std::cout << md.str();
  if (!out_path.empty()) {
    std::ofstream f(out_path);
    f << md.str();
    if (!f) {
      std::cerr << "dlsim-bench: cannot write " << out_path << "\n";
      return 1;
    }
  }
  if (temporary) fs::remove_all(dir, ec);
  return 0;
}
