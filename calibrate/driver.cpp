#include "calibrate/driver.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/error.hpp"
#include "common/units.hpp"
#include "common/version.hpp"

namespace dlsim::calibrate {

const char* const kMmapNote =
    "every buffer is allocated and written once before warm-up and timing: glibc's malloc "
    "serves blocks above M_MMAP_THRESHOLD (128 KiB at first, mallopt(3)) from fresh mmap'd "
    "pages, each of which page-faults on its first touch";

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double time_n(const std::function<void()>& run, long n) {
  const auto start = Clock::now();
  for (long i = 0; i < n; ++i) run();
  return seconds_since(start);
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string compiler() {
#if defined(__clang__)
  return __VERSION__;  // "Clang 15.0.7 ..." names itself
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

unsigned cores() { return std::max(1u, std::thread::hardware_concurrency()); }

// A note (and a warning on `log`) when the load average is above half the core count: other
// work then shares the cores and the memory bus with the benchmark.
void check_load(std::optional<double> load, const char* when, const DriverOptions& o,
                std::vector<std::string>& notes) {
  if (!load || *load <= cores() / 2.0) return;
  const auto text = fmt::format(
      "load average {:.2f} {} the run is above half the {} cores: the numbers include the "
      "other work on this machine",
      *load, when, cores());
  notes.push_back(text);
  if (o.log) *o.log << "dlcalibrate: warning: " << text << "\n";
}

std::string describe(const Benchmark& b, const BenchPoint& p) {
  return fmt::format("{} {}{}{}", b.op, b.backend,
                     p.bytes > 0 ? " " + format_bytes(Bytes(p.bytes)) : "",
                     p.shape.empty() ? "" : " " + p.shape);
}

// The host's memory from /proc/meminfo (MemTotal, kB), in bytes; nothing where it cannot tell.
std::optional<double> host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:" && unit == "kB" && kb > 0) return kb * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The "model name" line of /proc/cpuinfo (x86; other architectures may lack it).
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto first = line.find_first_not_of(" \t", colon + 1);
        return first == std::string::npos ? "unknown" : line.substr(first);
      }
    }
  }
  return "unknown";
}

std::vector<double> geometric_sizes(double from, double to, double factor, double align) {
  if (!(from > 0)) fail_at({}, "--minbytes", "must be positive");
  if (from < align) {
    fail_at({}, "--minbytes",
            fmt::format("must be at least one element ({})", format_bytes(Bytes(align))));
  }
  if (to < from) {
    fail_at({}, "--maxbytes",
            fmt::format("{} is below --minbytes {}", format_bytes(Bytes(to)),
                        format_bytes(Bytes(from))));
  }
  if (to > from && !(factor > 1)) fail_at({}, "--stepfactor", "must be above 1");
  std::vector<double> sizes;
  // Steps are computed from `from` (not accumulated) so that, e.g., 64KiB x 2^12 lands exactly.
  for (int i = 0;; ++i) {
    const double s = from * std::pow(factor, i);
    if (s > to * (1 + 1e-12)) break;
    const double rounded = std::floor(s / align) * align;
    if (sizes.empty() || rounded > sizes.back()) sizes.push_back(rounded);
    if (to == from) break;
  }
  return sizes;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

double parse_size_flag(const std::string& flag, const std::string& text) {
  double v = 0;
  try {
    v = parse_bytes(text).value();
  } catch (const std::invalid_argument& e) {
    fail_at({}, flag, e.what());
  }
  if (v < 0) fail_at({}, flag, fmt::format("'{}' is negative", text));
  return v;
}

Timing time_calls(const std::function<void()>& run, const DriverOptions& o) {
  Timing t;
  // Inner count as Google Benchmark predicts it (benchmark_runner.cc, PredictNumItersNeeded):
  // aim 40 % above the minimum time, grow at most 10x per try.
  long n = 1;
  for (;;) {
    const double s = time_n(run, n);
    if (s >= o.min_time_s) break;
    const double multiplier = s > 0 ? o.min_time_s * 1.4 / s : 10.0;
    n = std::max(n + 1,
                 static_cast<long>(std::ceil(static_cast<double>(n) * std::min(multiplier, 10.0))));
  }
  t.inner_calls = n;
  for (int r = 0; r < o.repetitions; ++r) {
    t.samples_s.push_back(time_n(run, n) / static_cast<double>(n));
  }
  return t;
}

std::optional<double> load_average() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  if (!(in >> load)) return std::nullopt;
  return load;
}

Provenance host_provenance(const std::string& command_line) {
  Provenance p;
  p.tool = std::string("dlcalibrate ") + kVersion;
  p.command = command_line;
  p.date = utc_now();
  p.hosts = {host_name()};
  p.source = "measured";
  p.versions["eigen"] =
      fmt::format("{}.{}.{}", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
  p.versions["eigen_simd"] = Eigen::SimdInstructionSetsInUse();
  p.versions["compiler"] = compiler();
  p.devices["cpu"] = cpu_model();
  p.devices["cpu_cores"] = std::to_string(cores());
  if (const auto m = host_memory_bytes()) p.devices["memory"] = fmt::format("{:.0f}B", *m);
  for (const char* v : {"OMP_NUM_THREADS", "GOMP_CPU_AFFINITY", "MALLOC_MMAP_THRESHOLD_"}) {
    if (const char* value = std::getenv(v)) p.environment[v] = value;
  }
  p.load_before = load_average();
  p.notes = {kMmapNote,
             fmt::format("Eigen runs on {} thread(s) (Eigen::nbThreads())", Eigen::nbThreads())};
  return p;
}

std::string resume_key(const std::string& op, const std::string& backend, int ranks, double bytes,
                       const std::string& shape) {
  // %.17g keeps every double distinct, as the JSON file stores them.
  return fmt::format("{}|{}|{}|{:.17g}|{}", op, backend, ranks, bytes, shape);
}

void check_options(const DriverOptions& o, const std::string& path) {
  if (o.repetitions < 1) fail_at({}, "--iters", "must be at least 1");
  if (o.warmup < 0) fail_at({}, "--warmup", "must not be negative");
  if (!(o.min_time_s > 0)) fail_at({}, "--min-time", "must be positive");
  if (std::error_code ec; !o.resume && std::filesystem::exists(path, ec)) {
    fail_at({path}, "", "already exists (use --resume to continue it, or another name)");
  }
}

DriverReport run_benchmarks(const std::vector<Benchmark>& benchmarks, const std::string& path,
                            const std::string& command_line, const DriverOptions& o) {
  for (const auto& b : benchmarks) {
    if (std::find(known_ops().begin(), known_ops().end(), b.op) == known_ops().end()) {
      fail_at({}, "op",
              fmt::format("unknown operation '{}'{}", b.op, did_you_mean(b.op, known_ops())));
    }
  }
  check_options(o, path);
  std::error_code exists_error;
  const bool exists = std::filesystem::exists(path, exists_error);
  std::set<std::string> done;
  if (exists) {
    for (const auto& m : read_results(path, true).measurements) {
      done.insert(resume_key(m.op, m.backend, m.ranks, m.bytes, m.shape));
    }
  }

  // A new file's notes go in its header; a resumed file's in the trailer of this run.
  Provenance prov = host_provenance(command_line);
  std::vector<std::string> trailer_notes;
  auto& notes = exists ? trailer_notes : prov.notes;
  notes.insert(notes.end(), o.notes.begin(), o.notes.end());
  check_load(prov.load_before, "before", o, notes);
  if (exists) {
    trailer_notes.push_back(fmt::format("resumed on {} at {} by: {} (load average before {:.2f})",
                                        prov.hosts.front(), prov.date, command_line,
                                        prov.load_before.value_or(0)));
  }
  ResultsWriter writer(path, prov, exists);

  std::size_t total = 0;
  for (const auto& b : benchmarks) total += b.points.size();
  DriverReport report;
  std::size_t index = 0;
  for (const auto& b : benchmarks) {
    for (const auto& p : b.points) {
      ++index;
      if (done.count(resume_key(b.op, b.backend, b.ranks, p.bytes, p.shape))) {
        ++report.skipped;
        continue;
      }
      b.setup(p);
      for (int i = 0; i < o.warmup; ++i) b.run();
      const Timing t = time_calls(b.run, o);
      if (b.teardown) b.teardown();

      Measurement m;
      m.op = b.op;
      m.backend = b.backend;
      m.ranks = b.ranks;
      m.nodes = b.nodes;
      m.bytes = p.bytes;
      m.flops = p.flops;
      m.shape = p.shape;
      m.dtype = b.dtype;
      m.samples_s = t.samples_s;
      m.params = p.params;
      m.params["inner_calls"] = std::to_string(t.inner_calls);
      writer.add(m);
      ++report.measured;
      if (o.progress && o.log) {
        *o.log << fmt::format("[{}/{}] {}: median {}{}{}\n", index, total, describe(b, p),
                              format_seconds(Seconds(m.median_s())),
                              m.bytes > 0 ? ", " + format_bandwidth(Bandwidth(m.algbw())) : "",
                              m.flops > 0 ? ", " + format_flop_rate(FlopRate(m.flop_rate())) : "");
      }
    }
  }

  Provenance end;
  end.load_after = load_average();
  end.notes = trailer_notes;
  check_load(end.load_after, "after", o, end.notes);
  writer.finish(end);
  return report;
}

}  // namespace dlsim::calibrate
