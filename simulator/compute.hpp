#pragma once
// What one GPU spends on one training step of a model, layer by layer, and how much memory it
// holds: the roofline cost model with the profile's efficiency curves (docs/simulator.md,
// "Compute time" and "Memory"). Times are for one GPU at the per-GPU batch of `stats`.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/precision.hpp"
#include "common/units.hpp"
#include "hardware/profile.hpp"
#include "model/analysis.hpp"

namespace dlsim::simulator {

// The training precisions (common/precision.hpp).
using dlsim::parse_training_precision;
using dlsim::to_string;
using dlsim::training_precision_names;
using dlsim::TrainingPrecision;
// The element type activations are stored in.
Precision activation_precision(TrainingPrecision p);
// Bytes of one gradient (and master weight) element.
Bytes gradient_element(TrainingPrecision p);

enum class Optimizer { kSgd, kMomentum, kAdam };
std::optional<Optimizer> parse_optimizer(const std::string& s);
std::string to_string(Optimizer o);
int optimizer_states(Optimizer o);  // fp32 values kept per parameter: 0, 1, 2

// Time of one kernel (docs/simulator.md, eq. "roofline"):
//   launch + max((F + h_c) / (P e_c), (B + h_m) / (M e_m))
// the roofline of Williams et al. 2009 with efficiency curves e(x) = e x / (x + h), which make
// small kernels slower than their share of peak. Zero work costs nothing (a view).
Seconds kernel_time(Flops flops, Bytes bytes, FlopRate peak, const hardware::EfficiencyCurve& c,
                    Bandwidth memory, const hardware::EfficiencyCurve& m, Seconds launch);
// Whether the same kernel's traffic term is the larger (the kernel is memory-bound).
bool memory_bound(Flops flops, Bytes bytes, FlopRate peak, const hardware::EfficiencyCurve& c,
                  Bandwidth memory, const hardware::EfficiencyCurve& m);

struct LayerTime {
  Seconds forward;
  Seconds backward;            // input gradient + weight gradient
  std::vector<int> gradients;  // gradient tensors (backward order) done with this layer
};

struct ComputeProfile {
  std::vector<LayerTime> layers;  // topological order
  std::vector<std::string> layer_names;
  std::vector<double> gradient_bytes;  // per gradient tensor, backward order, as exchanged
  Seconds forward, backward;           // sums over layers
  Seconds update;                      // optimizer step over every parameter
  // The part of `backward` in kernels the roofline puts on the memory side (traffic term over
  // the arithmetic term), measured layers split as their roofline is: what a collective's memory
  // traffic slows (docs/simulator.md, "NCCL on the compute's SMs").
  Seconds backward_memory_bound;
  double scale = 1;  // the anchor's factor applied to every time (1: none)
  // Layers whose times come from the device's measured layer table (hardware::KernelEntry),
  // and whether the update does; the rest is the roofline.
  int measured_layers = 0;
  int layers_with_work = 0;  // every layer but the data inputs
  bool measured_update = false;
  // Of step(), the time that comes from measured entries (the layers' and the update's).
  Seconds measured;
  Seconds step() const { return forward + backward + update; }
};

struct ComputeOptions {
  TrainingPrecision precision = TrainingPrecision::kFp32;
  Optimizer optimizer = Optimizer::kMomentum;
  // A measured single-GPU throughput (samples/s) at this batch: every time is scaled so that
  // batch / step() equals it.
  std::optional<double> anchor_throughput;
};

// A layer's measured (forward, backward) times at `batch` from `gpu`'s table at its threads and
// in `precision`: the entry of that batch, else the straight line through the two nearest
// measured batches (a layer's time is affine in the batch), else one batch's times scaled by
// batch / its batch; nothing where the table has no entry for the signature.
std::optional<std::pair<Seconds, Seconds>> measured_layer(
    const hardware::GpuSpec& gpu, const std::string& signature, std::int64_t batch,
    TrainingPrecision precision = TrainingPrecision::kFp32);

// `stats` must have been analysed at activation_precision(options.precision).
// A memory-bound kernel that reads and writes `traffic` bytes in all on `gpu` (eq. "roofline"
// with no arithmetic, the fp32 peak, launch included): copies and casts.
Seconds memory_kernel_time(const hardware::GpuSpec& gpu, Bytes traffic);

// One gradient of `elements` cast between `wide`-byte floats and float16, either way (the
// gradient compression's casts, docs/simulator.md "Gradient compression"): a memory-bound
// kernel reading one and writing the other, eq. "roofline" with the fp32 peak.
Seconds fp16_cast_time(const hardware::GpuSpec& gpu, std::int64_t elements, Bytes wide);

ComputeProfile compute_profile(const model::ModelStats& stats, const hardware::GpuSpec& gpu,
                               const ComputeOptions& options);

// Memory one GPU holds at its peak (the start of backward), by part (docs/simulator.md, "Memory").
struct MemoryUse {
  Bytes weights, gradients, optimizer_state, activations, buffers, workspace, runtime;
  Bytes total() const {
    return weights + gradients + optimizer_state + activations + buffers + workspace + runtime;
  }
};
// `buffers`: the framework's fusion or bucket buffers.
MemoryUse memory_use(const model::ModelStats& stats, const ComputeOptions& options, Bytes buffers);
// CUDA context, cuDNN and cuBLAS handles: what a framework process holds before any tensor.
inline constexpr Bytes kRuntimeReserve{512.0 * 1024 * 1024};

}  // namespace dlsim::simulator
