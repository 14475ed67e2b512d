#pragma once
// A model's training step through libtorch, PyTorch's C++ library (ATen; oneDNN and the BLAS on
// the CPU): the kernels a PyTorch program runs for the same layers. Every layer of dlsim's layer
// graph becomes the ATen call torch.nn's module of that kind makes (conv2d, linear,
// batch_norm, max_pool2d, ...), at the graph's shapes, float32 parameters, on the CPU or on a
// CUDA device (cuDNN and cuBLAS there), optionally under torch.autocast(float16) as
// torch.cuda.amp runs a forward pass. Each layer's inputs enter as
// leaves of their own, so the backward pass runs layer by layer (torch::autograd::grad of the
// layer's output): the same backward kernels as one autograd pass, timed per layer, each
// gradient ready as soon as its layer is done. Built with DLSIM_WITH_TORCH (libtorch-dev).

#include <cstdint>
#include <memory>
#include <optional>
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

struct TorchStepOptions {
  int threads = 1;    // intra-op threads (torch::set_num_threads, process-wide)
  bool cuda = false;  // the kernels on CUDA device 0 instead of the CPU
  // fp32: full float32 (TF32 off in cuBLAS and cuDNN). tf32: float32 tensors with TF32 tensor
  // cores in cuBLAS and cuDNN (torch.backends.{cuda.matmul,cudnn}.allow_tf32 = True). amp: the
  // forward pass under autocast to float16 with a gradient scaler, as torch.autocast("cuda",
  // float16) with torch.amp.GradScaler. bf16: the forward pass under autocast to bfloat16,
  // without a scaler (bfloat16 has float32's exponent range). All but fp32 need CUDA.
  enum class Precision { kFp32, kTf32, kAmp, kBf16 };
  Precision precision = Precision::kFp32;
  bool autocast() const { return precision == Precision::kAmp || precision == Precision::kBf16; }
  bool scaler() const { return precision == Precision::kAmp; }
};

// "fp32", "tf32", "amp" or "bf16" as a precision, nullopt otherwise.
std::optional<TorchStepOptions::Precision> parse_torch_precision(const std::string& s);
std::string to_string(TorchStepOptions::Precision p);

// Whether this build's libtorch sees a CUDA device.
bool torch_has_cuda();

// That a step with `options` can run in this build, before anything is made: a thread count of
// at least 1, amp only on CUDA, libtorch, and a CUDA device where options.cuda asks for one.
// Otherwise an InputError naming the flag (--threads, --precision, --device).
void check_torch_step(const TorchStepOptions& options);

// A step of `graph` at `batch` samples, parameters and data from a generator seeded with
// `seed`. An op it cannot run is an InputError naming the layer; without libtorch (or without
// CUDA where options.cuda asks for it), an InputError naming what is missing.
std::unique_ptr<TrainingStep> make_torch_step(const model::LayerGraph& graph, std::int64_t batch,
                                              std::uint64_t seed, const TorchStepOptions& options);

}  // namespace dlsim::calibrate
