#pragma once
// `dlsim predict`: resolves a model, a cluster and a framework into a step setup, runs an
// engine, and explains the result (docs/simulator.md; JSON schema in docs/predict-json.md).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hardware/profile.hpp"
#include "model/graph.hpp"
#include "simulator/compute.hpp"
#include "simulator/framework.hpp"
#include "simulator/observer.hpp"

namespace dlsim::simulator {

class FlowObserver;

struct PredictOptions {
  std::string model;
  int gpus = 0;
  std::optional<int> gpus_per_node;
  std::string nodelist;
  std::string batch;  // per GPU: a positive integer, "max", or empty for the default (32)
  std::string cluster = "default";
  std::string framework = "horovod";
  std::optional<std::string> strategy;
  FrameworkOptions framework_options;
  std::string precision = "fp32";
  std::string optimizer = "momentum";
  int iterations = 5;
  std::uint64_t seed = 1;
  std::string engine = "des";
  std::optional<double> anchor_throughput;
};
inline constexpr std::int64_t kDefaultBatch = 32;

// Each part of 1 - scaling efficiency, in seconds of the mean step (docs/simulator.md,
// "Where the efficiency goes").
struct EfficiencyLoss {
  double exposed_bandwidth = 0;
  double latency_and_small_messages = 0;
  double fusion_or_bucket_waiting = 0;
  double parameter_server_bottleneck = 0;
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
  double communication_s = 0, exposed_communication_s = 0;
  EfficiencyLoss loss;  // s
  MemoryUse memory;
  double memory_capacity_bytes = 0;
  bool fits_in_memory = true;
  int groups = 0;  // collectives per step
  double gradient_bytes = 0;
  double anchor_scale = 1;
  std::string policy_description;
  std::map<std::string, std::string> policy_settings;
  // The largest exchange (a full fusion buffer or bucket) alone: its time and what bounds it.
  double largest_collective_bytes = 0, largest_collective_s = 0;
  std::string bottleneck;
  std::uint64_t events = 0;
  std::vector<std::string> why;
  nlohmann::json hardware;  // the resolved cluster
  nlohmann::json inputs;
};

// `trace` (may be null) receives every span, per layer included.
Prediction predict(const PredictOptions& options, StepObserver* trace = nullptr);

nlohmann::json to_json(const Prediction& p);
std::string to_table(const Prediction& p);
std::string csv_header();
std::string to_csv_row(const Prediction& p);

}  // namespace dlsim::simulator
