#pragma once
// The op kinds the replay runs, shared by its CPU and GPU steps (validate/replay_cpu.cpp,
// validate/replay_gpu.cu): every op kind dlsim's models use has a kernel on both.

#include <map>
#include <string>
#include <vector>

namespace dlsim::validate {

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
const std::map<std::string, OpKind>& replay_op_kinds();
// The names, sorted.
const std::vector<std::string>& replay_cpu_ops();

}  // namespace dlsim::validate
