#include "model/op.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dlsim::model {

double numel(const Shape& s) {
  double n = 1;
  for (auto d : s) n *= static_cast<double>(d);
  return n;
}

std::string to_string(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::vector<ParamTensor> Op::params(std::span<const TensorSpec>) const { return {}; }

const OpRegistry& op_registry() {
  static const OpRegistry registry = [] {
    OpRegistry r("operator");
    register_conv_ops(r);
    register_dense_ops(r);
    register_elementwise_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace dlsim::model
