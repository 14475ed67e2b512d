#pragma once
// Readers for what users already have from their own runs (docs/validate-readers.md):
//   - tf_cnn_benchmarks logs (tensorflow/benchmarks, scripts/tf_cnn_benchmarks/benchmark_cnn.py),
//     from one process or from a Horovod job whose ranks' output is interleaved;
//   - Horovod's synthetic benchmarks (horovod/horovod examples: pytorch_synthetic_benchmark.py,
//     tensorflow2_synthetic_benchmark.py, tensorflow2_keras_synthetic_benchmark.py);
//   - Horovod timelines (HOROVOD_TIMELINE, written by horovod/common/timeline.cc).
// A log becomes a row with the columns of ../shared/validation/throughput.csv, so `dlvalidate
// published` compares it with a prediction like any published row. Every malformed input is an
// InputError whose one line names the file, the line and the problem.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "validate/published.hpp"

namespace dlsim::validate {

// One progress line of a log.
struct StepValue {
  int rank = -1;      // from an mpirun/horovodrun/srun output tag; -1 when the line has none
  int step = 0;       // tf_cnn_benchmarks' step number, or Horovod's "Iter #"
  double rate = 0;    // samples/s as printed: tf_cnn_benchmarks' mean of this process since the
                      // warm-up; Horovod's rate of that iteration, per GPU
  double spread = 0;  // tf_cnn_benchmarks' "+/-" (standard error of the mean); 0 for Horovod
  std::optional<double> loss;
  int line = 0;
};

// What one log says about one training run.
struct Measurement {
  std::string format;  // "tf_cnn_benchmarks" or "horovod"
  std::string path;
  std::string model_printed;  // as the log spells it
  std::string model;          // the dlsim zoo name
  int batch_per_gpu = 0;
  int gpus = 0;
  // tf_cnn_benchmarks' settings, where printed: Variables: (parameter_server, replicated,
  // horovod, ...), AllReduce: (the all_reduce_spec, "None" when unset), "Horovod on:".
  std::string variables, all_reduce, horovod_device;
  bool distributed = false;  // a tf_cnn_benchmarks job with a job name (it prints "Sync:")
  std::string dataset, mode, data_format, optimizer, tensorflow;  // as printed
  double total = 0;                                               // samples/s of the whole job
  double spread = 0;  // +/- of total, in samples/s; spread_kind says what it is
  std::string spread_kind;
  std::vector<double> rank_totals;  // each 'total images/sec' line (tf_cnn_benchmarks)
  std::vector<int> total_lines;     // the lines the total was read from
  std::vector<StepValue> steps;
  std::map<std::string, int> lines;  // field ("model", "batch_per_gpu", "gpus", ...) -> line
};

struct LogOptions {
  std::string format = "auto";  // tf_cnn_benchmarks, horovod or auto (told from the lines)
  std::string model;            // a zoo name used instead of the printed model
};
// Reads one log. A log without its throughput line (a job stopped early), a rank without its
// total, a header line whose value does not parse, two runs in one file, a model the zoo does not
// have (without LogOptions::model), or a run on CPUs is an InputError naming the file and line.
Measurement read_log(const std::string& path, const LogOptions& options = {});

// The dlsim zoo name of a model as a benchmark spells it ("inception3", "ResNet50",
// "resnet50_v1.5"); an unknown name is an InputError at `where` naming the nearest zoo names.
std::string zoo_model_name(const std::string& printed, const SourceLocation& where);

// What a log does not print, from the command line; empty fields stay empty in the row.
struct RowOptions {
  std::string source_id, gpu, precision, data, intra_node, inter_node, comm, framework, notes;
  std::string task = "train";
  std::optional<int> nodes, gpus_per_node;
};
// The columns of ../shared/validation/throughput.csv, in order.
const std::vector<std::string>& throughput_columns();
// The measurement as a row of those columns (docs/validate-readers.md, "CSV columns"). Node
// counts that do not divide the GPU count are an InputError naming the flag.
Row to_row(const Measurement& m, const RowOptions& options);
// A CSV with a header of `columns` and one line per row, quoted as read_table reads it. A field
// with a line break is an InputError naming its column.
std::string write_csv(const std::vector<std::string>& columns, const std::vector<Row>& rows);

// One kind of interval of a Horovod timeline, over all tensors.
struct TimelinePhase {
  std::string name;       // NEGOTIATE_ALLREDUCE, ALLREDUCE, QUEUE, NCCL_ALLREDUCE, ...
  bool activity = false;  // nested inside an operation (QUEUE, MEMCPY_*, NCCL_*, MPI_*)
  int intervals = 0;
  double total_ms = 0;     // summed over tensors: each tensor of a fused operation counts its own
  double per_step_ms = 0;  // total_ms / steps
  double longest_ms = 0;
};
struct TimelineSummary {
  std::string path;
  bool closed = false;     // the array ends with ']' (newer writers close it after every record)
  int records = 0;         // JSON objects read
  int tensors = 0;         // tensors (Chrome "processes") with events
  int cycles = 0;          // CYCLE_START markers (one per Horovod background-loop cycle)
  int steps = 0;           // the most operations on one tensor (each tensor is reduced once a step)
  int rank_ready = 0;      // negotiation ticks (X events named by a rank)
  int open_at_end = 0;     // begun and never ended: the job stopped mid-operation
  int unmatched_ends = 0;  // ends without a begin: the timeline started mid-operation
  double span_ms = 0;      // first to last timestamp
  std::vector<TimelinePhase> phases;  // in order of first appearance
};
// Reads a Horovod timeline (Chrome trace event array, timestamps in microseconds). A file
// without its closing ']' is read as chrome://tracing reads it; a record cut in the middle, a
// record that is not JSON, a field of the wrong type, an unknown event phase or an end before its
// begin is an InputError naming the file and line.
TimelineSummary read_timeline(const std::string& path);
std::string timeline_markdown(const TimelineSummary& s);
// `program` goes into the context block ("dlvalidate 0.4.0").
std::string timeline_json(const TimelineSummary& s, const std::string& program);

}  // namespace dlsim::validate
