#pragma once
// The steps `dlvalidate replay` runs (calibrate/training_step.hpp): libtorch on the CPU
// (calibrate/torch_step.hpp), cuDNN and cuBLAS on a GPU. Conventions and sources:
// docs/validate-replay.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "calibrate/training_step.hpp"
#include "model/graph.hpp"

namespace dlsim::validate {

using calibrate::GradientBuffer;
using calibrate::LayerTime;
using calibrate::TrainingStep;

// The devices `--device` takes in this build: "cpu", and "gpu" where built with CUDA.
std::vector<std::string> replay_devices();
// A step for `device` ("cpu" or "gpu"); an unknown or unavailable device (cpu in a build without
// libtorch, gpu in one without CUDA) is an InputError naming --device.
std::unique_ptr<TrainingStep> make_training_step(const std::string& device,
                                                 const model::LayerGraph& graph, std::int64_t batch,
                                                 std::uint64_t seed);

}  // namespace dlsim::validate
