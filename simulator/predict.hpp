#pragma once
// `dlsim predict`: resolves a model, a cluster and a framework into a step setup, runs an
// engine, and explains the result (docs/simulator.md; JSON schema in docs/predict-json.md).

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/profile.hpp"
#include "model/analysis.hpp"
#include "model/graph.hpp"
#include "model/loader.hpp"
#include "simulator/compute.hpp"
#include "simulator/framework.hpp"
#include "simulator/observer.hpp"

namespace dlsim::simulator {

class FlowObserver;

enum class Engine { kDes, kAnalytic };
std::optional<Engine> parse_engine(std::string_view text);
std::string_view to_string(Engine e);

// What a prediction is of, typed: the programs parse their flags (and dlvalidate its cases
// files) into this, each naming its own field in errors; predict() checks what only the
// resolved model and cluster can tell (the GPU count against the cluster, the batch against
// memory).
struct PredictOptions {
  std::string model;                   // zoo name, YAML or ONNX file
  model::ParamOverrides model_params;  // "--set seq_len=64"
  int gpus = 0;
  std::optional<int> gpus_per_node;
  std::string nodelist;
  std::optional<std::int64_t> batch;  // per GPU; nullopt: kDefaultBatch (or batch_max)
  bool batch_max = false;             // the largest batch that fits in memory
  std::string cluster = "default";
  std::optional<std::string> library;  // a library preset or file instead of the cluster's
  std::optional<std::string> network;  // a network preset or file instead of the cluster's
  std::optional<int> rails;            // NICs per node the job uses (default: all)
  std::string framework = "horovod";
  std::optional<std::string> strategy;
  FrameworkOptions framework_options;
  TrainingPrecision precision = TrainingPrecision::kFp32;
  Optimizer optimizer = Optimizer::kMomentum;
  int iterations = 5;
  std::uint64_t seed = 1;
  bool overlap = true;  // false: communication starts after the whole backward pass
  // Parameter servers, both engines: one worker node's exchanges stand for every node's where
  // the nodes are alike (docs/simulator.md, "One worker node for all"); false: every node's.
  bool mirror_nodes = true;
  Engine engine = Engine::kDes;
  std::optional<double> anchor_throughput;  // samples/s on one GPU at this batch
  // What each node's input pipeline (its data loaders, all its GPUs' together) delivers,
  // samples/s; nullopt: it keeps up with any step (docs/simulator.md, "Input pipeline").
  std::optional<double> input_rate;
  // GPUs known to run at another speed than their profile's (a GPU that `dlcalibrate fit` named
  // an outlier): rank -> its speed relative to the profile's, in (0, kMaxGpuSpeed]. The 1-GPU
  // step that efficiencies are measured by stays the profile's.
  std::map<int, double> gpu_speed;
};
inline constexpr double kMaxGpuSpeed = 4.0;
// The smallest speed and anchor: a GPU a thousand times slower than its profile, one sample every
// 1,000 s. Below them a step runs past the simulator's clock (1e6 s) for any real batch, and the
// error is better named by the option than by the step.
inline constexpr double kMinGpuSpeed = 1e-3;
inline constexpr double kMinAnchorThroughput = 1e-3;
// The largest --anchor-throughput: 10^9 samples/s on one GPU, far above any model's rate (its
// compute times would otherwise scale below the clock's picosecond).
inline constexpr double kMaxAnchorThroughput = 1e9;
// The largest --input-rate, samples/s per node: a bound far above any loader's (a higher one
// would make a step's interval round to no time at all).
inline constexpr double kMaxInputRate = 1e9;
inline constexpr std::int64_t kDefaultBatch = 32;
// The most steps the DES simulates: the mean settles within a few (stragglers are drawn per
// step), and each step's events and trace grow the run's time and memory.
inline constexpr int kMaxIterations = 1000;
using model::kMaxBatch;

// A batch as written ("64" or "max") into `batch` or `batch_max` of `o`; false (and `o`
// unchanged) for anything else: zero, negative, above kMaxBatch, not a whole number.
bool set_batch(PredictOptions& o, std::string_view text);
// The batch as written back ("64", "max", or the default).
std::string batch_text(const PredictOptions& o);

// Each part of 1 - scaling efficiency, in seconds of the mean step (docs/simulator.md,
// "Where the efficiency goes").
struct EfficiencyLoss {
  double exposed_bandwidth = 0;
  double latency_and_small_messages = 0;
  double fusion_or_bucket_waiting = 0;
  double parameter_server_bottleneck = 0;
  double communication_on_compute = 0;  // compute lost to communication work: bucket copies
                                        // on the compute stream, host CPU (shared cores)
  double input_pipeline = 0;            // waiting for the next batch (PredictOptions::input_rate)
  double stragglers = 0;
  double other = 0;
};

struct Prediction {
  std::string model, cluster, framework, strategy, engine, precision, optimizer;
  int gpus = 0, nodes = 0, iterations = 0;
  std::uint64_t seed = 0;
  std::int64_t batch_per_gpu = 0;
  double step_time_s = 0;
  double single_gpu_step_s = 0;
  double throughput = 0;  // samples/s
  double scaling_efficiency = 0;
  double forward_s = 0, backward_s = 0, update_s = 0;
  double communication_s = 0;
  // Of it, what runs after the last GPU's backward pass; after_backward_s: from there to the end
  // of the last activity, idle waits (Horovod's cycle, ...) included.
  double exposed_communication_s = 0, after_backward_s = 0;
  EfficiencyLoss loss;  // s
  MemoryUse memory;
  double memory_capacity_bytes = 0;
  bool fits_in_memory = true;
  int groups = 0;  // collectives per step
  double gradient_bytes = 0;
  double anchor_scale = 1;
  // The share of a GPU's compute time (forward, backward, update) whose times come from the
  // profile's measured entries; 0 where every time is the roofline's.
  double compute_measured_share = 0;
  // The mean wait of a step for the input pipeline's batches (s), where its rate was given.
  std::optional<double> input_wait_s;
  std::string policy_description;
  std::map<std::string, std::string> policy_settings;
  // The largest exchange (a full fusion buffer or bucket) alone: its time and what bounds it.
  double largest_collective_bytes = 0, largest_collective_s = 0;
  std::string bottleneck;
  // What runs the largest collective: the algorithm and protocol the library picks (NCCL's
  // tuner for `auto`), its channels, and why.
  std::string collective_algorithm, collective_protocol, collective_why;
  int collective_channels = 0;
  // The share of a GPU's compute its NCCL kernel takes while it overlaps backward
  // (CollectivePlanner::compute_share); 0 where none.
  double collective_compute_share = 0;
  std::uint64_t events = 0;
  int mirrored_nodes = 1;  // worker nodes node 0's exchanges stood for (either engine)
  std::vector<std::string> why;
  nlohmann::json hardware;  // the resolved cluster
  nlohmann::json inputs;
};

// The model and cluster a prediction resolves from its options' files and presets (model,
// model_params, cluster, library, network), loaded once for several predictions that differ
// only in the rest: `faster_scheme` and the CLI's predict share them instead of parsing the
// profile and its layer table again for each.
struct PredictInputs {
  model::LayerGraph graph;
  hardware::ClusterSpec cluster;
  // What they were loaded from, to check that a prediction's options name the same.
  std::string model, cluster_ref;
  model::ParamOverrides model_params;
  std::optional<std::string> library, network;
  bool matches(const PredictOptions& o) const;
};
// Checks what the options alone can tell (GPU count, batch, framework, ...) before reading any
// file, as predict() does.
PredictInputs load_inputs(const PredictOptions& options);

// `trace` (may be null) receives every span, per layer included.
Prediction predict(const PredictOptions& options, StepObserver* trace = nullptr);
// The same from inputs already loaded; they must match the options (std::logic_error if not).
Prediction predict(const PredictOptions& options, const PredictInputs& inputs,
                   StepObserver* trace = nullptr);

nlohmann::json to_json(const Prediction& p);
std::string to_table(const Prediction& p);
std::string csv_header();
std::string to_csv_row(const Prediction& p);

}  // namespace dlsim::simulator
