#pragma once
// Calibration results: what dlcalibrate measured or imported, one record per operation, size and
// rank count, in a JSON Lines file (docs/calibrate.md, "Results files"). The first line is the
// header (format version, provenance); every later line is one Measurement. Records are appended
// and flushed as they are measured, so an interrupted sweep keeps everything already measured
// and `--resume` can carry on from the file.

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/output.hpp"

namespace dlsim::calibrate {

inline constexpr int kResultsFormatVersion = 1;
inline constexpr const char* kResultsKind = "dlcalibrate-results";

// Where and how the results were produced.
struct Provenance {
  std::string tool;     // "dlcalibrate 0.1.0", "nccl-tests", "osu-micro-benchmarks 7.3"
  std::string command;  // the command line, as run
  std::string date;     // ISO 8601, UTC
  std::vector<std::string> hosts;
  std::string source;                              // an imported file's path, or "measured"
  std::map<std::string, std::string> versions;     // library -> version (cuda, nccl, mpi, ...)
  std::map<std::string, std::string> environment;  // NCCL_*, OMPI_*, ... as recorded
  std::map<std::string, std::string> devices;      // "gpu" -> model, "cpu" -> model, ...
  std::optional<double> load_before;               // 1-minute load average
  std::optional<double> load_after;
  std::vector<std::string> notes;  // what was done about known traps (mmap threshold, ...)
};

// One measured (or imported) operation at one size.
struct Measurement {
  std::string op;       // allreduce, allgather, reducescatter, broadcast, reduce, alltoall,
                        // p2p_latency, p2p_bandwidth, gemm, conv_fwd, conv_bwd_data,
                        // conv_bwd_filter, copy, triad, launch; layer_forward and
                        // layer_backward (a model layer's passes, shape = its
                        // model::layer_signature), optimizer_update (a whole model's)
  std::string backend;  // mpi, nccl, cpu, cuda
  int ranks = 1;
  int nodes = 1;
  double bytes = 0;   // B, the size nccl-tests reports (per-rank buffer; the whole for gathers)
  double flops = 0;   // FLOP per call, for compute operations
  std::string shape;  // compute operations: e.g. "m=256 n=1024 k=4096"
  std::string dtype = "float32";
  std::vector<double> samples_s;  // s, one per timed repetition (or the one reported time)
  // s, one per timed repetition where measured: the host's wall-clock time issuing the
  // operation's GPU work (layer_forward and layer_backward on CUDA); empty otherwise.
  std::vector<double> host_samples_s;
  std::map<std::string, std::string> params;  // algorithm, protocol, peer pair, source line...

  double min_s() const;
  double median_s() const;
  double max_s() const;
  // B/s: bytes / median time (nccl-tests' algbw); 0 without bytes.
  double algbw() const;
  // B/s: algbw x nccl-tests' bus factor for the op and ranks (= algbw for non-collectives).
  double busbw() const;
  // FLOP/s: flops / median time; 0 without flops.
  double flop_rate() const;
};

// nccl-tests' bus-bandwidth factor of `op` on `ranks` ranks (1 for non-collective ops).
double bus_factor(const std::string& op, int ranks);

// The CPU cores a results file says its machine had (devices.cpu_cores), 1 where it does not say.
double recorded_cores(const Provenance& p);
// Whether other work shared the machine: a load average (before or after) above the one process
// measuring plus a quarter of the cores (a 2-core machine at 1.5, a 16-core one at 5).
bool was_busy(const Provenance& p);

// The ops a results file may contain.
const std::vector<std::string>& known_ops();
// The element types a results file may name (Measurement::dtype): what the benchmarks and
// importers write.
const std::vector<std::string>& known_dtypes();

nlohmann::json to_json(const Provenance& p);
nlohmann::json to_json(const Measurement& m);
Provenance provenance_from_json(const nlohmann::json& j, const std::string& file);
Measurement measurement_from_json(const nlohmann::json& j, const std::string& file, int line);
// A time a log gives in microseconds, as a sample in seconds: an InputError at `where` naming
// `field` unless it lies in [kMinSeconds, kMaxSeconds], what a results file may hold.
double sample_from_us(double us, const SourceLocation& where, const std::string& field);

struct Results {
  Provenance provenance;
  std::vector<Measurement> measurements;
};

// Reads a results file. A header of another kind or format version, a malformed or truncated
// line, an unknown op or a missing field is an InputError naming the file and line. A last line
// cut short by a crash is reported the same way unless `tolerate_truncated_tail` (used by
// --resume, which then re-measures that point).
Results read_results(const std::string& path, bool tolerate_truncated_tail = false);

// Appends measurements to a results file as they come: the header is written when the file is
// created, each record is one line, flushed at once.
class ResultsWriter {
 public:
  // Creates `path` (an existing file is an InputError unless `append`, which checks that its
  // header is a results header and appends to it).
  ResultsWriter(const std::string& path, const Provenance& provenance, bool append = false);
  void add(const Measurement& m);
  // Rewrites the header's load_after and notes at the end of a run is not possible in an
  // append-only file: they are appended as a trailer record instead.
  void finish(const Provenance& final_provenance);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<AppendFile> out_;
};

// The whole results as JSON Lines text (header, then records), e.g. for an importer's output.
std::string to_jsonl(const Results& r);

}  // namespace dlsim::calibrate
