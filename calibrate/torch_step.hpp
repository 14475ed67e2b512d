#pragma once
// A model's training step through libtorch, PyTorch's C++ library (ATen; oneDNN and the BLAS on
// the CPU): the kernels a PyTorch program runs for the same layers. Every layer of dlsim's layer
// graph becomes the ATen call torch.nn's module of that kind makes (conv2d, linear,
// batch_norm, max_pool2d, ...), at the graph's shapes, float32. Each layer's inputs enter as
// leaves of their own, so the backward pass runs layer by layer (torch::autograd::grad of the
// layer's output): the same backward kernels as one autograd pass, timed per layer, each
// gradient ready as soon as its layer is done. Built with DLSIM_WITH_TORCH (libtorch-dev).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "calibrate/training_step.hpp"
#include "model/graph.hpp"

namespace dlsim::calibrate {

// Whether this build has libtorch.
bool have_torch();
// The op kinds the libtorch step runs, sorted.
const std::vector<std::string>& torch_ops();
// The libtorch version this build uses ("1.13.1"), empty without libtorch.
std::string torch_version();

// A step of `graph` at `batch` samples with `threads` intra-op threads (torch::set_num_threads,
// process-wide), parameters and data from a generator seeded with `seed`. An op it cannot run
// is an InputError naming the layer; without libtorch, an InputError naming what to install.
std::unique_ptr<TrainingStep> make_torch_step(const model::LayerGraph& graph, std::int64_t batch,
                                              std::uint64_t seed, int threads);

}  // namespace dlsim::calibrate
