// Closed-form checks of shape, parameter, FLOP and memory rules on small hand-written models.

#include <doctest/doctest.h>

#include "approx.hpp"

#include "model/analysis.hpp"
#include "model/loader.hpp"

using namespace dlsim;
using namespace dlsim::model;

namespace {

LayerGraph build(const std::string& yaml) {
  return load_yaml_model(ConfigNode::load_string(yaml, "test.yaml"));
}

const LayerStats& stats_of(const ModelStats& s, const std::string& name) {
  for (const auto& l : s.layers) {
    if (l.name == name) return l;
  }
  FAIL("no layer " << name);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("every_documented_operator_is_registered") {
  const auto names = op_registry().names();
  for (const char* op : {"input",
                         "conv2d",
                         "batchnorm",
                         "relu",
                         "relu6",
                         "sigmoid",
                         "tanh",
                         "gelu",
                         "silu",
                         "maxpool",
                         "avgpool",
                         "adaptive_avgpool",
                         "global_avgpool",
                         "lrn",
                         "linear",
                         "dropout",
                         "flatten",
                         "concat",
                         "add",
                         "softmax",
                         "softmax_cross_entropy",
                         "embedding",
                         "layernorm",
                         "matmul",
                         "attention_scores",
                         "attention_context"}) {
    CHECK_MESSAGE(std::find(names.begin(), names.end(), op) != names.end(), op);
  }
}

TEST_CASE("conv_counts_match_closed_form_and_first_layer_has_no_input_gradient") {
  const auto g = build(R"(
name: t
layers:
  - {name: data, op: input, shape: [3, 32, 32]}
  - {name: c1, op: conv2d, out_channels: 16, kernel: 3, padding: 1}
  - {name: c2, op: conv2d, out_channels: 8, kernel: [1, 3], stride: [1, 2], padding: [0, 1], bias: false}
)");
  const auto s = analyze(g, 2, Precision::kFp32);
  const auto& c1 = stats_of(s, "c1");
  const double macs1 = 16.0 * 32 * 32 * 3 * 3 * 3;
  CHECK(c1.output_shape == Shape{2, 16, 32, 32});
  CHECK(c1.params == 16 * 3 * 9 + 16);
  CHECK(c1.forward_macs == 2 * macs1);
  CHECK(c1.forward_flops.value() == 2 * (2 * macs1 + 16.0 * 32 * 32));
  CHECK(c1.backward_input_flops.value() == 0);  // the data needs no gradient
  CHECK(c1.backward_weight_flops.value() == 2 * (2 * macs1 + 16.0 * 32 * 32));

  const auto& c2 = stats_of(s, "c2");
  CHECK(c2.output_shape == Shape{2, 8, 32, 16});
  const double macs2 = 8.0 * 32 * 16 * 16 * 1 * 3;
  CHECK(c2.params == 8 * 16 * 3);
  CHECK(c2.backward_input_flops.value() == 2 * 2 * macs2);
  CHECK(c2.backward_weight_flops.value() == 2 * 2 * macs2);
}

TEST_CASE("grouped_and_dilated_convolution_shapes") {
  const auto g = build(R"(
name: t
layers:
  - {op: input, shape: [32, 20, 20]}
  - {name: dw, op: conv2d, out_channels: 32, kernel: 3, padding: 2, dilation: 2, groups: 32}
)");
  const auto s = analyze(g, 1, Precision::kFp32);
  CHECK(stats_of(s, "dw").output_shape == Shape{1, 32, 20, 20});
  CHECK(stats_of(s, "dw").params == 32 * 9 + 32);
  CHECK(stats_of(s, "dw").forward_macs == 32.0 * 400 * 9);
}

TEST_CASE("pooling_ceil_mode_adds_a_window_only_when_it_starts_inside_the_input") {
  const auto g = build(R"(
name: t
layers:
  - {name: data, op: input, shape: [64, 112, 112]}
  - {name: floor, op: maxpool, kernel: 3, stride: 2}
  - {name: ceil, op: maxpool, input: data, kernel: 3, stride: 2, ceil_mode: true}
  - {name: odd, op: maxpool, input: data, kernel: 2, stride: 2, ceil_mode: true}
  - {name: padded, op: avgpool, input: data, kernel: 3, stride: 2, padding: 1, ceil_mode: true}
  - {name: gap, op: global_avgpool, input: data}
  - {name: ada, op: adaptive_avgpool, input: data, output: [7, 7]}
)");
  const auto s = analyze(g, 1, Precision::kFp32);
  CHECK(stats_of(s, "floor").output_shape == Shape{1, 64, 55, 55});
  CHECK(stats_of(s, "ceil").output_shape == Shape{1, 64, 56, 56});
  CHECK(stats_of(s, "odd").output_shape == Shape{1, 64, 56, 56});
  CHECK(stats_of(s, "padded").output_shape == Shape{1, 64, 57, 57});  // as PyTorch
  CHECK(stats_of(s, "gap").output_shape == Shape{1, 64, 1, 1});
  CHECK(stats_of(s, "ada").output_shape == Shape{1, 64, 7, 7});
  // 9 operations per output window; argmax indices kept as int64.
  CHECK(stats_of(s, "ceil").forward_flops.value() == 64.0 * 56 * 56 * 9);
}

TEST_CASE("activation_memory_counts_each_kept_tensor_once") {
  // data -> conv (keeps data) -> relu (keeps its output) -> conv (keeps the same relu output)
  //      -> dropout (1-byte mask) -> maxpool (keeps input = dropout output, int64 indices)
  const auto g = build(R"(
name: t
layers:
  - {name: data, op: input, shape: [1, 4, 4]}
  - {name: c1, op: conv2d, out_channels: 2, kernel: 1}
  - {name: r, op: relu}
  - {name: c2, op: conv2d, out_channels: 2, kernel: 1}
  - {name: d, op: dropout, p: 0.1}
  - {name: mp, op: maxpool, kernel: 2}
)");
  const auto s = analyze(g, 3, Precision::kFp32);
  CHECK(stats_of(s, "data").activation_bytes.value() == 3 * 16 * 4);
  CHECK(stats_of(s, "c1").activation_bytes.value() == 0);
  CHECK(stats_of(s, "r").activation_bytes.value() == 3 * 32 * 4);
  CHECK(stats_of(s, "c2").activation_bytes.value() == 0);
  CHECK(stats_of(s, "d").activation_bytes.value() == 3 * (32 * 4 + 32 * 1));
  CHECK(stats_of(s, "mp").activation_bytes.value() == 3 * (2 * 2 * 2 * 8));
  CHECK(s.activation_bytes.value() == 3 * (64 + 128 + 160 + 64));

  const auto half = analyze(g, 3, Precision::kFp16);
  CHECK(stats_of(half, "r").activation_bytes.value() == 3 * 32 * 2);
}

TEST_CASE("work_scales_linearly_with_batch_and_weights_do_not") {
  const auto g = load_model("resnet18");
  const auto one = analyze(g, 1, Precision::kFp32);
  const auto many = analyze(g, 32, Precision::kFp32);
  CHECK(many.forward_flops.value() == dlsim_test::approx(32 * one.forward_flops.value()));
  CHECK(many.backward_flops().value() == dlsim_test::approx(32 * one.backward_flops().value()));
  CHECK(many.activation_bytes.value() == dlsim_test::approx(32 * one.activation_bytes.value()));
  CHECK(many.weight_bytes.value() == one.weight_bytes.value());
  CHECK(one.weight_bytes.value() == 4.0 * 11689512);
}

TEST_CASE("tied_weights_are_counted_once_and_their_gradient_goes_to_the_owner") {
  const auto g = build(R"(
name: t
layers:
  - {name: tokens, op: input, shape: [6], dtype: int64}
  - {name: emb, op: embedding, vocab: 10, dim: 4, positions: 8}
  - {name: head, op: linear, out_features: 10, tied_to: emb}
  - {name: loss, op: softmax_cross_entropy}
)");
  const auto s = analyze(g, 1, Precision::kFp32);
  CHECK(s.params == 10 * 4 + 8 * 4 + 10);
  REQUIRE(s.gradients.size() == 3);
  CHECK(s.gradients[0].layer == "head");
  CHECK(s.gradients[0].tensor == "bias");
  CHECK(s.gradients[1].tensor == "position");
  CHECK(s.gradients[2].tensor == "word");
  CHECK(s.gradients[2].bytes.value() == 40 * 4);
  // The tied head still computes its weight gradient.
  CHECK(stats_of(s, "head").backward_weight_flops.value() == 2.0 * 6 * 4 * 10 + 6 * 10);
  CHECK(stats_of(s, "emb").backward_input_flops.value() == 0);
}

TEST_CASE("attention_products_follow_the_closed_form") {
  const auto g = build(R"(
name: t
layers:
  - {name: x, op: input, shape: [8, 16]}
  - {name: q, op: linear, input: x, out_features: 16}
  - {name: k, op: linear, input: x, out_features: 16}
  - {name: v, op: linear, input: x, out_features: 16}
  - {name: scores, op: attention_scores, inputs: [q, k], heads: 2}
  - {name: probs, op: softmax}
  - {name: ctx, op: attention_context, inputs: [probs, v], heads: 2}
  - {name: norm, op: layernorm, eps: 1.0e-12}
)");
  const auto s = analyze(g, 1, Precision::kFp32);
  CHECK(stats_of(s, "scores").output_shape == Shape{1, 2, 8, 8});
  CHECK(stats_of(s, "scores").forward_macs == 8.0 * 8 * 16);
  CHECK(stats_of(s, "ctx").output_shape == Shape{1, 8, 16});
  CHECK(stats_of(s, "ctx").forward_macs == 8.0 * 8 * 16);
  CHECK(stats_of(s, "ctx").backward_input_flops.value() == 2 * 2.0 * 8 * 8 * 16);
  CHECK(stats_of(s, "norm").params == 32);
  CHECK(stats_of(s, "probs").activation_bytes.value() == 2 * 8 * 8 * 4);
}

TEST_CASE("gradients_come_in_reverse_layer_order") {
  const auto g = load_model("resnet50");
  const auto s = analyze(g, 1, Precision::kFp32);
  CHECK(s.gradients.size() == 161);  // torchvision resnet50 has 161 parameter tensors
  CHECK(s.gradients.front().layer == "fc");
  CHECK(s.gradients.front().tensor == "bias");
  CHECK(s.gradients.back().layer == "conv1");
  double total = 0;
  for (const auto& t : s.gradients) total += t.bytes.value();
  CHECK(total == 4.0 * 25557032);
}
