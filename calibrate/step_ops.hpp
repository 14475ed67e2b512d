#pragma once
// The op kinds a training step runs (calibrate/training_step.hpp): the libtorch step, the
// replay's CPU kernels and its cuDNN/cuBLAS step all take every op kind dlsim's models use.

#include <map>
#include <string>
#include <vector>

namespace dlsim::calibrate {

enum class OpKind {
  kInput,
  kConv,
  kLinear,
  kMatmul,
  kEmbedding,
  kScores,
  kContext,
  kActivation,
  kDropout,
  kAdd,
  kConcat,
  kSoftmax,
  kLoss,
  kBatchNorm,
  kLayerNorm,
  kMaxPool,
  kAvgPool,
  kAdaptivePool,
  kLrn,
  kView,
};

// Op name (model/op.hpp's kind()) -> kind.
const std::map<std::string, OpKind>& step_op_kinds();
// The names, sorted.
const std::vector<std::string>& step_ops();

}  // namespace dlsim::calibrate
