#pragma once
// One rank's training step of a model at its real shapes: forward, backward and the optimizer
// update, layer by layer from dlsim's layer graph. `dlcalibrate run torch` times it layer by
// layer (docs/calibrate.md, "Layer tables"), and `dlvalidate replay` runs it with a gradient
// exchange between ranks (docs/validate-replay.md). The implementations: libtorch on the CPU or a
// CUDA device (calibrate/torch_step.hpp), and the replay's cuDNN and cuBLAS step on a GPU
// (validate/replay_gpu.hpp, in the CUDA build).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dlsim::calibrate {

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
  // On a GPU, the host's wall-clock time issuing the layer's kernels (zero where not measured).
  double forward_host_s = 0, backward_host_s = 0;
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
  // What runs the kernels, in words ("cpu (libtorch 1.13, oneDNN, 1 thread)", "NVIDIA H100 ...").
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

}  // namespace dlsim::calibrate
