#pragma once
// The replay's training step on a GPU (CUDA build): convolutions, batch normalization and LRN
// through cuDNN, every matrix product through cuBLAS, the rest as CUDA kernels; float32 without
// TF32, as dlcalibrate's fp32 benchmarks measure. docs/validate-replay.md, "On a GPU".

#include <cstdint>
#include <memory>

#include "validate/replay_step.hpp"

namespace dlsim::validate {

std::unique_ptr<TrainingStep> make_gpu_training_step(const model::LayerGraph& graph,
                                                     std::int64_t batch, std::uint64_t seed);

}  // namespace dlsim::validate
