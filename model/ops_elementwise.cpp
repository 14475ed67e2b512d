// Element-wise, normalization, shape and loss operators. FLOP counts per element follow the
// textbook formula of each (a transcendental function counts 1): docs/model.md#element-wise.

#include <algorithm>

#include "model/op_util.hpp"

namespace dlsim::model {
namespace {

using detail::expect_float;
using detail::expect_inputs;

// The graph's data entry: a per-sample tensor of a fixed shape.
class Input final : public Op {
 public:
  explicit Input(const ConfigNode& a) {
    const ConfigNode s = a.child("shape");
    for (const auto& e : s.elements()) {
      const auto d = e.as<std::int64_t>();
      if (d <= 0) e.fail(fmt::format("dimensions must be positive, got {}", d));
      shape_.push_back(d);
    }
    if (shape_.empty()) s.fail("shape needs at least one dimension");
    const auto dtype = a.get_or<std::string>("dtype", "float");
    if (dtype == "int64")
      dtype_ = DType::kInt64;
    else if (dtype != "float")
      a.child("dtype").fail("expected float or int64, got '" + dtype + "'");
  }
  std::string kind() const override { return "input"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 0, "input");
    return {shape_, dtype_};
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec&) const override { return {}; }
  nlohmann::json attributes() const override {
    return {{"shape", shape_}, {"dtype", dtype_ == DType::kInt64 ? "int64" : "float"}};
  }

 private:
  Shape shape_;
  DType dtype_ = DType::kFloat;
};

// Per-element costs of an activation function; `saves_output` when its derivative is
// computed from the output (relu, sigmoid, tanh), else from the input.
struct ActivationRule {
  const char* name;
  const char* summary;
  double forward;
  double backward;
  bool saves_output;
};

constexpr ActivationRule kActivations[] = {
    {"relu", "max(x, 0)", 1, 1, true},
    {"relu6", "min(max(x, 0), 6)", 2, 2, false},
    {"sigmoid", "1 / (1 + exp(-x))", 4, 3, true},
    {"tanh", "tanh(x)", 1, 3, true},
    // tanh approximation used by BERT and GPT-2: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    {"gelu", "Gaussian error linear unit (tanh form)", 9, 18, false},
    {"silu", "x * sigmoid(x)", 5, 7, false},
};

class Activation final : public Op {
 public:
  explicit Activation(const ActivationRule& rule) : rule_(rule) {}
  std::string kind() const override { return rule_.name; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, rule_.name);
    expect_float(in[0], rule_.name);
    return in[0];
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec& out) const override {
    const double n = numel(out.shape);
    OpCost c;
    c.forward_flops = rule_.forward * n;
    c.backward_input_flops = {rule_.backward * n};
    if (rule_.saves_output)
      c.saves_output = true;
    else
      c.saved_inputs = {0};
    return c;
  }

 private:
  ActivationRule rule_;
};

// Batch normalization over the channels of [C, ...] (training mode: batch statistics) and
// layer normalization over the last dimension share one cost rule per element.
class Normalization final : public Op {
 public:
  Normalization(const ConfigNode& a, bool layer)
      : layer_(layer),
        eps_(a.get_or("eps", 1e-5)),
        affine_(layer ? true : a.get_or("affine", true)) {
    if (eps_ <= 0) a.child("eps").fail("must be positive");
  }
  std::string kind() const override { return layer_ ? "layernorm" : "batchnorm"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, kind());
    expect_float(in[0], kind());
    if (in[0].shape.empty()) throw ShapeError(kind() + " needs a tensor with a channel dimension");
    return in[0];
  }
  std::vector<ParamTensor> params(std::span<const TensorSpec> in) const override {
    if (!affine_) return {};
    const auto c = layer_ ? in[0].shape.back() : in[0].shape.front();
    return {{"weight", {c}}, {"bias", {c}}};
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec& out) const override {
    const double n = numel(out.shape);
    OpCost c;
    c.forward_flops = 7 * n;           // sum, sum of squares (2), subtract, scale, gamma, beta
    c.backward_input_flops = {6 * n};  // recompute x_hat (2), combine with the two sums (4)
    c.backward_weight_flops = affine_ ? 3 * n : 0;  // sum(dy * x_hat) (2), sum(dy) (1)
    c.saved_inputs = {0};
    return c;
  }
  nlohmann::json attributes() const override {
    nlohmann::json j = {{"eps", eps_}};
    if (!layer_) j["affine"] = affine_;
    return j;
  }

 private:
  bool layer_;
  double eps_;
  bool affine_;
};

class Dropout final : public Op {
 public:
  explicit Dropout(const ConfigNode& a) : p_(a.get_or("p", 0.5)) {
    if (p_ < 0 || p_ >= 1) a.child("p").fail("must be in [0, 1)");
  }
  std::string kind() const override { return "dropout"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, "dropout");
    return in[0];
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec& out) const override {
    const double n = numel(out.shape);
    OpCost c;
    c.forward_flops = 2 * n;  // draw-and-compare, scale
    c.backward_input_flops = {n};
    c.saved_extra_bytes = n;  // one-byte keep mask per element
    return c;
  }
  nlohmann::json attributes() const override { return {{"p", p_}}; }

 private:
  double p_;
};

class Flatten final : public Op {
 public:
  explicit Flatten(const ConfigNode&) {}
  std::string kind() const override { return "flatten"; }
  bool is_view() const override { return true; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, "flatten");
    return {{static_cast<std::int64_t>(numel(in[0].shape))}, in[0].dtype};
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec&) const override {
    OpCost c;
    c.backward_input_flops = {0.0};
    return c;
  }
};

class Concat final : public Op {
 public:
  explicit Concat(const ConfigNode& a) : axis_(a.get_or<std::int64_t>("axis", 0)) {}
  std::string kind() const override { return "concat"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    if (in.size() < 2) throw ShapeError("concat needs at least two inputs");
    const Shape& first = in[0].shape;
    const auto rank = static_cast<std::int64_t>(first.size());
    const auto axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 0 || axis >= rank) {
      throw ShapeError(fmt::format("concat: axis {} is outside rank {}", axis_, rank));
    }
    Shape out = first;
    out[axis] = 0;
    for (const auto& t : in) {
      bool same = t.shape.size() == first.size() && t.dtype == in[0].dtype;
      for (std::int64_t d = 0; same && d < rank; ++d) same = d == axis || t.shape[d] == first[d];
      if (!same) {
        throw ShapeError(fmt::format("concat along axis {}: inputs differ elsewhere: {} vs {}",
                                     axis_, to_string(first), to_string(t.shape)));
      }
      out[axis] += t.shape[axis];
    }
    return {out, in[0].dtype};
  }
  OpCost cost(std::span<const TensorSpec> in, const TensorSpec&) const override {
    OpCost c;
    c.backward_input_flops.assign(in.size(), 0.0);  // gradients are slices of the output's
    return c;
  }
  nlohmann::json attributes() const override { return {{"axis", axis_}}; }

 private:
  std::int64_t axis_;
};

class Add final : public Op {
 public:
  explicit Add(const ConfigNode&) {}
  std::string kind() const override { return "add"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    if (in.size() < 2) throw ShapeError("add needs at least two inputs");
    for (const auto& t : in) {
      if (t.shape != in[0].shape) {
        throw ShapeError(fmt::format("add: input shapes differ: {} vs {}", to_string(in[0].shape),
                                     to_string(t.shape)));
      }
    }
    return in[0];
  }
  OpCost cost(std::span<const TensorSpec> in, const TensorSpec& out) const override {
    OpCost c;
    c.forward_flops = static_cast<double>(in.size() - 1) * numel(out.shape);
    c.backward_input_flops.assign(in.size(), 0.0);  // the gradient passes through unchanged
    return c;
  }
};

class Softmax final : public Op {
 public:
  explicit Softmax(const ConfigNode& a) : axis_(a.get_or<std::int64_t>("axis", -1)) {}
  std::string kind() const override { return "softmax"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, "softmax");
    expect_float(in[0], "softmax");
    const auto rank = static_cast<std::int64_t>(in[0].shape.size());
    if (axis_ < -rank || axis_ >= rank) {
      throw ShapeError(fmt::format("softmax: axis {} is outside rank {}", axis_, rank));
    }
    return in[0];
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec& out) const override {
    const double n = numel(out.shape);
    OpCost c;
    c.forward_flops = 5 * n;           // max, subtract, exp, sum, divide
    c.backward_input_flops = {4 * n};  // y * (dy - sum(dy * y))
    c.saves_output = true;
    return c;
  }
  nlohmann::json attributes() const override { return {{"axis", axis_}}; }

 private:
  std::int64_t axis_;
};

// Softmax over the last dimension followed by the negative log-likelihood of the label.
class SoftmaxCrossEntropy final : public Op {
 public:
  explicit SoftmaxCrossEntropy(const ConfigNode&) {}
  std::string kind() const override { return "softmax_cross_entropy"; }
  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, "softmax_cross_entropy");
    expect_float(in[0], "softmax_cross_entropy");
    return {{1}, DType::kFloat};
  }
  OpCost cost(std::span<const TensorSpec> in, const TensorSpec&) const override {
    const double n = numel(in[0].shape);
    OpCost c;
    c.forward_flops = 5 * n;           // log-softmax: max, subtract, exp, sum, log-subtract
    c.backward_input_flops = {3 * n};  // softmax from the saved logits minus the one-hot label
    c.saved_inputs = {0};
    return c;
  }
};

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add("input", "the model's input tensor (per sample)",
        [](const ConfigNode& a) { return std::make_unique<Input>(a); });
  for (const auto& rule : kActivations) {
    r.add(rule.name, rule.summary,
          [&rule](const ConfigNode&) { return std::make_unique<Activation>(rule); });
  }
  r.add("batchnorm", "batch normalization over channels (training statistics)",
        [](const ConfigNode& a) { return std::make_unique<Normalization>(a, false); });
  r.add("layernorm", "layer normalization over the last dimension",
        [](const ConfigNode& a) { return std::make_unique<Normalization>(a, true); });
  r.add("dropout", "dropout with keep mask",
        [](const ConfigNode& a) { return std::make_unique<Dropout>(a); });
  r.add("flatten", "per-sample tensor to one dimension (a view)",
        [](const ConfigNode& a) { return std::make_unique<Flatten>(a); });
  r.add("concat", "concatenation along an axis (channels by default)",
        [](const ConfigNode& a) { return std::make_unique<Concat>(a); });
  r.add("add", "element-wise sum (residual connection)",
        [](const ConfigNode& a) { return std::make_unique<Add>(a); });
  r.add("softmax", "softmax along an axis",
        [](const ConfigNode& a) { return std::make_unique<Softmax>(a); });
  r.add("softmax_cross_entropy", "softmax + cross-entropy loss over the last dimension",
        [](const ConfigNode& a) { return std::make_unique<SoftmaxCrossEntropy>(a); });
}

}  // namespace dlsim::model
