// Dense operators: fully connected, matrix product, embeddings and the two matrix products of
// scaled dot-product attention (Vaswani et al. 2017). FLOP conventions: docs/model.md#dense.

#include "model/op_util.hpp"

namespace dlsim::model {
namespace {

using detail::expect_float;
using detail::expect_inputs;

// y = x W^T + b over the last dimension of x.
class Linear final : public Op {
 public:
  explicit Linear(const ConfigNode& a)
      : out_(detail::positive_attr(a, "out_features")),
        bias_(a.get_or("bias", true)),
        tied_to_(a.get_or<std::string>("tied_to", "")) {
    tied_ = !tied_to_.empty();
  }
  std::string kind() const override { return "linear"; }
  void tie_weight() override { tied_ = true; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, "linear");
    expect_float(in[0], "linear");
    if (in[0].shape.empty()) throw ShapeError("linear needs an input with at least one dimension");
    Shape s = in[0].shape;
    s.back() = out_;
    return {s, DType::kFloat};
  }
  std::vector<ParamTensor> params(std::span<const TensorSpec> in) const override {
    std::vector<ParamTensor> p{{"weight", {out_, in[0].shape.back()}, tied_}};
    if (bias_) p.push_back({"bias", {out_}});
    return p;
  }
  OpCost cost(std::span<const TensorSpec> in, const TensorSpec& out) const override {
    const double macs = numel(out.shape) * static_cast<double>(in[0].shape.back());
    const double bias = bias_ ? numel(out.shape) : 0.0;
    OpCost c;
    c.forward_macs = macs;
    c.forward_flops = 2 * macs + bias;
    c.backward_input_flops = {2 * macs};
    c.backward_weight_flops = 2 * macs + bias;
    c.saved_inputs = {0};
    return c;
  }
  nlohmann::json attributes() const override {
    nlohmann::json j = {{"out_features", out_}, {"bias", bias_}};
    if (!tied_to_.empty()) j["tied_to"] = tied_to_;
    return j;
  }

 private:
  std::int64_t out_;
  bool bias_;
  std::string tied_to_;
  bool tied_ = false;
};

// C = A B (or A B^T) with matching leading dimensions; B may have none (broadcast).
class MatMul final : public Op {
 public:
  explicit MatMul(const ConfigNode& a) : transpose_b_(a.get_or("transpose_b", false)) {}
  std::string kind() const override { return "matmul"; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 2, "matmul");
    const Shape& a = in[0].shape;
    const Shape& b = in[1].shape;
    expect_float(in[0], "matmul");
    expect_float(in[1], "matmul");
    if (a.size() < 2 || b.size() < 2) throw ShapeError("matmul needs inputs of rank 2 or more");
    const auto k_b = transpose_b_ ? b[b.size() - 1] : b[b.size() - 2];
    const auto n = transpose_b_ ? b[b.size() - 2] : b[b.size() - 1];
    if (a.back() != k_b) {
      throw ShapeError(fmt::format("matmul: inner dimensions differ: {} x {}{}", to_string(a),
                                   to_string(b), transpose_b_ ? "^T" : ""));
    }
    if (b.size() > 2 && !std::equal(a.begin(), a.end() - 2, b.begin(), b.end() - 2)) {
      throw ShapeError(
          fmt::format("matmul: leading dimensions differ: {} and {}", to_string(a), to_string(b)));
    }
    Shape out = a;
    out.back() = n;
    return {out, DType::kFloat};
  }
  OpCost cost(std::span<const TensorSpec> in, const TensorSpec& out) const override {
    const double macs = numel(out.shape) * static_cast<double>(in[0].shape.back());
    OpCost c;
    c.forward_macs = macs;
    c.forward_flops = 2 * macs;
    c.backward_input_flops = {2 * macs, 2 * macs};
    c.saved_inputs = {0, 1};
    return c;
  }
  nlohmann::json attributes() const override { return {{"transpose_b", transpose_b_}}; }

 private:
  bool transpose_b_;
};

// Token (+ position, + token type) embedding tables, summed: [S] int64 -> [S, dim].
class Embedding final : public Op {
 public:
  explicit Embedding(const ConfigNode& a)
      : vocab_(detail::positive_attr(a, "vocab")),
        dim_(detail::positive_attr(a, "dim")),
        positions_(a.get_or<std::int64_t>("positions", 0)),
        token_types_(a.get_or<std::int64_t>("token_types", 0)) {
    if (positions_ < 0) a.child("positions").fail("must not be negative");
    if (token_types_ < 0) a.child("token_types").fail("must not be negative");
  }
  std::string kind() const override { return "embedding"; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 1, "embedding");
    if (in[0].dtype != DType::kInt64 || in[0].shape.size() != 1) {
      throw ShapeError("embedding needs int64 token ids of shape [S]");
    }
    if (positions_ > 0 && in[0].shape[0] > positions_) {
      throw ShapeError(fmt::format("embedding: sequence length {} exceeds the {} positions",
                                   in[0].shape[0], positions_));
    }
    return {{in[0].shape[0], dim_}, DType::kFloat};
  }
  std::vector<ParamTensor> params(std::span<const TensorSpec>) const override {
    std::vector<ParamTensor> p{{"word", {vocab_, dim_}}};
    if (positions_ > 0) p.push_back({"position", {positions_, dim_}});
    if (token_types_ > 0) p.push_back({"token_type", {token_types_, dim_}});
    return p;
  }
  OpCost cost(std::span<const TensorSpec>, const TensorSpec& out) const override {
    const double tables = 1.0 + (positions_ > 0) + (token_types_ > 0);
    const double n = numel(out.shape);
    OpCost c;
    c.forward_flops = (tables - 1) * n;    // gathers are free; the tables' rows are summed
    c.backward_input_flops = {0.0};        // token ids have no gradient
    c.backward_weight_flops = tables * n;  // scatter-add of the output gradient into each table
    c.saved_inputs = {0};
    return c;
  }
  nlohmann::json attributes() const override {
    return {
        {"vocab", vocab_}, {"dim", dim_}, {"positions", positions_}, {"token_types", token_types_}};
  }

 private:
  std::int64_t vocab_, dim_, positions_, token_types_;
};

// Attention scores Q K^T / sqrt(d/h) per head: q [S, d], k [T, d] -> [h, S, T].
class AttentionScores final : public Op {
 public:
  explicit AttentionScores(const ConfigNode& a)
      : heads_(detail::positive_attr(a, "heads")), causal_(a.get_or("causal", false)) {}
  std::string kind() const override { return "attention_scores"; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 2, "attention_scores");
    const Shape& q = in[0].shape;
    const Shape& k = in[1].shape;
    if (q.size() != 2 || k.size() != 2 || q[1] != k[1]) {
      throw ShapeError(fmt::format("attention_scores needs q [S, d] and k [T, d], got {} and {}",
                                   to_string(q), to_string(k)));
    }
    if (q[1] % heads_ != 0) {
      throw ShapeError(
          fmt::format("attention_scores: width {} is not divisible by {} heads", q[1], heads_));
    }
    return {{heads_, q[0], k[0]}, DType::kFloat};
  }
  OpCost cost(std::span<const TensorSpec> in, const TensorSpec& out) const override {
    const double macs = numel(out.shape) * static_cast<double>(in[0].shape[1] / heads_);
    const double scores = numel(out.shape);
    OpCost c;
    c.forward_macs = macs;
    c.forward_flops = 2 * macs + scores * (causal_ ? 2 : 1);  // scale (and mask)
    c.backward_input_flops = {2 * macs + scores, 2 * macs};   // dQ = dS K, dK = dS^T Q
    c.saved_inputs = {0, 1};
    return c;
  }
  nlohmann::json attributes() const override { return {{"heads", heads_}, {"causal", causal_}}; }

 private:
  std::int64_t heads_;
  bool causal_;
};

// Attention context P V per head: probs [h, S, T], v [T, d] -> [S, d].
class AttentionContext final : public Op {
 public:
  explicit AttentionContext(const ConfigNode& a) : heads_(detail::positive_attr(a, "heads")) {}
  std::string kind() const override { return "attention_context"; }

  TensorSpec infer(std::span<const TensorSpec> in) const override {
    expect_inputs(in, 2, "attention_context");
    const Shape& p = in[0].shape;
    const Shape& v = in[1].shape;
    if (p.size() != 3 || v.size() != 2 || p[0] != heads_ || p[2] != v[0] || v[1] % heads_ != 0) {
      throw ShapeError(
          fmt::format("attention_context needs probs [{}, S, T] and v [T, d], got {} and {}",
                      heads_, to_string(p), to_string(v)));
    }
    return {{p[1], v[1]}, DType::kFloat};
  }
  OpCost cost(std::span<const TensorSpec> in, const TensorSpec&) const override {
    const double macs = numel(in[0].shape) * static_cast<double>(in[1].shape[1] / heads_);
    OpCost c;
    c.forward_macs = macs;
    c.forward_flops = 2 * macs;
    c.backward_input_flops = {2 * macs, 2 * macs};  // dP = dO V^T, dV = P^T dO
    c.saved_inputs = {0, 1};
    return c;
  }
  nlohmann::json attributes() const override { return {{"heads", heads_}}; }

 private:
  std::int64_t heads_;
};

}  // namespace

void register_dense_ops(OpRegistry& r) {
  r.add("linear", "fully connected layer over the last dimension",
        [](const ConfigNode& a) { return std::make_unique<Linear>(a); });
  r.add("matmul", "matrix product of two activations",
        [](const ConfigNode& a) { return std::make_unique<MatMul>(a); });
  r.add("embedding", "token (+ position, + token type) embedding",
        [](const ConfigNode& a) { return std::make_unique<Embedding>(a); });
  r.add("attention_scores", "multi-head attention scores Q K^T / sqrt(d_head)",
        [](const ConfigNode& a) { return std::make_unique<AttentionScores>(a); });
  r.add("attention_context", "multi-head attention context P V",
        [](const ConfigNode& a) { return std::make_unique<AttentionContext>(a); });
}

}  // namespace dlsim::model
