#pragma once
// One rank's training step for `dlvalidate replay`: a model's forward and backward kernels at
// its real shapes and the optimizer update, on the CPU (validate/replay_cpu.hpp) or on a GPU
// with cuDNN and cuBLAS (validate/replay_gpu.hpp, in the CUDA build). Conventions and sources:
// docs/validate-replay.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/graph.hpp"

namespace dlsim::validate {

// A gradient tensor the step produces: its storage, owner and size. On a GPU both pointers are
// device memory.
struct GradientBuffer {
  float* data = nullptr;
  float* value = nullptr;  // the parameter it is the gradient of
  std::int64_t elements = 0;
  std::string layer, tensor;
};

// The time one layer's kernels took, summed over the steps since layer timing began.
struct LayerTime {
  std::string layer, op;
  double forward_s = 0, backward_s = 0;
};

class TrainingStep {
 public:
  virtual ~TrainingStep() = default;
  virtual void forward() = 0;
  // The backward pass in reverse topological order; once the layer owning gradient g (index
  // into gradients(), model::analyze()'s backward order) has been issued, calls ready(g).
  virtual void backward(const std::function<void(int)>& ready) = 0;
  // SGD with momentum 0.9 over every parameter, gradients scaled by `scale` (1 / ranks after a
  // summing allreduce). Returns when the update is done.
  virtual void update(float scale) = 0;
  virtual const std::vector<GradientBuffer>& gradients() const = 0;
  // The sum over the batch of the loss layers' outputs after forward().
  virtual double loss() = 0;
  // Bytes of everything allocated (activations, gradients, parameters, state, scratch).
  virtual double bytes() const = 0;
  // What runs the kernels, in words ("cpu (Eigen, one thread)", "NVIDIA H100 ... cuDNN ...").
  virtual std::string device() const = 0;

  // Gradient g into / out of host memory (the exchange's fusion buffer); on a GPU these wait
  // for the kernel that writes g. Thread-safe against the step's own thread.
  virtual void to_host(int g, float* dst) = 0;
  virtual void from_host(int g, const float* src) = 0;
  // Whether gradients() point to host memory the exchange may use in place.
  virtual bool host_memory() const = 0;

  // Starts (again) summing each layer's forward and backward time: wall-clock on the CPU, CUDA
  // events around the layer's kernels on a GPU (no synchronization between layers).
  virtual void start_layer_timing() = 0;
  // Per layer in topological order, the sums since start_layer_timing().
  virtual std::vector<LayerTime> layer_times() = 0;
};

// The devices `--device` takes in this build: "cpu", and "gpu" where built with CUDA.
std::vector<std::string> replay_devices();
// A step for `device` ("cpu" or "gpu"); an unknown or unavailable device is an InputError
// naming --device.
std::unique_ptr<TrainingStep> make_training_step(const std::string& device,
                                                 const model::LayerGraph& graph, std::int64_t batch,
                                                 std::uint64_t seed);

}  // namespace dlsim::validate
