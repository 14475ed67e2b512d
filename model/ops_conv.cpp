// Spatial operators on [C, H, W] tensors: convolution, pooling, local response normalization.
// FLOP conventions: docs/model.md#convolution-and-pooling.

#include "model/op_util.hpp"

namespace dlsim::model {
namespace {

using detail::expect_image;
using detail::pair_attr;
using detail::window_out;

class Conv2d final : public Op {
 public:
  explicit Conv2d(const ConfigNode& a)
      : out_(detail::positive_attr(a, "out_channels")),
        kernel_(pair_attr(a, "kernel", std::nullopt, 1)),
        stride_(pair_attr(a, "stride", 1, 1)),
        pad_(pair_attr(a, "padding", 0, 0)),
        dilation_(pair_attr(a, "dilation", 1, 1)),
        groups_(a.get_or<std::int64_t>("groups", 1)),
        bias_(a.get_or("bias", true)) {
    if (groups_ < 1) a.child("groups").fail("must be a positive integer");
    if (out_ % groups_ != 0) {
      a.child("groups").fail(
          fmt::format("out_channels {} is not divisible by groups {}", out_, groups_));
    }
  }
  std::string kind() const override { return "conv2d"; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    const auto& x = expect_image(in, "conv2d");
    if (x.shape[0] % groups_ != 0) {
      throw ShapeError(fmt::format("conv2d: {} input channels are not divisible by groups {}",
                                   x.shape[0], groups_));
    }
    const auto h = window_out(x.shape[1], kernel_[0], stride_[0], pad_[0], dilation_[0], false);
    const auto w = window_out(x.shape[2], kernel_[1], stride_[1], pad_[1], dilation_[1], false);
    if (h < 1 || w < 1) {
      throw ShapeError(fmt::format("conv2d: kernel {}x{} does not fit input {}", kernel_[0],
                                   kernel_[1], to_string(x.shape)));
    }
    return {{out_, h, w}, DType::kFloat};
  }

  std::vector<ParamTensor> params(std::span<const TensorSpec> in) const override {
    std::vector<ParamTensor> p{
        {"weight", {out_, in[0].shape[0] / groups_, kernel_[0], kernel_[1]}}};
    if (bias_) p.push_back({"bias", {out_}});
    return p;
  }

  OpCost cost(std::span<const TensorSpec> in, const TensorSpec& out) const override {
    const double outputs = numel(out.shape);
    const double macs =
        outputs * static_cast<double>(in[0].shape[0] / groups_ * kernel_[0] * kernel_[1]);
    const double bias = bias_ ? outputs : 0.0;
    OpCost c;
    c.forward_macs = macs;
    c.forward_flops = 2 * macs + bias;
    c.backward_input_flops = {2 * macs};        // transposed convolution of the output gradient
    c.backward_weight_flops = 2 * macs + bias;  // input x output-gradient correlation
    c.saved_inputs = {0};
    return c;
  }

  nlohmann::json attributes() const override {
    return {{"out_channels", out_},  {"kernel", kernel_}, {"stride", stride_}, {"padding", pad_},
            {"dilation", dilation_}, {"groups", groups_}, {"bias", bias_}};
  }

 private:
  std::int64_t out_;
  std::array<std::int64_t, 2> kernel_, stride_, pad_, dilation_;
  std::int64_t groups_;
  bool bias_;
};

class Pool final : public Op {
 public:
  Pool(const ConfigNode& a, bool is_max)
      : is_max_(is_max),
        kernel_(pair_attr(a, "kernel", std::nullopt, 1)),
        stride_(a.has("stride") ? pair_attr(a, "stride", 1, 1) : kernel_),
        pad_(pair_attr(a, "padding", 0, 0)),
        dilation_(is_max ? pair_attr(a, "dilation", 1, 1) : std::array<std::int64_t, 2>{1, 1}),
        ceil_mode_(a.get_or("ceil_mode", false)),
        count_include_pad_(is_max ? true : a.get_or("count_include_pad", true)) {
    if (!a.has("stride")) a.mark_used("stride");
    for (int i = 0; i < 2; ++i) {
      if (2 * pad_[i] > kernel_[i]) {
        a.child("padding").fail(
            fmt::format("padding {} is more than half the kernel {}", pad_[i], kernel_[i]));
      }
    }
  }
  std::string kind() const override { return is_max_ ? "maxpool" : "avgpool"; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    const auto& x = expect_image(in, kind());
    const auto h =
        window_out(x.shape[1], kernel_[0], stride_[0], pad_[0], dilation_[0], ceil_mode_);
    const auto w =
        window_out(x.shape[2], kernel_[1], stride_[1], pad_[1], dilation_[1], ceil_mode_);
    if (h < 1 || w < 1) {
      throw ShapeError(fmt::format("{}: window {}x{} does not fit input {}", kind(), kernel_[0],
                                   kernel_[1], to_string(x.shape)));
    }
    return {{x.shape[0], h, w}, DType::kFloat};
  }

  OpCost cost(std::span<const TensorSpec>, const TensorSpec& out) const override {
    const double outputs = numel(out.shape);
    const double window = static_cast<double>(kernel_[0] * kernel_[1]);
    OpCost c;
    c.forward_flops = outputs * window;  // max: window-1 compares + 1 select; avg: adds + 1 divide
    if (is_max_) {
      c.backward_input_flops = {outputs};  // scatter each gradient to its argmax
      c.saved_inputs = {0};
      c.saved_extra_bytes = outputs * 8;  // int64 argmax indices, as PyTorch keeps them
    } else {
      c.backward_input_flops = {outputs * window};  // spread each gradient over its window
    }
    return c;
  }

  nlohmann::json attributes() const override {
    nlohmann::json j = {
        {"kernel", kernel_}, {"stride", stride_}, {"padding", pad_}, {"ceil_mode", ceil_mode_}};
    if (is_max_)
      j["dilation"] = dilation_;
    else
      j["count_include_pad"] = count_include_pad_;
    return j;
  }

 private:
  bool is_max_;
  std::array<std::int64_t, 2> kernel_, stride_, pad_, dilation_;
  bool ceil_mode_, count_include_pad_;
};

// Adaptive average pooling to a fixed output size (global pooling is output 1x1).
class AdaptiveAvgPool final : public Op {
 public:
  AdaptiveAvgPool(const ConfigNode& a, bool global)
      : global_(global),
        out_(global ? std::array<std::int64_t, 2>{1, 1} : pair_attr(a, "output", std::nullopt, 1)) {
  }
  std::string kind() const override { return global_ ? "global_avgpool" : "adaptive_avgpool"; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    const auto& x = expect_image(in, kind());
    return {{x.shape[0], out_[0], out_[1]}, DType::kFloat};
  }

  OpCost cost(std::span<const TensorSpec> in, const TensorSpec& out) const override {
    // Each output averages a window of about (H/oh) x (W/ow) inputs; windows overlap when the
    // size does not divide, so count ceil(H/oh) x ceil(W/ow) per output.
    const auto& s = in[0].shape;
    const double wh = static_cast<double>((s[1] + out_[0] - 1) / out_[0]);
    const double ww = static_cast<double>((s[2] + out_[1] - 1) / out_[1]);
    const double work = numel(out.shape) * wh * ww;
    OpCost c;
    c.forward_flops = work;
    c.backward_input_flops = {work};
    return c;
  }

  nlohmann::json attributes() const override {
    return global_ ? nlohmann::json::object() : nlohmann::json{{"output", out_}};
  }

 private:
  bool global_;
  std::array<std::int64_t, 2> out_;
};

// Local response normalization across channels (Krizhevsky et al. 2012).
class Lrn final : public Op {
 public:
  explicit Lrn(const ConfigNode& a)
      : size_(a.get_or<std::int64_t>("size", 5)),
        alpha_(a.get_or("alpha", 1e-4)),
        beta_(a.get_or("beta", 0.75)),
        k_(a.get_or("k", 1.0)) {
    if (size_ < 1) a.child("size").fail("must be a positive integer");
  }
  std::string kind() const override { return "lrn"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    return expect_image(in, "lrn");
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec& out) const override {
    const double n = numel(out.shape);
    const double s = static_cast<double>(size_);
    OpCost c;
    // square, window sum (size-1 adds), k + alpha/size * sum (2), pow, divide
    c.forward_flops = n * (s + 4);
    c.backward_input_flops = {n * (2 * s + 6)};
    c.saved_inputs = {0};
    c.saves_output = true;
    return c;
  }
  nlohmann::json attributes() const override {
    return {{"size", size_}, {"alpha", alpha_}, {"beta", beta_}, {"k", k_}};
  }

 private:
  std::int64_t size_;
  double alpha_, beta_, k_;
};

}  // namespace

void register_conv_ops(OpRegistry& r) {
  r.add("conv2d", "2-D convolution (stride, padding, dilation, groups)",
        [](const ConfigNode& a) { return std::make_unique<Conv2d>(a); });
  r.add("maxpool", "2-D max pooling (ceil_mode as PyTorch)",
        [](const ConfigNode& a) { return std::make_unique<Pool>(a, true); });
  r.add("avgpool", "2-D average pooling",
        [](const ConfigNode& a) { return std::make_unique<Pool>(a, false); });
  r.add("adaptive_avgpool", "average pooling to a fixed output size",
        [](const ConfigNode& a) { return std::make_unique<AdaptiveAvgPool>(a, false); });
  r.add("global_avgpool", "average over all spatial positions",
        [](const ConfigNode& a) { return std::make_unique<AdaptiveAvgPool>(a, true); });
  r.add("lrn", "local response normalization across channels",
        [](const ConfigNode& a) { return std::make_unique<Lrn>(a); });
}

}  // namespace dlsim::model
