#pragma once
// `dlvalidate replay`: a real data-parallel training step, one rank per worker, as
// tf_cnn_benchmarks and Horovod's synthetic benchmark run one (docs/validate.md, "Replay"):
// every layer's forward and backward kernels at the model's shapes on synthetic data, the
// gradient exchange of a framework policy (the same policy objects dlsim predicts with), and
// the optimizer update. It times every step on every rank and writes a measurement file (JSON)
// and a row of throughput.csv's columns (CSV) that `dlvalidate published` reads.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "simulator/framework.hpp"
#include "validate/replay_comm.hpp"
#include "validate/replay_step.hpp"

namespace dlsim::validate {

struct ReplayOptions {
  std::string model;
  std::string device = "cpu";  // cpu | gpu (CUDA build)
  std::int64_t batch = 8;      // per rank
  std::string framework = "horovod";
  std::optional<std::string> strategy;
  simulator::FrameworkOptions framework_options;
  int steps = 5;   // timed
  int warmup = 2;  // run first, not timed
  std::uint64_t seed = 1;
  std::string source_id = "replay";
  std::string inter_node;  // a label of the network between nodes, for the CSV row
  std::string json, csv;   // outputs (rank 0 writes them)
};

// One rank's timings, in seconds, one entry per timed step.
struct RankTimes {
  int rank = 0;
  std::string host;
  std::vector<double> step, forward, backward, exchange_wait, update;
  double exchanged_bytes = 0;     // per step, sent into the exchange by this rank
  std::vector<LayerTime> layers;  // per timed step (the mean), rank 0 only
  int collectives = 0;            // per step
  // Over the timed steps: time in the ring's point-to-point steps and the bytes sent in them
  // (ReplayComm::ring_transfers); zero without a ring exchange.
  double ring_seconds = 0, ring_bytes_sent = 0;
};

struct ReplayMeasurement {
  ReplayOptions options;
  std::string model;             // the model's name (options.model may be a file)
  std::string strategy, policy;  // resolved
  int ranks = 1, nodes = 1;
  std::string library, command, date, dlsim_version, cpu;
  std::string backend;  // what ran the kernels, in words
  double gradient_bytes = 0;
  int gradient_tensors = 0;
  double allocated_bytes = 0;  // per rank
  std::vector<RankTimes> per_rank;
  // The job's step time: per step the slowest rank's; the median over the timed steps.
  double step_median_s = 0, step_mean_s = 0, step_min_s = 0, step_max_s = 0, step_stddev_s = 0;
  double samples_per_s = 0;  // ranks x batch / median step time
  // How much longer the slowest rank's forward pass takes than the fastest's (each the median
  // over the timed steps), as a fraction: every rank runs the same forward pass and nothing is
  // exchanged during it, so anything above zero is a rank whose core gave it less time.
  double forward_imbalance = 0;
  std::string slowest_forward_host;
};

// The ranks' forward-pass imbalance of ReplayMeasurement (0 for fewer than two ranks), and the
// host of the slowest rank.
std::pair<double, std::string> forward_imbalance(const std::vector<RankTimes>& ranks);
// Above this imbalance (a fraction) `dlvalidate replay` warns that a core gave its rank less time
// (docs/validate-replay.md, "Output"; the live validation's noise limit is the same 5 %).
inline constexpr double kForwardImbalanceWarning = 0.05;

// Runs the replay on every rank of `comm`. Returns the measurement on rank 0 (others get an
// empty one). Bad options are InputErrors; ranks whose configuration differs from rank 0's are
// an InputError on rank 0 naming the rank and the setting.
ReplayMeasurement run_replay(const ReplayOptions& options, ReplayComm& comm,
                             const std::string& command);

// The measurement as JSON (docs/validate.md, "Replay output") and as a CSV with
// ../shared/validation/throughput.csv's columns and one row.
std::string replay_json(const ReplayMeasurement& m);
std::string replay_csv(const ReplayMeasurement& m);

}  // namespace dlsim::validate
