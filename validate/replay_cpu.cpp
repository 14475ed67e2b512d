// The CPU training step of `dlvalidate replay` (docs/validate.md, "Replay").
//
// Layout: activations are float32, batch outermost, each sample in its per-sample shape (NCHW
// for images). A convolution's output comes from im2col + GEMM (Caffe's lowering, calibrate/
// bench_cpu.hpp), whose product is channel-major (C x B x H x W); the next layer reads it as
// NCHW without a transpose. The values are synthetic, so only the sizes and the work matter,
// and those are the model's.
//
// Backward kernels, per op (dY the output gradient, X the input, W the weight):
//   conv2d      im2col(X) again (as Caffe does), dW = dY cols^T, dcols = W^T dY, col2im(dcols)
//   linear      dW = dY^T X, dX = dY W, db = column sums of dY
//   attention   dQ = dS K, dK = dS^T Q per head (scores); dP = dO V^T, dV = P^T dO (context)
//   matmul      dA = dY B^T, dB = A^T dY
//   batchnorm   dgamma = sum dY xhat, dbeta = sum dY,
//               dX = gamma invstd / M (M dY - dbeta - xhat dgamma) (Ioffe & Szegedy 2015)
//   layernorm   the same per row over the last dimension (Ba et al. 2016)
//   pooling     max: dY to the arg-max saved in forward; average: dY / window to the window
//   lrn         Krizhevsky et al. 2012's across-channel normalization and its derivative
//   softmax     dX = Y (dY - sum dY Y); with cross-entropy dX = softmax - onehot
//   activation  dX = dY f'(X); dropout dX = dY mask; add dX_i = dY; concat the slices back
// A gradient reaching a layer from several consumers is summed: the first writes, the others add.
// Inputs that need no gradient (the data) get none, as in PyTorch and TensorFlow.

#include "validate/replay_cpu.hpp"
#include "validate/replay_ops.hpp"

#include <fmt/format.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>

#include "calibrate/bench_cpu.hpp"
#include "common/error.hpp"
#include "model/analysis.hpp"

namespace dlsim::validate {
namespace {

using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajorF>;
using CMap = Eigen::Map<const RowMajorF>;
using Strided = Eigen::Map<RowMajorF, 0, Eigen::OuterStride<>>;
using CStrided = Eigen::Map<const RowMajorF, 0, Eigen::OuterStride<>>;

using Kind = OpKind;

std::int64_t elems(const model::Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// xorshift64*: fills synthetic data and dropout masks (Vigna 2016).
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 2654435761u + 0x9E3779B97F4A7C15ull) {}
  std::uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1 << 24); }
};

void fill(std::vector<float>& v, Rng& rng, float scale) {
  for (auto& x : v) x = (rng.uniform() - 0.5f) * 2 * scale;
}

// Writes or adds a value, per whether the gradient buffer already holds a contribution.
inline void put(float* dst, std::int64_t i, float v, bool add) { dst[i] = add ? dst[i] + v : v; }

float activation(const std::string& f, float x) {
  if (f == "relu") return x > 0 ? x : 0;
  if (f == "relu6") return std::min(std::max(x, 0.0f), 6.0f);
  if (f == "sigmoid") return 1 / (1 + std::exp(-x));
  if (f == "tanh") return std::tanh(x);
  if (f == "silu") return x / (1 + std::exp(-x));
  // gelu, tanh form
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1 + std::tanh(u));
}

float activation_grad(const std::string& f, float x) {
  if (f == "relu") return x > 0 ? 1.0f : 0.0f;
  if (f == "relu6") return x > 0 && x < 6 ? 1.0f : 0.0f;
  if (f == "sigmoid") {
    const float s = 1 / (1 + std::exp(-x));
    return s * (1 - s);
  }
  if (f == "tanh") {
    const float t = std::tanh(x);
    return 1 - t * t;
  }
  if (f == "silu") {
    const float s = 1 / (1 + std::exp(-x));
    return s * (1 + x * (1 - s));
  }
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  const float t = std::tanh(u);
  return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * 0.7978845608f * (1 + 3 * 0.044715f * x * x);
}

struct Param {
  std::vector<float> value, grad, momentum;
  float* grad_data = nullptr;  // a tied weight's gradient is its owner's
  float* value_data = nullptr;
  std::int64_t elements = 0;
  bool tied_target = false;  // another layer's weight is this tensor
};

struct Window {
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};

}  // namespace

struct CpuTrainingStep::Impl {
  const model::LayerGraph& graph;
  std::int64_t batch;
  Rng rng;

  struct LayerState {
    Kind kind = Kind::kInput;
    std::string op;
    std::int64_t out_elems = 0;    // per sample
    std::vector<float> act, grad;  // batch x out_elems (empty for a view)
    std::size_t alias = SIZE_MAX;  // a view's source layer
    std::vector<Param> params;
    std::vector<float> saved;  // mask, statistics, probabilities
    std::vector<std::int32_t> argmax;
    calibrate::ConvShape conv;
    Window window;
    std::int64_t heads = 1, axis = 0;
    bool grad_written = false;
    std::vector<int> gradient_indices;
    double forward_s = 0, backward_s = 0;  // summed since start_layer_timing()
  };
  std::vector<LayerState> layers;
  std::vector<float> cols;                // im2col scratch, the largest convolution's
  std::vector<std::int64_t> tokens;       // embedding ids
  std::vector<std::int32_t> labels;       // loss targets
  std::vector<GradientBuffer> gradients;  // backward order
  double total_bytes = 0;

  Impl(const model::LayerGraph& g, std::int64_t b, std::uint64_t seed)
      : graph(g), batch(b), rng(seed) {}

  LayerState& source(std::size_t v) {
    auto* s = &layers[v];
    while (s->alias != SIZE_MAX) s = &layers[s->alias];
    return *s;
  }
  float* act(std::size_t v) { return source(v).act.data(); }
  // The gradient buffer of layer v's output for writing; `add` says whether to accumulate.
  float* grad_out(std::size_t v, bool& add) {
    auto& s = source(v);
    add = s.grad_written;
    s.grad_written = true;
    return s.grad.data();
  }
  bool needs_grad(std::size_t v) const { return graph.layer(v).requires_grad; }
  const model::Shape& in_shape(std::size_t v, std::size_t i) const {
    return graph.layer(graph.layer(v).inputs.at(i)).output.shape;
  }

  void build();
  void forward(std::size_t v);
  void backward(std::size_t v);

  // Kernels.
  void window_forward(std::size_t v, bool max);
  void window_backward(std::size_t v, bool max);
  std::array<std::int64_t, 4> window_of(const LayerState& s, std::int64_t oy, std::int64_t ox,
                                        std::int64_t in_h, std::int64_t in_w, std::int64_t out_h,
                                        std::int64_t out_w) const;
};

void CpuTrainingStep::Impl::build() {
  const auto& order = graph.order();
  layers.resize(graph.size());
  std::size_t max_cols = 0;
  const auto stats = model::analyze(graph, batch, Precision::kFp32);
  const auto gradient_index = model::gradient_index(stats);
  gradients.resize(stats.gradients.size());

  for (auto v : order) {
    const auto& l = graph.layer(v);
    auto& s = layers[v];
    s.op = l.op->kind();
    const auto k = replay_op_kinds().find(s.op);
    if (k == replay_op_kinds().end()) {
      fail_at(l.where, l.name,
              fmt::format("the replay has no CPU kernel for op '{}' (it runs: {})", s.op,
                          fmt::join(replay_cpu_ops(), ", ")));
    }
    s.kind = k->second;
    s.out_elems = elems(l.output.shape);
    const auto attrs = l.op->attributes();
    if (s.kind == Kind::kView) {
      s.alias = l.inputs.at(0);
    } else {
      s.act.assign(static_cast<std::size_t>(batch * s.out_elems), 0.0f);
      fill(s.act, rng, 1.0f);
      if (s.kind != Kind::kInput) s.grad.assign(s.act.size(), 0.0f);
    }
    // Parameters: a tied one shares its owner's first tensor.
    for (const auto& p : l.params) {
      Param q;
      q.elements = elems(p.shape);
      if (p.tied && l.tied_to) {
        auto& owner = layers[*l.tied_to].params.at(0);
        owner.tied_target = true;
        q.value_data = owner.value_data;
        q.grad_data = owner.grad_data;
      } else {
        q.value.resize(static_cast<std::size_t>(q.elements));
        fill(q.value, rng, 0.05f);
        q.grad.assign(q.value.size(), 0.0f);
        q.momentum.assign(q.value.size(), 0.0f);
        q.value_data = q.value.data();
        q.grad_data = q.grad.data();
      }
      s.params.push_back(std::move(q));
      const auto gi = gradient_index.find({v, p.name});
      if (gi != gradient_index.end()) {
        auto& gb = gradients[static_cast<std::size_t>(gi->second)];
        gb.data = s.params.back().grad_data;
        gb.value = s.params.back().value_data;
        gb.elements = s.params.back().elements;
        gb.layer = l.name;
        gb.tensor = p.name;
        s.gradient_indices.push_back(gi->second);
      }
    }
    std::sort(s.gradient_indices.begin(), s.gradient_indices.end());
    switch (s.kind) {
      case Kind::kConv: {
        s.conv = calibrate::conv_shape(graph, l, batch);
        const auto g = s.conv.gemm();
        max_cols = std::max(max_cols, static_cast<std::size_t>(g.k * s.conv.groups * g.n));
        break;
      }
      case Kind::kMaxPool:
      case Kind::kAvgPool: {
        const auto kk = attrs.at("kernel").get<std::vector<std::int64_t>>();
        const auto st = attrs.at("stride").get<std::vector<std::int64_t>>();
        const auto pd = attrs.at("padding").get<std::vector<std::int64_t>>();
        s.window = {kk.at(0), kk.at(1), st.at(0), st.at(1), pd.at(0), pd.at(1)};
        if (s.kind == Kind::kMaxPool) s.argmax.assign(s.act.size(), 0);
        break;
      }
      case Kind::kScores:
      case Kind::kContext:
        s.heads = attrs.at("heads").get<std::int64_t>();
        break;
      case Kind::kDropout:
        s.saved.assign(s.act.size(), 1.0f);
        s.window.kh = static_cast<std::int64_t>(
            std::llround(attrs.at("p").get<double>() * (1 << 24)));  // drop threshold
        break;
      case Kind::kConcat:
      case Kind::kSoftmax: {
        const auto rank = static_cast<std::int64_t>(l.output.shape.size());
        const auto a = attrs.at("axis").get<std::int64_t>();
        s.axis = a < 0 ? a + rank : a;
        if (s.kind == Kind::kSoftmax) s.saved.assign(s.act.size(), 0.0f);
        break;
      }
      case Kind::kLoss: {
        const auto& in = in_shape(v, 0);
        s.saved.assign(static_cast<std::size_t>(batch * elems(in)), 0.0f);
        const auto rows = batch * elems(in) / in.back();
        labels.resize(static_cast<std::size_t>(rows));
        for (auto& y : labels) y = static_cast<std::int32_t>(rng.next() % in.back());
        break;
      }
      case Kind::kBatchNorm:
      case Kind::kLayerNorm: {
        const auto& sh = l.output.shape;
        const std::int64_t groups =
            s.kind == Kind::kBatchNorm ? sh.at(0) : batch * s.out_elems / sh.back();
        s.saved.assign(static_cast<std::size_t>(2 * groups), 0.0f);  // mean, 1/std
        break;
      }
      case Kind::kInput:
        if (l.output.dtype == model::DType::kInt64) {
          tokens.resize(s.act.size());
          for (auto& t : tokens) t = static_cast<std::int64_t>(rng.next() % 30000);
        }
        break;
      default:
        break;
    }
  }
  for (auto& gb : gradients) {
    if (gb.data == nullptr) {
      throw std::logic_error("replay: a gradient of model::analyze() has no parameter buffer");
    }
  }
  cols.assign(max_cols, 0.0f);
  for (const auto& s : layers) {
    total_bytes +=
        4.0 * static_cast<double>(s.act.size() + s.grad.size() + s.saved.size() + s.argmax.size());
    for (const auto& p : s.params) {
      total_bytes += 4.0 * static_cast<double>(p.value.size() + p.grad.size() + p.momentum.size());
    }
  }
  total_bytes += 4.0 * static_cast<double>(cols.size());
}

std::array<std::int64_t, 4> CpuTrainingStep::Impl::window_of(const LayerState& s, std::int64_t oy,
                                                             std::int64_t ox, std::int64_t in_h,
                                                             std::int64_t in_w, std::int64_t out_h,
                                                             std::int64_t out_w) const {
  if (s.kind ==
      Kind::kAdaptivePool) {  // PyTorch's adaptive windows: [floor(i H/o), ceil((i+1) H/o))
    return {oy * in_h / out_h, ((oy + 1) * in_h + out_h - 1) / out_h, ox * in_w / out_w,
            ((ox + 1) * in_w + out_w - 1) / out_w};
  }
  const auto& w = s.window;
  const std::int64_t y0 = oy * w.sh - w.ph, x0 = ox * w.sw - w.pw;
  return {std::max<std::int64_t>(y0, 0), std::min(y0 + w.kh, in_h), std::max<std::int64_t>(x0, 0),
          std::min(x0 + w.kw, in_w)};
}

void CpuTrainingStep::Impl::window_forward(std::size_t v, bool max) {
  auto& s = layers[v];
  const auto& in = in_shape(v, 0);
  const auto& out = graph.layer(v).output.shape;
  const std::int64_t planes = batch * in.at(0), ih = in.at(1), iw = in.at(2), oh = out.at(1),
                     ow = out.at(2);
  const float* x = act(graph.layer(v).inputs[0]);
  float* y = s.act.data();
  const bool count_pad = s.kind == Kind::kAvgPool;  // PyTorch's count_include_pad=True
  for (std::int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * ih * iw;
    for (std::int64_t oy = 0; oy < oh; ++oy) {
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        const auto [y0, y1, x0, x1] = window_of(s, oy, ox, ih, iw, oh, ow);
        const std::int64_t o = (p * oh + oy) * ow + ox;
        if (max) {
          float best = -std::numeric_limits<float>::infinity();
          std::int32_t at = 0;
          for (auto yy = y0; yy < y1; ++yy) {
            for (auto xx = x0; xx < x1; ++xx) {
              if (xp[yy * iw + xx] > best) {
                best = xp[yy * iw + xx];
                at = static_cast<std::int32_t>(yy * iw + xx);
              }
            }
          }
          y[o] = best;
          s.argmax[static_cast<std::size_t>(o)] = at;
        } else {
          float sum = 0;
          for (auto yy = y0; yy < y1; ++yy) {
            for (auto xx = x0; xx < x1; ++xx) sum += xp[yy * iw + xx];
          }
          const auto n = count_pad ? s.window.kh * s.window.kw : (y1 - y0) * (x1 - x0);
          y[o] = sum / static_cast<float>(std::max<std::int64_t>(n, 1));
        }
      }
    }
  }
}

void CpuTrainingStep::Impl::window_backward(std::size_t v, bool max) {
  auto& s = layers[v];
  const auto u = graph.layer(v).inputs[0];
  if (!needs_grad(u)) return;
  const auto& in = in_shape(v, 0);
  const auto& out = graph.layer(v).output.shape;
  const std::int64_t planes = batch * in.at(0), ih = in.at(1), iw = in.at(2), oh = out.at(1),
                     ow = out.at(2);
  bool add = false;
  float* dx = grad_out(u, add);
  if (!add) std::fill(dx, dx + planes * ih * iw, 0.0f);  // scattered into: start from zero
  const float* dy = s.grad.data();
  const bool count_pad = s.kind == Kind::kAvgPool;
  for (std::int64_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * ih * iw;
    for (std::int64_t oy = 0; oy < oh; ++oy) {
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        const std::int64_t o = (p * oh + oy) * ow + ox;
        if (max) {
          dxp[s.argmax[static_cast<std::size_t>(o)]] += dy[o];
          continue;
        }
        const auto [y0, y1, x0, x1] = window_of(s, oy, ox, ih, iw, oh, ow);
        const auto n = count_pad ? s.window.kh * s.window.kw : (y1 - y0) * (x1 - x0);
        const float g = dy[o] / static_cast<float>(std::max<std::int64_t>(n, 1));
        for (auto yy = y0; yy < y1; ++yy) {
          for (auto xx = x0; xx < x1; ++xx) dxp[yy * iw + xx] += g;
        }
      }
    }
  }
}

void CpuTrainingStep::Impl::forward(std::size_t v) {
  auto& s = layers[v];
  const auto& l = graph.layer(v);
  float* y = s.act.data();
  const std::int64_t n = batch * s.out_elems;
  switch (s.kind) {
    case Kind::kInput:
    case Kind::kView:
      return;
    case Kind::kConv: {
      calibrate::conv_forward_im2col(s.conv, act(l.inputs[0]), s.params[0].value_data, cols.data(),
                                     y);
      if (s.params.size() > 1) {
        Map out(y, s.conv.out_c, n / s.conv.out_c);
        const Eigen::Map<const Eigen::VectorXf> b(s.params[1].value_data, s.conv.out_c);
        out.colwise() += b;
      }
      return;
    }
    case Kind::kLinear: {
      const auto& in = in_shape(v, 0);
      const std::int64_t k = in.back(), o = l.output.shape.back(), m = n / o;
      CMap x(act(l.inputs[0]), m, k);
      CMap w(s.params[0].value_data, o, k);
      Map out(y, m, o);
      out.noalias() = x * w.transpose();
      if (s.params.size() > 1) {
        out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(s.params[1].value_data, o);
      }
      return;
    }
    case Kind::kMatmul: {
      const auto& a = in_shape(v, 0);
      const auto& b = in_shape(v, 1);
      const bool tb = l.op->attributes().at("transpose_b").get<bool>();
      const std::int64_t m = a[a.size() - 2], k = a.back(), cols_n = l.output.shape.back();
      const std::int64_t count = batch * elems(a) / (m * k);
      if (batch * elems(b) != count * k * cols_n) {
        fail_at(l.where, l.name, "the replay's matmul needs one B matrix per A matrix");
      }
      for (std::int64_t i = 0; i < count; ++i) {
        CMap A(act(l.inputs[0]) + i * m * k, m, k);
        const float* bp = act(l.inputs[1]) + i * k * cols_n;
        Map Y(y + i * m * cols_n, m, cols_n);
        if (tb) {
          Y.noalias() = A * CMap(bp, cols_n, k).transpose();
        } else {
          Y.noalias() = A * CMap(bp, k, cols_n);
        }
      }
      return;
    }
    case Kind::kEmbedding: {
      const std::int64_t dim = l.output.shape.back(), seq = s.out_elems / dim;
      const auto vocab = s.params[0].elements / dim;
      for (std::int64_t r = 0; r < batch * seq; ++r) {
        const auto id = tokens.empty() ? r % vocab : tokens[static_cast<std::size_t>(r)] % vocab;
        const float* word = s.params[0].value_data + id * dim;
        for (std::int64_t c = 0; c < dim; ++c) y[r * dim + c] = word[c];
        for (std::size_t t = 1; t < s.params.size(); ++t) {
          const auto rows = s.params[t].elements / dim;
          const float* e = s.params[t].value_data + ((t == 1 ? r % seq : 0) % rows) * dim;
          for (std::int64_t c = 0; c < dim; ++c) y[r * dim + c] += e[c];
        }
      }
      return;
    }
    case Kind::kScores:
    case Kind::kContext: {
      const auto& a = in_shape(v, 0);
      const auto& b = in_shape(v, 1);
      const float* A = act(l.inputs[0]);
      const float* B = act(l.inputs[1]);
      for (std::int64_t i = 0; i < batch; ++i) {
        if (s.kind == Kind::kScores) {  // q [S, d], k [T, d] -> [h, S, T]
          const std::int64_t S = a[0], d = a[1], T = b[0], dh = d / s.heads;
          const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
          for (std::int64_t h = 0; h < s.heads; ++h) {
            CStrided q(A + i * S * d + h * dh, S, dh, Eigen::OuterStride<>(d));
            CStrided kk(B + i * T * d + h * dh, T, dh, Eigen::OuterStride<>(d));
            Map(y + (i * s.heads + h) * S * T, S, T).noalias() = scale * (q * kk.transpose());
          }
        } else {  // p [h, S, T], v [T, d] -> [S, d]
          const std::int64_t S = a[1], T = a[2], d = b[1], dh = d / s.heads;
          for (std::int64_t h = 0; h < s.heads; ++h) {
            CMap p(A + (i * s.heads + h) * S * T, S, T);
            CStrided vv(B + i * T * d + h * dh, T, dh, Eigen::OuterStride<>(d));
            Strided(y + i * S * d + h * dh, S, dh, Eigen::OuterStride<>(d)).noalias() = p * vv;
          }
        }
      }
      return;
    }
    case Kind::kActivation: {
      const float* x = act(l.inputs[0]);
      for (std::int64_t i = 0; i < n; ++i) y[i] = activation(s.op, x[i]);
      return;
    }
    case Kind::kDropout: {
      const float* x = act(l.inputs[0]);
      const auto threshold = static_cast<std::uint64_t>(s.window.kh);
      const float keep_scale =
          1.0f / (1.0f - static_cast<float>(threshold) / static_cast<float>(1 << 24));
      for (std::int64_t i = 0; i < n; ++i) {
        const float m = (rng.next() >> 40) < threshold ? 0.0f : keep_scale;
        s.saved[static_cast<std::size_t>(i)] = m;
        y[i] = x[i] * m;
      }
      return;
    }
    case Kind::kAdd: {
      std::memcpy(y, act(l.inputs[0]), static_cast<std::size_t>(n) * sizeof(float));
      for (std::size_t j = 1; j < l.inputs.size(); ++j) {
        const float* x = act(l.inputs[j]);
        for (std::int64_t i = 0; i < n; ++i) y[i] += x[i];
      }
      return;
    }
    case Kind::kConcat:
    case Kind::kLoss:
    case Kind::kSoftmax:
      break;
    case Kind::kBatchNorm:
    case Kind::kLayerNorm:
      break;
    case Kind::kMaxPool:
      window_forward(v, true);
      return;
    case Kind::kAvgPool:
    case Kind::kAdaptivePool:
      window_forward(v, false);
      return;
    case Kind::kLrn:
      break;
  }
  // The kernels below work on rows or channel planes.
  const auto& out = l.output.shape;
  if (s.kind == Kind::kConcat) {
    // Per sample: outer = product of dims before the axis, each input's slab after it.
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t d = 0; d < s.axis; ++d) outer *= out[static_cast<std::size_t>(d)];
    for (std::size_t d = static_cast<std::size_t>(s.axis) + 1; d < out.size(); ++d) inner *= out[d];
    const std::int64_t out_slab = out[static_cast<std::size_t>(s.axis)] * inner;
    std::int64_t offset = 0;
    for (std::size_t j = 0; j < l.inputs.size(); ++j) {
      const std::int64_t slab = in_shape(v, j)[static_cast<std::size_t>(s.axis)] * inner;
      const float* x = act(l.inputs[j]);
      for (std::int64_t r = 0; r < batch * outer; ++r) {
        std::memcpy(y + r * out_slab + offset, x + r * slab,
                    static_cast<std::size_t>(slab) * sizeof(float));
      }
      offset += slab;
    }
    return;
  }
  if (s.kind == Kind::kSoftmax || s.kind == Kind::kLoss) {
    const auto& in = in_shape(v, 0);
    const std::int64_t len = s.kind == Kind::kLoss ? in.back() : out.back();
    const std::int64_t rows = batch * elems(in) / len;
    const float* x = act(l.inputs[0]);
    float* p = s.kind == Kind::kLoss ? s.saved.data() : y;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * len;
      float* pr = p + r * len;
      const float mx = *std::max_element(xr, xr + len);
      float sum = 0;
      for (std::int64_t c = 0; c < len; ++c) sum += (pr[c] = std::exp(xr[c] - mx));
      const float inv = 1 / sum;
      for (std::int64_t c = 0; c < len; ++c) pr[c] *= inv;
    }
    if (s.kind == Kind::kSoftmax) {
      std::copy(y, y + n, s.saved.begin());
    } else {
      const std::int64_t per_sample = rows / batch;
      for (std::int64_t b = 0; b < batch; ++b) {
        float loss = 0;
        for (std::int64_t r = b * per_sample; r < (b + 1) * per_sample; ++r) {
          loss -= std::log(p[r * len + labels[static_cast<std::size_t>(r)]] + 1e-30f);
        }
        y[b] = loss / static_cast<float>(per_sample);
      }
    }
    return;
  }
  if (s.kind == Kind::kBatchNorm || s.kind == Kind::kLayerNorm) {
    const float* x = act(l.inputs[0]);
    const float eps = 1e-5f;
    const bool bn = s.kind == Kind::kBatchNorm;
    const std::int64_t channels = bn ? out.at(0) : n / out.back();
    const std::int64_t plane = bn ? s.out_elems / out.at(0) : out.back();
    const std::int64_t per_sample = bn ? s.out_elems : 0;
    // Batchnorm: channel c's values are sample b's plane c; layernorm: row c is contiguous.
    auto at = [&](std::int64_t c, std::int64_t b) {
      return bn ? b * per_sample + c * plane : c * plane;
    };
    const std::int64_t reps = bn ? batch : 1;
    const float count = static_cast<float>(plane * reps);
    for (std::int64_t c = 0; c < channels; ++c) {
      double sum = 0, sq = 0;
      for (std::int64_t b = 0; b < reps; ++b) {
        const float* xc = x + at(c, b);
        for (std::int64_t i = 0; i < plane; ++i) {
          sum += xc[i];
          sq += static_cast<double>(xc[i]) * xc[i];
        }
      }
      const float mean = static_cast<float>(sum / count);
      const float var = std::max(static_cast<float>(sq / count) - mean * mean, 0.0f);
      const float inv = 1 / std::sqrt(var + eps);
      s.saved[static_cast<std::size_t>(2 * c)] = mean;
      s.saved[static_cast<std::size_t>(2 * c + 1)] = inv;
      for (std::int64_t b = 0; b < reps; ++b) {
        const float* xc = x + at(c, b);
        float* yc = y + at(c, b);
        for (std::int64_t i = 0; i < plane; ++i) {
          const float g = s.params.empty() ? 1.0f : s.params[0].value_data[bn ? c : i];
          const float be = s.params.size() < 2 ? 0.0f : s.params[1].value_data[bn ? c : i];
          yc[i] = (xc[i] - mean) * inv * g + be;
        }
      }
    }
    return;
  }
  // lrn across channels: y = x (k + alpha/size sum_{window} x^2)^-beta
  const auto attrs = l.op->attributes();
  const auto size = attrs.at("size").get<std::int64_t>();
  const auto alpha = attrs.at("alpha").get<float>(), beta = attrs.at("beta").get<float>(),
             k = attrs.at("k").get<float>();
  const float* x = act(l.inputs[0]);
  const std::int64_t C = out.at(0), plane = s.out_elems / C;
  s.saved.resize(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t c = 0; c < C; ++c) {
      const std::int64_t c0 = std::max<std::int64_t>(0, c - size / 2),
                         c1 = std::min(C, c + (size - 1) / 2 + 1);
      for (std::int64_t i = 0; i < plane; ++i) {
        float sum = 0;
        for (auto cc = c0; cc < c1; ++cc) {
          const float xv = x[(b * C + cc) * plane + i];
          sum += xv * xv;
        }
        const std::int64_t o = (b * C + c) * plane + i;
        const float scale = k + alpha / static_cast<float>(size) * sum;
        s.saved[static_cast<std::size_t>(o)] = scale;
        y[o] = x[o] * std::pow(scale, -beta);
      }
    }
  }
}

void CpuTrainingStep::Impl::backward(std::size_t v) {
  auto& s = layers[v];
  const auto& l = graph.layer(v);
  if (s.kind == Kind::kInput || s.kind == Kind::kView) return;
  if (s.kind == Kind::kLoss) {
    // The loss starts the pass: dL/dloss = 1 per sample.
    std::fill(s.grad.begin(), s.grad.end(), 1.0f);
    s.grad_written = true;
  }
  if (!s.grad_written) return;  // nothing downstream produced a gradient (an unused output)
  const float* dy = s.grad.data();
  const std::int64_t n = batch * s.out_elems;
  bool add = false;
  switch (s.kind) {
    case Kind::kConv: {
      const auto& c = s.conv;
      const auto g = c.gemm();
      calibrate::im2col(c, act(l.inputs[0]), cols.data());
      CMap dY(dy, c.out_c, g.n);
      Map colm(cols.data(), g.k * c.groups, g.n);
      Map dW(s.params[0].grad_data, c.out_c, g.k);
      CMap W(s.params[0].value_data, c.out_c, g.k);
      for (std::int64_t grp = 0; grp < c.groups; ++grp) {
        dW.middleRows(grp * g.m, g.m).noalias() =
            dY.middleRows(grp * g.m, g.m) * colm.middleRows(grp * g.k, g.k).transpose();
      }
      if (s.params.size() > 1) {
        Eigen::Map<Eigen::VectorXf>(s.params[1].grad_data, c.out_c) = dY.rowwise().sum();
      }
      const auto u = l.inputs[0];
      if (needs_grad(u)) {
        for (std::int64_t grp = 0; grp < c.groups; ++grp) {  // cols now holds dcols
          colm.middleRows(grp * g.k, g.k).noalias() =
              W.middleRows(grp * g.m, g.m).transpose() * dY.middleRows(grp * g.m, g.m);
        }
        float* dx = grad_out(u, add);
        if (!add) std::fill(dx, dx + batch * c.in_c * c.in_h * c.in_w, 0.0f);
        calibrate::col2im_add(c, cols.data(), dx);
      }
      break;
    }
    case Kind::kLinear: {
      const auto& in = in_shape(v, 0);
      const std::int64_t k = in.back(), o = l.output.shape.back(), m = n / o;
      CMap x(act(l.inputs[0]), m, k);
      CMap dY(dy, m, o);
      Map dW(s.params[0].grad_data, o, k);
      dW.noalias() = dY.transpose() * x;  // a tied weight writes its owner's gradient first
      if (s.params.size() > 1) {
        Eigen::Map<Eigen::RowVectorXf>(s.params[1].grad_data, o) = dY.colwise().sum();
      }
      const auto u = l.inputs[0];
      if (needs_grad(u)) {
        float* dx = grad_out(u, add);
        Map dX(dx, m, k);
        CMap W(s.params[0].value_data, o, k);
        if (add) {
          dX.noalias() += dY * W;
        } else {
          dX.noalias() = dY * W;
        }
      }
      break;
    }
    case Kind::kMatmul: {
      const auto& a = in_shape(v, 0);
      const bool tb = l.op->attributes().at("transpose_b").get<bool>();
      const std::int64_t m = a[a.size() - 2], k = a.back(), cn = l.output.shape.back();
      const std::int64_t count = batch * elems(a) / (m * k);
      bool add_a = false, add_b = false;
      float* da = needs_grad(l.inputs[0]) ? grad_out(l.inputs[0], add_a) : nullptr;
      float* db = needs_grad(l.inputs[1]) ? grad_out(l.inputs[1], add_b) : nullptr;
      for (std::int64_t i = 0; i < count; ++i) {
        CMap dY(dy + i * m * cn, m, cn);
        CMap A(act(l.inputs[0]) + i * m * k, m, k);
        const float* bp = act(l.inputs[1]) + i * k * cn;
        if (da != nullptr) {
          Map dA(da + i * m * k, m, k);
          if (tb) {
            if (add_a)
              dA.noalias() += dY * CMap(bp, cn, k);
            else
              dA.noalias() = dY * CMap(bp, cn, k);
          } else {
            if (add_a)
              dA.noalias() += dY * CMap(bp, k, cn).transpose();
            else
              dA.noalias() = dY * CMap(bp, k, cn).transpose();
          }
        }
        if (db != nullptr) {
          if (tb) {
            Map dB(db + i * k * cn, cn, k);
            if (add_b)
              dB.noalias() += dY.transpose() * A;
            else
              dB.noalias() = dY.transpose() * A;
          } else {
            Map dB(db + i * k * cn, k, cn);
            if (add_b)
              dB.noalias() += A.transpose() * dY;
            else
              dB.noalias() = A.transpose() * dY;
          }
        }
      }
      break;
    }
    case Kind::kEmbedding: {
      const std::int64_t dim = l.output.shape.back(), seq = s.out_elems / dim;
      // Scattered into: zeroed first, except a table a tied output layer already wrote.
      for (auto& p : s.params) {
        if (!p.tied_target) std::fill(p.grad_data, p.grad_data + p.elements, 0.0f);
      }
      const auto vocab = s.params[0].elements / dim;
      for (std::int64_t r = 0; r < batch * seq; ++r) {
        const auto id = tokens.empty() ? r % vocab : tokens[static_cast<std::size_t>(r)] % vocab;
        for (std::size_t t = 0; t < s.params.size(); ++t) {
          const auto rows = s.params[t].elements / dim;
          const std::int64_t row = t == 0 ? id : ((t == 1 ? r % seq : 0) % rows);
          float* gr = s.params[t].grad_data + row * dim;
          for (std::int64_t c = 0; c < dim; ++c) gr[c] += dy[r * dim + c];
        }
      }
      break;
    }
    case Kind::kScores:
    case Kind::kContext: {
      const auto& a = in_shape(v, 0);
      const auto& b = in_shape(v, 1);
      const float* A = act(l.inputs[0]);
      const float* B = act(l.inputs[1]);
      bool add_a = false, add_b = false;
      float* dA = needs_grad(l.inputs[0]) ? grad_out(l.inputs[0], add_a) : nullptr;
      float* dB = needs_grad(l.inputs[1]) ? grad_out(l.inputs[1], add_b) : nullptr;
      for (std::int64_t i = 0; i < batch; ++i) {
        if (s.kind == Kind::kScores) {
          const std::int64_t S = a[0], d = a[1], T = b[0], dh = d / s.heads;
          const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
          for (std::int64_t h = 0; h < s.heads; ++h) {
            CMap dS(dy + (i * s.heads + h) * S * T, S, T);
            CStrided q(A + i * S * d + h * dh, S, dh, Eigen::OuterStride<>(d));
            CStrided kk(B + i * T * d + h * dh, T, dh, Eigen::OuterStride<>(d));
            if (dA != nullptr) {
              Strided dq(dA + i * S * d + h * dh, S, dh, Eigen::OuterStride<>(d));
              if (add_a)
                dq.noalias() += scale * (dS * kk);
              else
                dq.noalias() = scale * (dS * kk);
            }
            if (dB != nullptr) {
              Strided dk(dB + i * T * d + h * dh, T, dh, Eigen::OuterStride<>(d));
              if (add_b)
                dk.noalias() += scale * (dS.transpose() * q);
              else
                dk.noalias() = scale * (dS.transpose() * q);
            }
          }
        } else {
          const std::int64_t S = a[1], T = a[2], d = b[1], dh = d / s.heads;
          for (std::int64_t h = 0; h < s.heads; ++h) {
            CStrided dO(dy + i * S * d + h * dh, S, dh, Eigen::OuterStride<>(d));
            CMap p(A + (i * s.heads + h) * S * T, S, T);
            CStrided vv(B + i * T * d + h * dh, T, dh, Eigen::OuterStride<>(d));
            if (dA != nullptr) {
              Map dp(dA + (i * s.heads + h) * S * T, S, T);
              if (add_a)
                dp.noalias() += dO * vv.transpose();
              else
                dp.noalias() = dO * vv.transpose();
            }
            if (dB != nullptr) {
              Strided dv(dB + i * T * d + h * dh, T, dh, Eigen::OuterStride<>(d));
              if (add_b)
                dv.noalias() += p.transpose() * dO;
              else
                dv.noalias() = p.transpose() * dO;
            }
          }
        }
      }
      break;
    }
    case Kind::kActivation:
    case Kind::kDropout:
    case Kind::kAdd: {
      for (std::size_t j = 0; j < l.inputs.size(); ++j) {
        const auto u = l.inputs[j];
        if (!needs_grad(u)) continue;
        float* dx = grad_out(u, add);
        if (s.kind == Kind::kActivation) {
          const float* x = act(u);
          for (std::int64_t i = 0; i < n; ++i) put(dx, i, dy[i] * activation_grad(s.op, x[i]), add);
        } else if (s.kind == Kind::kDropout) {
          for (std::int64_t i = 0; i < n; ++i)
            put(dx, i, dy[i] * s.saved[static_cast<std::size_t>(i)], add);
        } else {
          for (std::int64_t i = 0; i < n; ++i) put(dx, i, dy[i], add);
        }
      }
      break;
    }
    case Kind::kConcat: {
      const auto& out = l.output.shape;
      std::int64_t outer = 1, inner = 1;
      for (std::int64_t d = 0; d < s.axis; ++d) outer *= out[static_cast<std::size_t>(d)];
      for (std::size_t d = static_cast<std::size_t>(s.axis) + 1; d < out.size(); ++d)
        inner *= out[d];
      const std::int64_t out_slab = out[static_cast<std::size_t>(s.axis)] * inner;
      std::int64_t offset = 0;
      for (std::size_t j = 0; j < l.inputs.size(); ++j) {
        const std::int64_t slab = in_shape(v, j)[static_cast<std::size_t>(s.axis)] * inner;
        if (needs_grad(l.inputs[j])) {
          float* dx = grad_out(l.inputs[j], add);
          for (std::int64_t r = 0; r < batch * outer; ++r) {
            for (std::int64_t i = 0; i < slab; ++i)
              put(dx, r * slab + i, dy[r * out_slab + offset + i], add);
          }
        }
        offset += slab;
      }
      break;
    }
    case Kind::kSoftmax:
    case Kind::kLoss: {
      const auto u = l.inputs[0];
      if (!needs_grad(u)) break;
      const auto& in = in_shape(v, 0);
      const std::int64_t len = in.back(), rows = batch * elems(in) / len;
      float* dx = grad_out(u, add);
      const float* p = s.saved.data();
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* pr = p + r * len;
        if (s.kind == Kind::kLoss) {
          const float g = dy[r / (rows / batch)] / static_cast<float>(rows / batch);
          for (std::int64_t c = 0; c < len; ++c) {
            const float onehot = c == labels[static_cast<std::size_t>(r)] ? 1.0f : 0.0f;
            put(dx, r * len + c, g * (pr[c] - onehot), add);
          }
        } else {
          const float* dyr = dy + r * len;
          float dot = 0;
          for (std::int64_t c = 0; c < len; ++c) dot += dyr[c] * pr[c];
          for (std::int64_t c = 0; c < len; ++c) put(dx, r * len + c, pr[c] * (dyr[c] - dot), add);
        }
      }
      break;
    }
    case Kind::kBatchNorm:
    case Kind::kLayerNorm: {
      const auto& out = l.output.shape;
      const bool bn = s.kind == Kind::kBatchNorm;
      const std::int64_t channels = bn ? out.at(0) : n / out.back();
      const std::int64_t plane = bn ? s.out_elems / out.at(0) : out.back();
      auto at = [&](std::int64_t c, std::int64_t b) {
        return bn ? b * s.out_elems + c * plane : c * plane;
      };
      const std::int64_t reps = bn ? batch : 1;
      const float count = static_cast<float>(plane * reps);
      const float* x = act(l.inputs[0]);
      const auto u = l.inputs[0];
      float* dx = needs_grad(u) ? grad_out(u, add) : nullptr;
      float* dgamma = s.params.empty() ? nullptr : s.params[0].grad_data;
      float* dbeta = s.params.size() < 2 ? nullptr : s.params[1].grad_data;
      if (!bn && dgamma != nullptr) {
        std::fill(dgamma, dgamma + plane, 0.0f);
        std::fill(dbeta, dbeta + plane, 0.0f);
      }
      for (std::int64_t c = 0; c < channels; ++c) {
        const float mean = s.saved[static_cast<std::size_t>(2 * c)];
        const float inv = s.saved[static_cast<std::size_t>(2 * c + 1)];
        float sum_dy = 0, sum_dy_xhat = 0;
        for (std::int64_t b = 0; b < reps; ++b) {
          const float* xc = x + at(c, b);
          const float* dyc = dy + at(c, b);
          for (std::int64_t i = 0; i < plane; ++i) {
            const float g = s.params.empty() ? 1.0f : s.params[0].value_data[bn ? c : i];
            const float xhat = (xc[i] - mean) * inv;
            sum_dy += dyc[i] * g;
            sum_dy_xhat += dyc[i] * g * xhat;
            if (!bn && dgamma != nullptr) {
              dgamma[i] += dyc[i] * xhat;
              dbeta[i] += dyc[i];
            }
          }
        }
        if (bn && dgamma != nullptr) {
          float sg = 0, sb = 0;
          for (std::int64_t b = 0; b < reps; ++b) {
            const float* xc = x + at(c, b);
            const float* dyc = dy + at(c, b);
            for (std::int64_t i = 0; i < plane; ++i) {
              sg += dyc[i] * (xc[i] - mean) * inv;
              sb += dyc[i];
            }
          }
          dgamma[c] = sg;
          dbeta[c] = sb;
        }
        if (dx == nullptr) continue;
        for (std::int64_t b = 0; b < reps; ++b) {
          const float* xc = x + at(c, b);
          const float* dyc = dy + at(c, b);
          for (std::int64_t i = 0; i < plane; ++i) {
            const float g = s.params.empty() ? 1.0f : s.params[0].value_data[bn ? c : i];
            const float xhat = (xc[i] - mean) * inv;
            put(dx, at(c, b) + i, inv / count * (count * dyc[i] * g - sum_dy - xhat * sum_dy_xhat),
                add);
          }
        }
      }
      break;
    }
    case Kind::kMaxPool:
      window_backward(v, true);
      break;
    case Kind::kAvgPool:
    case Kind::kAdaptivePool:
      window_backward(v, false);
      break;
    case Kind::kLrn: {
      const auto u = l.inputs[0];
      if (!needs_grad(u)) break;
      const auto attrs = l.op->attributes();
      const auto size = attrs.at("size").get<std::int64_t>();
      const auto alpha = attrs.at("alpha").get<float>(), beta = attrs.at("beta").get<float>();
      const auto& out = l.output.shape;
      const std::int64_t C = out.at(0), plane = s.out_elems / C;
      const float* x = act(u);
      float* dx = grad_out(u, add);
      for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t c = 0; c < C; ++c) {
          // dx_c = dy_c scale_c^-beta - 2 alpha beta / size x_c sum_{c' near c} dy y / scale
          const std::int64_t c0 = std::max<std::int64_t>(0, c - (size - 1) / 2),
                             c1 = std::min(C, c + size / 2 + 1);
          for (std::int64_t i = 0; i < plane; ++i) {
            const std::int64_t o = (b * C + c) * plane + i;
            float acc = 0;
            for (auto cc = c0; cc < c1; ++cc) {
              const std::int64_t q = (b * C + cc) * plane + i;
              acc +=
                  dy[q] * s.act[static_cast<std::size_t>(q)] / s.saved[static_cast<std::size_t>(q)];
            }
            put(dx, o,
                dy[o] * std::pow(s.saved[static_cast<std::size_t>(o)], -beta) -
                    2 * alpha * beta / static_cast<float>(size) * x[o] * acc,
                add);
          }
        }
      }
      break;
    }
    case Kind::kInput:
    case Kind::kView:
      break;
  }
}

CpuTrainingStep::CpuTrainingStep(const model::LayerGraph& graph, std::int64_t batch,
                                 std::uint64_t seed)
    : impl_(std::make_unique<Impl>(graph, batch, seed)) {
  impl_->build();
}

CpuTrainingStep::~CpuTrainingStep() = default;

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void CpuTrainingStep::forward() {
  for (auto v : impl_->graph.order()) {
    const auto t0 = std::chrono::steady_clock::now();
    impl_->forward(v);
    impl_->layers[v].forward_s += since(t0);
  }
}

void CpuTrainingStep::backward(const std::function<void(int)>& ready) {
  for (auto& s : impl_->layers) s.grad_written = false;
  const auto& order = impl_->graph.order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    impl_->backward(*it);
    impl_->layers[*it].backward_s += since(t0);
    for (int g : impl_->layers[*it].gradient_indices) ready(g);
  }
}

void CpuTrainingStep::update(float scale) {
  constexpr float kLearningRate = 1e-4f, kMomentum = 0.9f;
  for (auto& s : impl_->layers) {
    for (auto& p : s.params) {
      if (p.momentum.empty()) continue;  // tied: updated through its owner
      for (std::int64_t i = 0; i < p.elements; ++i) {
        const auto j = static_cast<std::size_t>(i);
        p.momentum[j] = kMomentum * p.momentum[j] + scale * p.grad[j];
        p.value[j] -= kLearningRate * p.momentum[j];
      }
    }
  }
}

const std::vector<GradientBuffer>& CpuTrainingStep::gradients() const { return impl_->gradients; }

double CpuTrainingStep::loss() {
  double sum = 0;
  for (const auto& s : impl_->layers) {
    if (s.kind == Kind::kLoss) sum += std::accumulate(s.act.begin(), s.act.end(), 0.0);
  }
  return sum;
}

double CpuTrainingStep::bytes() const { return impl_->total_bytes; }

void CpuTrainingStep::start_layer_timing() {
  for (auto& s : impl_->layers) s.forward_s = s.backward_s = 0;
}

std::vector<LayerTime> CpuTrainingStep::layer_times() {
  std::vector<LayerTime> out;
  for (auto v : impl_->graph.order()) {
    const auto& s = impl_->layers[v];
    out.push_back({impl_->graph.layer(v).name, s.op, s.forward_s, s.backward_s});
  }
  return out;
}

void CpuTrainingStep::to_host(int g, float* dst) {
  const auto& b = impl_->gradients.at(static_cast<std::size_t>(g));
  std::memcpy(dst, b.data, static_cast<std::size_t>(b.elements) * sizeof(float));
}

void CpuTrainingStep::from_host(int g, const float* src) {
  const auto& b = impl_->gradients.at(static_cast<std::size_t>(g));
  std::memcpy(b.data, src, static_cast<std::size_t>(b.elements) * sizeof(float));
}

}  // namespace dlsim::validate
