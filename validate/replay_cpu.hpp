#pragma once
// One rank's data-parallel training step on the CPU, at a zoo model's real shapes: every layer's
// forward and backward kernels run (Eigen GEMM and im2col convolution, window, normalization and
// element-wise loops), on synthetic data, float32, one thread. The gradients come out in the
// backward order model::analyze() lists them, which is the order dlsim's framework policies
// group them in. Conventions and sources: docs/validate.md, "Replay".

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/graph.hpp"

namespace dlsim::validate {

// A gradient tensor the step produced: its storage, owner and size.
struct GradientBuffer {
  float* data = nullptr;
  float* value = nullptr;  // the parameter it is the gradient of

  std::int64_t elements = 0;
  std::string layer, tensor;
};

class CpuTrainingStep {
 public:
  // Allocates and fills every buffer (activations, their gradients, parameters, optimizer
  // state) for `batch` samples; the values come from a generator seeded with `seed`. An op the
  // replay has no kernel for is an InputError naming the layer.
  CpuTrainingStep(const model::LayerGraph& graph, std::int64_t batch, std::uint64_t seed);
  ~CpuTrainingStep();
  CpuTrainingStep(const CpuTrainingStep&) = delete;
  CpuTrainingStep& operator=(const CpuTrainingStep&) = delete;

  void forward();
  // The backward pass in reverse topological order; after the layer owning gradient g (index
  // into gradients()) has written it, calls ready(g).
  void backward(const std::function<void(int)>& ready);
  // SGD with momentum 0.9 over every parameter (one state per parameter, dlsim's "momentum"
  // optimizer), with the gradients scaled by `scale` (1 / ranks after a summing allreduce).
  void update(float scale);

  const std::vector<GradientBuffer>& gradients() const;
  // The sum over the batch of the loss layers' outputs after forward().
  double loss() const;
  // Bytes of everything allocated (activations, gradients, parameters, state, scratch).
  double bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The op kinds the CPU replay runs.
const std::vector<std::string>& replay_cpu_ops();

}  // namespace dlsim::validate
