#pragma once
// `dlsim compare`: gradient-exchange schemes side by side on one job, the verdict (winner,
// margin, what bounds each) and where the answer flips: the GPU counts and networks at which
// another scheme wins, found by predicting each (docs/simulator.md, "Comparing schemes").

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "simulator/predict.hpp"

namespace dlsim::simulator {

// A scheme is a framework (`byteps`, `tf-ps`, `horovod`, ...) with its own defaults, or a
// collective algorithm (`ring`, `tree`, `auto`, `ps`, ...) run by the base options' framework.
struct CompareOptions {
  PredictOptions base;
  std::vector<std::string> schemes;
  bool crossover = true;  // also search GPU counts and networks for a change of winner
  // The schemes are the default list, not the user's: one the job cannot run (a library without
  // trees) is left out with its reason rather than failing the comparison.
  bool skip_unavailable = false;
};

struct SchemeResult {
  std::string scheme;
  Prediction prediction;
};

// The winner of one point of a crossover search: a GPU count or a network.
struct CrossoverPoint {
  std::string value;                     // "32" or "10gbe"
  std::string winner;                    // scheme name, or empty where no scheme could run
  double margin = 0;                     // winner over the runner-up, a fraction
  bool alone = false;                    // the only scheme that could run there
  std::vector<std::string> unavailable;  // schemes that cannot run there, with the reason
};

struct Crossover {
  std::string dimension;  // "gpus" or "network"
  std::vector<CrossoverPoint> points;
  std::string summary;  // in words: where the winner changes, or that it never does
};

struct Comparison {
  std::vector<SchemeResult> results;
  // Schemes that come out as the same job (`ps` under Horovod is BytePS) are one contender,
  // named by their names joined with '=' ("ps=byteps"); `contender[i]` is result i's name.
  std::vector<std::string> contender;
  std::size_t winner = 0;  // a result of the winning contender
  double margin = 0;       // winner's throughput over the runner-up's, minus one
  std::string why;
  std::vector<Crossover> crossovers;
  std::vector<std::string> skipped;  // "tree: <why it cannot run here>" (skip_unavailable)
};

// InputError naming `--strategy` for an empty list or an unknown scheme.
Comparison compare(const CompareOptions& options);

nlohmann::json to_json(const Comparison& c);
std::string to_table(const Comparison& c);

// The first of the other usual schemes (the framework's library allreduce, BytePS) that the
// analytic engine finds more than 5 % faster than `options` on the same job, in words for
// predict's "why"; nullopt when none is, or on one node. `inputs` (may be null): the options'
// model and cluster already loaded.
std::optional<std::string> faster_scheme(const PredictOptions& options,
                                         const PredictInputs* inputs = nullptr);

// For a multi-node job whose framework offers fp16 compression (horovod, keras, byteps,
// pytorch-ddp) and does not use it, with gradients wider than 2 bytes: the gain the analytic
// engine finds with --compression fp16, in words for predict's "why", where it is more than
// 5 %; nullopt otherwise.
std::optional<std::string> faster_with_compression(const PredictOptions& options,
                                                   const PredictInputs* inputs = nullptr);

// Both of the above for predict's "why", sharing one prediction of the job.
std::vector<std::string> faster_alternatives(const PredictOptions& options,
                                             const PredictInputs& inputs);

}  // namespace dlsim::simulator
