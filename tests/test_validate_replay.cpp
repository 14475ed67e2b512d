// The replay's CPU training step (libtorch, calibrate/torch_step.hpp): its gradients are the true
// ones (finite differences), and it produces the gradients dlsim's analysis lists, in its order;
// and the calibration's im2col kernels are adjoints (closed-form identity).

#include <doctest/doctest.h>

#include "approx.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <vector>

#include "calibrate/bench_cpu.hpp"
#include "calibrate/torch_step.hpp"
#include "common/error.hpp"
#include "model/analysis.hpp"
#include "model/loader.hpp"
#include "model/op.hpp"
#include "validate/replay.hpp"
#include "validate/replay_step.hpp"

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + 1);
  return v;
}

// Used by the libtorch tests only (DLSIM_HAVE_TORCH).
[[maybe_unused]] std::filesystem::path write_model(const std::string& name,
                                                   const std::string& layers) {
  const auto path = std::filesystem::temp_directory_path() / (name + ".yaml");
  std::ofstream(path) << "name: " << name << "\ndescription: test\nsource: test\nlayers:\n"
                      << layers;
  return path;
}

}  // namespace

TEST_CASE("col2im_is_the_adjoint_of_im2col") {
  // <im2col(x), c> = <x, col2im(c)> for any x and c: the input gradient of a convolution is
  // col2im of the column gradient. Padding, stride and dilation all differ from 1.
  dlsim::calibrate::ConvShape s;
  s.batch = 2;
  s.in_c = 3;
  s.in_h = 7;
  s.in_w = 6;
  s.kernel_h = 3;
  s.kernel_w = 2;
  s.stride_h = 2;
  s.stride_w = 1;
  s.pad_h = 1;
  s.pad_w = 1;
  s.dilation_h = 1;
  s.dilation_w = 2;
  s.out_c = 4;
  s.out_h = (s.in_h + 2 * s.pad_h - s.dilation_h * (s.kernel_h - 1) - 1) / s.stride_h + 1;
  s.out_w = (s.in_w + 2 * s.pad_w - s.dilation_w * (s.kernel_w - 1) - 1) / s.stride_w + 1;
  const auto rows = static_cast<std::size_t>(s.in_c * s.kernel_h * s.kernel_w);
  const auto cols_n = static_cast<std::size_t>(s.batch * s.out_h * s.out_w);
  const auto x = ramp(static_cast<std::size_t>(s.batch * s.in_c * s.in_h * s.in_w), 1.0f);
  const auto c = ramp(rows * cols_n, 0.5f);
  std::vector<float> cols(rows * cols_n), back(x.size(), 0.0f);
  dlsim::calibrate::im2col(s, x.data(), cols.data());
  dlsim::calibrate::col2im_add(s, c.data(), back.data());
  const double lhs = std::inner_product(cols.begin(), cols.end(), c.begin(), 0.0);
  const double rhs = std::inner_product(x.begin(), x.end(), back.begin(), 0.0);
  CHECK(lhs == dlsim_test::approx(rhs).epsilon(1e-5));
}

#ifdef DLSIM_HAVE_TORCH
TEST_CASE("replay_step_gives_the_analysis_gradients_in_backward_order") {
  const auto graph = dlsim::model::load_model("resnet18");
  const auto made = dlsim::validate::make_training_step("cpu", graph, 1, 3);
  auto& step = *made;
  const auto stats = dlsim::model::analyze(graph, 1, dlsim::Precision::kFp32);
  REQUIRE(step.gradients().size() == stats.gradients.size());
  for (std::size_t g = 0; g < stats.gradients.size(); ++g) {
    CHECK(step.gradients()[g].elements == stats.gradients[g].elements);
    CHECK(step.gradients()[g].layer == stats.gradients[g].layer);
  }
  step.forward();
  std::vector<int> order;
  step.backward([&order](int g) { order.push_back(g); });
  // Every gradient once, in the order the analysis lists (the order policies group them in).
  REQUIRE(order.size() == stats.gradients.size());
  for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == static_cast<int>(i));
  CHECK(std::isfinite(step.loss()));
}

TEST_CASE("replay_backward_matches_finite_differences") {
  // A small network of every kernel kind a CNN uses: convolution with bias, batchnorm, relu,
  // max and average pooling, concat, add, linear, and softmax cross-entropy. Batch 1 (the
  // convolution's channel-major output then is NCHW). Central differences in double of a float
  // loss: agreement to a few per cent.
  const auto path = write_model("replay_fd", R"(  - {name: data, op: input, shape: [2, 6, 6]}
  - {name: conv1, op: conv2d, out_channels: 3, kernel: 3, padding: 1, bias: true}
  - {name: bn1, op: batchnorm}
  - {name: relu1, op: relu}
  - {name: conv2, op: conv2d, out_channels: 3, kernel: 1, inputs: [relu1]}
  - {name: conv3, op: conv2d, out_channels: 2, kernel: 3, padding: 1, inputs: [relu1]}
  - {name: cat, op: concat, inputs: [conv2, conv3]}
  - {name: conv4, op: conv2d, out_channels: 5, kernel: 1, inputs: [relu1]}
  - {name: sum, op: add, inputs: [cat, conv4]}
  - {name: pool, op: maxpool, kernel: 2, stride: 2}
  - {name: avg, op: avgpool, kernel: 3, stride: 1, padding: 1}
  - {name: flatten, op: flatten}
  - {name: fc, op: linear, out_features: 4}
  - {name: tanh, op: tanh}
  - {name: fc2, op: linear, out_features: 3}
  - {name: loss, op: softmax_cross_entropy}
)");
  const auto graph = dlsim::model::load_model(path.string());
  const auto made = dlsim::validate::make_training_step("cpu", graph, 1, 11);
  auto& step = *made;
  step.forward();
  step.backward([](int) {});
  int checked = 0;
  for (const auto& g : step.gradients()) {
    for (std::int64_t i = 0; i < g.elements; i += std::max<std::int64_t>(1, g.elements / 3)) {
      const float keep = g.value[i];
      const float h = 1e-2f;
      g.value[i] = keep + h;
      step.forward();
      const double up = step.loss();
      g.value[i] = keep - h;
      step.forward();
      const double down = step.loss();
      g.value[i] = keep;
      const double numeric = (up - down) / (2.0 * h);
      INFO(g.layer << "." << g.tensor << "[" << i << "]");
      CHECK(g.data[i] == doctest::Approx(numeric).epsilon(0.05).scale(1e-2));
      ++checked;
    }
  }
  CHECK(checked > 20);
  std::filesystem::remove(path);
}

TEST_CASE("replay_has_a_cpu_kernel_for_every_op_kind") {
  const auto& ops = dlsim::calibrate::torch_ops();
  const std::set<std::string> have(ops.begin(), ops.end());
  for (const auto& name : dlsim::model::op_registry().names()) {
    INFO(name);
    CHECK(have.count(name) == 1);
  }
}
#else
TEST_CASE("replay_on_the_cpu_without_libtorch_is_an_error_naming_the_device") {
  const auto graph = dlsim::model::load_model("resnet18");
  CHECK_THROWS_AS(dlsim::validate::make_training_step("cpu", graph, 1, 3), dlsim::InputError);
}
#endif

TEST_CASE("replay_forward_imbalance_is_the_slowest_ranks_median_forward_over_the_fastests") {
  using dlsim::validate::RankTimes;
  RankTimes a, b, c;
  a.host = "n1";
  a.forward = {1.0, 1.2, 1.1};  // median 1.1 s
  b.host = "n2";
  b.forward = {1.7, 1.6, 9.0};  // median 1.7 s
  c.host = "n3";
  c.forward = {1.3, 1.3};
  const auto [imbalance, host] = dlsim::validate::forward_imbalance({a, b, c});
  CHECK(imbalance == dlsim_test::approx(1.7 / 1.1 - 1).epsilon(1e-12));
  CHECK(host == "n2");
  // One rank has nothing to compare with.
  CHECK(dlsim::validate::forward_imbalance({a}).first == 0.0);
}
