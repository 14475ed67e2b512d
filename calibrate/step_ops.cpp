#include "calibrate/step_ops.hpp"

namespace dlsim::calibrate {

const std::map<std::string, OpKind>& step_op_kinds() {
  static const std::map<std::string, OpKind> k = {
      {"input", OpKind::kInput},
      {"conv2d", OpKind::kConv},
      {"linear", OpKind::kLinear},
      {"matmul", OpKind::kMatmul},
      {"embedding", OpKind::kEmbedding},
      {"attention_scores", OpKind::kScores},
      {"attention_context", OpKind::kContext},
      {"relu", OpKind::kActivation},
      {"relu6", OpKind::kActivation},
      {"sigmoid", OpKind::kActivation},
      {"tanh", OpKind::kActivation},
      {"gelu", OpKind::kActivation},
      {"silu", OpKind::kActivation},
      {"dropout", OpKind::kDropout},
      {"add", OpKind::kAdd},
      {"concat", OpKind::kConcat},
      {"softmax", OpKind::kSoftmax},
      {"softmax_cross_entropy", OpKind::kLoss},
      {"batchnorm", OpKind::kBatchNorm},
      {"layernorm", OpKind::kLayerNorm},
      {"maxpool", OpKind::kMaxPool},
      {"avgpool", OpKind::kAvgPool},
      {"adaptive_avgpool", OpKind::kAdaptivePool},
      {"global_avgpool", OpKind::kAdaptivePool},
      {"lrn", OpKind::kLrn},
      {"flatten", OpKind::kView},
  };
  return k;
}

const std::vector<std::string>& step_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> o;
    for (const auto& [name, kind] : step_op_kinds()) o.push_back(name);
    return o;
  }();
  return ops;
}

}  // namespace dlsim::calibrate
