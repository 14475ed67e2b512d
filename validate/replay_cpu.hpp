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
#include "validate/replay_ops.hpp"
#include "validate/replay_step.hpp"

namespace dlsim::validate {

class CpuTrainingStep final : public TrainingStep {
 public:
  // Allocates and fills every buffer (activations, their gradients, parameters, optimizer
  // state) for `batch` samples; the values come from a generator seeded with `seed`. An op the
  // replay has no kernel for is an InputError naming the layer.
  CpuTrainingStep(const model::LayerGraph& graph, std::int64_t batch, std::uint64_t seed);
  ~CpuTrainingStep() override;
  CpuTrainingStep(const CpuTrainingStep&) = delete;
  CpuTrainingStep& operator=(const CpuTrainingStep&) = delete;

  void forward() override;
  // The backward pass in reverse topological order; after the layer owning gradient g (index
  // into gradients()) has written it, calls ready(g).
  void backward(const std::function<void(int)>& ready) override;
  // SGD with momentum 0.9 over every parameter (one state per parameter, dlsim's "momentum"
  // optimizer), with the gradients scaled by `scale` (1 / ranks after a summing allreduce).
  void update(float scale) override;

  const std::vector<GradientBuffer>& gradients() const override;
  // The sum over the batch of the loss layers' outputs after forward().
  double loss() override;
  // Bytes of everything allocated (activations, gradients, parameters, state, scratch).
  double bytes() const override;
  std::string device() const override { return "cpu (Eigen, one thread)"; }
  void to_host(int g, float* dst) override;
  void from_host(int g, const float* src) override;
  bool host_memory() const override { return true; }
  void start_layer_timing() override;
  std::vector<LayerTime> layer_times() override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlsim::validate
