#pragma once
// The benchmark driver of dlcalibrate: one loop that every measured operation goes through, in
// the manner of nccl-tests (NVIDIA, github.com/NVIDIA/nccl-tests, src/common.cu).
//
// A benchmark only says what it measures: its op (one of known_ops()), the points to measure
// (each with the bytes one call moves, the FLOP it does and a shape), how to set a point up and
// how to run one call. The driver does the rest, the same way for every op:
//   - sizes: a geometric sweep from/to/factor (nccl-tests' -b, -e, -f) from geometric_sizes();
//   - set-up: the benchmark allocates its buffers and writes every byte once, before any timing:
//     glibc's malloc serves large blocks from fresh mmap'd pages (above M_MMAP_THRESHOLD, 128 KiB
//     at first, mallopt(3)), and each page of those faults on its first touch; timing a buffer's
//     first use would time the kernel's page-fault handler, not the operation (kMmapNote);
//   - warm-up: `warmup` untimed calls (caches, branch predictors, CPU frequency);
//   - timing: std::chrono::steady_clock (monotonic); each sample is the mean over an inner loop of
//     enough calls to last at least `min_time_s` (1 ms by default), so the clock's resolution and
//     the cost of reading it stay below 0.1 % of a sample; the inner count is found as Google
//     Benchmark finds its iteration count (benchmark_runner.cc, PredictNumItersNeeded): grow by
//     the ratio of the time wanted to the time taken, at most 10x per try;
//   - `repetitions` samples per point; the record keeps them all (min/median/max are derived,
//     results.hpp);
//   - streaming: each point is appended to the results file (ResultsWriter) as soon as it is
//     measured; with `resume`, points already in the file (same op, backend, ranks, bytes and
//     shape) are skipped, and a last line cut short by a crash is measured again;
//   - provenance: tool and version, command line, UTC date, host, CPU model, compiler, Eigen
//     version and SIMD sets, and the 1-minute load average before and after (a warning when it
//     is above half the core count: the numbers then measure the other jobs too).
// The MPI collectives (bench_mpi.cpp) take their bus factor from bus_factor() (results.hpp), as
// nccl-tests does.

#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/results.hpp"

namespace dlsim::calibrate {

// What the driver writes down about the first-touch trap (provenance notes).
extern const char* const kMmapNote;

// One point of a benchmark: what one call moves and does, and how its record is named.
struct BenchPoint {
  double bytes = 0;   // B one call moves, as the op counts them (0 for compute operations)
  double flops = 0;   // FLOP one call does (0 for memory operations)
  std::string shape;  // e.g. "n=8192" or "m=64 n=401408 k=147"; part of the resume key
  std::map<std::string, std::string> params;  // layer, model, ... (written to the record)
};

// One operation to measure. Contract: setup(p) prepares point p (allocates and writes every
// buffer byte once); run() does one call at the point set up last and must leave its result in
// memory (the driver cannot see whether it was computed); teardown(), if given, frees the point.
struct Benchmark {
  std::string op;  // one of known_ops()
  std::string backend = "cpu";
  std::string dtype = "float32";
  int ranks = 1;
  int nodes = 1;
  std::vector<BenchPoint> points;  // measured in this order
  std::function<void(const BenchPoint&)> setup;
  std::function<void()> run;
  std::function<void()> teardown;
};

// nccl-tests' size sweep: from, from x factor, from x factor^2, ... while not above `to` (both
// ends included when the steps land on `to`), each rounded down to a multiple of `align` bytes.
// An InputError for from <= 0, to < from, factor <= 1 (unless from == to), or from < align.
std::vector<double> geometric_sizes(double from, double to, double factor, double align = 1);

// "a,b,,c" -> {a, b, c}: the comma-separated lists of the benchmark flags (--ops).
std::vector<std::string> split_list(const std::string& text);

// A size flag ("64KiB") in bytes; InputError naming the flag for a bad or negative value.
double parse_size_flag(const std::string& flag, const std::string& text);

struct DriverOptions {
  int warmup = 3;                  // untimed calls per point
  int repetitions = 10;            // samples per point
  double min_time_s = 1e-3;        // s, the least time one sample's inner loop lasts
  bool resume = false;             // continue an existing results file
  std::ostream* log = nullptr;     // warnings (and progress); nullptr: quiet
  bool progress = false;           // one line per point on `log` (the CLI: when stderr is a tty)
  std::vector<std::string> notes;  // added to the provenance (e.g. what the plan left out)
};

// Samples of one point: each the mean time of one call over `inner_calls` calls, s.
struct Timing {
  std::vector<double> samples_s;
  long inner_calls = 1;
};
Timing time_calls(const std::function<void()>& run, const DriverOptions& options);

// The 1-minute load average (/proc/loadavg, first field); nullopt where it cannot be read.
std::optional<double> load_average();

// Where this run happens: tool, command, date, host, CPU, compiler and Eigen, load before, and
// the notes on the traps handled.
Provenance host_provenance(const std::string& command_line);
// The time now in UTC, ISO 8601 ("2026-11-22T17:11:16Z").
std::string utc_now();
// The "model name" line of /proc/cpuinfo, or "unknown".
std::string cpu_model();

// The key --resume compares: op, backend, ranks, bytes and shape.
std::string resume_key(const std::string& op, const std::string& backend, int ranks, double bytes,
                       const std::string& shape);

struct DriverReport {
  std::size_t measured = 0;  // points measured and appended
  std::size_t skipped = 0;   // points already in the file (--resume)
};

// An InputError for options out of range, or for an existing `path` without options.resume.
void check_options(const DriverOptions& options, const std::string& path);

// Measures every point of every benchmark into the results file `path`, streaming each record.
// Checks `options` and `path` first (check_options), before anything is measured.
DriverReport run_benchmarks(const std::vector<Benchmark>& benchmarks, const std::string& path,
                            const std::string& command_line, const DriverOptions& options);

}  // namespace dlsim::calibrate
