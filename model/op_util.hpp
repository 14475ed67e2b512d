#pragma once
// Small helpers shared by the operator source files.

#include <fmt/format.h>
#include <array>
#include <cstdint>
#include <optional>

#include "model/op.hpp"

namespace dlsim::model::detail {

// An attribute given as one integer or as [h, w]; without a fallback it is required.
inline std::array<std::int64_t, 2> pair_attr(const ConfigNode& attrs, std::string_view key,
                                             std::optional<std::int64_t> fallback,
                                             std::int64_t min_value) {
  if (!attrs.has(key) && fallback) {
    attrs.mark_used(key);
    return {*fallback, *fallback};
  }
  const ConfigNode node = attrs.child(key);
  const auto v = node.as_int_list();
  if (v.size() != 1 && v.size() != 2) node.fail("expected one integer or a list [h, w]");
  for (auto x : v) {
    if (x < min_value) node.fail(fmt::format("must be at least {}, got {}", min_value, x));
  }
  return v.size() == 1 ? std::array{v[0], v[0]} : std::array{v[0], v[1]};
}

inline std::int64_t positive_attr(const ConfigNode& attrs, std::string_view key) {
  const ConfigNode node = attrs.child(key);
  const auto v = node.as<std::int64_t>();
  if (v <= 0) node.fail(fmt::format("must be a positive integer, got {}", v));
  return v;
}

inline void expect_inputs(std::span<const TensorSpec> in, std::size_t n, std::string_view op) {
  if (in.size() != n) {
    throw ShapeError(
        fmt::format("{} takes {} input{}, got {}", op, n, n == 1 ? "" : "s", in.size()));
  }
}

inline void expect_float(const TensorSpec& t, std::string_view op) {
  if (t.dtype != DType::kFloat) throw ShapeError(fmt::format("{} needs a float input", op));
}

inline const TensorSpec& expect_image(std::span<const TensorSpec> in, std::string_view op) {
  expect_inputs(in, 1, op);
  expect_float(in[0], op);
  if (in[0].shape.size() != 3) {
    throw ShapeError(fmt::format("{} needs a [C, H, W] input, got {}", op, to_string(in[0].shape)));
  }
  return in[0];
}

// Output length of a sliding window (PyTorch's rule, including ceil_mode).
inline std::int64_t window_out(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                               std::int64_t pad, std::int64_t dilation, bool ceil_mode) {
  const std::int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  std::int64_t out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace dlsim::model::detail
