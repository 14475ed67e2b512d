#include "calibrate/torch_step.hpp"

#include "calibrate/step_ops.hpp"

#include <ATen/autocast_mode.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "model/analysis.hpp"

namespace dlsim::calibrate {
namespace {

using Kind = OpKind;
using StepPrecision = TorchStepOptions::Precision;

const std::map<std::string, OpKind>& kinds() { return step_op_kinds(); }

std::vector<std::int64_t> with_batch(std::int64_t batch, const model::Shape& s) {
  std::vector<std::int64_t> out{batch};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

std::vector<std::int64_t> ints(const nlohmann::json& j) {
  return j.get<std::vector<std::int64_t>>();
}

// A per-sample axis (negative from the end) as an axis of the batched tensor.
std::int64_t batched_axis(std::int64_t axis) { return axis >= 0 ? axis + 1 : axis; }

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What differs between libtorch versions, detected rather than assumed: c10::Event reads the
// time between two events from PyTorch 2.x on; the TF32 switches of at::Context.
template <class E>
concept EventTimer = requires(const E& a, const E& b) {
  a.elapsedTime(b);
};
template <class C>
concept Tf32Switch = requires(C& c) {
  c.setAllowTF32CuBLAS(false);
  c.setAllowTF32CuDNN(false);
};

// Seconds from `from` to `to`, both recorded and complete.
template <class E>
double elapsed_s(const E& from, const E& to) {
  if constexpr (EventTimer<E>) {
    return from.elapsedTime(to) / 1e3;  // cudaEventElapsedTime, ms
  } else {
    throw std::logic_error("libtorch step: this libtorch cannot time CUDA events");
  }
}

// TF32 in cuBLAS and cuDNN on or off; false where this libtorch has no switch.
template <class C>
bool set_tf32(C& context, bool on) {
  if constexpr (Tf32Switch<C>) {
    context.setAllowTF32CuBLAS(on);
    context.setAllowTF32CuDNN(on);
    return true;
  } else {
    return false;
  }
}

// Autocast on CUDA to `dtype` (float16 or bfloat16), or off.
void set_autocast(bool on, at::ScalarType dtype) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  if (on) at::autocast::set_autocast_dtype(at::kCUDA, dtype);
  at::autocast::set_autocast_enabled(at::kCUDA, on);
#else
  if (on) at::autocast::set_autocast_gpu_dtype(dtype);
  at::autocast::set_enabled(on);
#endif
  if (!on) at::autocast::clear_cache();
}

struct Param {
  at::Tensor value;     // requires grad; a tied one is its owner's tensor
  at::Tensor grad;      // persistent (the exchange reads it in place); undefined when tied
  at::Tensor momentum;  // undefined when tied
  std::size_t owner_layer = SIZE_MAX, owner_index = 0;  // a tied tensor's owner
  bool written = false;                                 // grad holds this step's gradient
};

struct LayerState {
  Kind kind = Kind::kInput;
  std::string op;
  nlohmann::json attrs;
  std::vector<Param> params;
  std::vector<int> gradient_indices;  // sorted
  at::Tensor out;                     // this step's output, its graph rooted at `leaves`
  std::vector<at::Tensor> leaves;     // inputs that need a gradient, detached
  std::vector<std::size_t> leaf_source;
  at::Tensor grad;                       // gradient of `out`, summed over consumers
  at::Tensor labels;                     // loss targets
  at::Tensor running_mean, running_var;  // batchnorm's statistics, updated as torch.nn's are
  // ReLU or add in place on its first input's storage, as torchvision's models run them
  // (nn.ReLU(inplace=True), `out += identity`): where that input has no other reader and its
  // producer's backward does not read its output. Its backward is the ATen kernel autograd would
  // call (threshold_backward), or none for add.
  bool in_place = false;
  double forward_s = 0, backward_s = 0;
  double forward_host_s = 0, backward_host_s = 0;  // on CUDA: the host's time issuing it
};

class TorchStep final : public TrainingStep {
 public:
  TorchStep(const model::LayerGraph& graph, std::int64_t batch, std::uint64_t seed,
            const TorchStepOptions& options)
      : graph_(graph), batch_(batch), options_(options) {
    check_torch_step(options);
    at::set_num_threads(options.threads);
    torch::manual_seed(seed);
    if (options.cuda) {
      at::globalContext().setBenchmarkCuDNN(true);  // cuDNN picks its fastest algorithm per shape
      tf32_set_ = set_tf32(at::globalContext(), options.precision == StepPrecision::kTf32);
      device_ = at::Device(at::kCUDA, 0);
      if constexpr (EventTimer<c10::Event>) {
        for (std::size_t i = 0; i <= graph.size(); ++i) {
          events_.emplace_back(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
        }
      }
    }
    build();
  }

  void forward() override {
    if (options_.autocast()) set_autocast(true, autocast_dtype());
    pass_start();
    for (auto v : graph_.order()) {
      const auto t0 = layer_start();
      forward(v);
      layer_end(v, t0, &LayerState::forward_s);
    }
    if (options_.autocast()) set_autocast(false, autocast_dtype());
    pass_end(&LayerState::forward_s);
  }

  void backward(const std::function<void(int)>& ready) override {
    for (auto& s : layers_) {
      s.grad = at::Tensor();
      for (auto& p : s.params) p.written = false;
    }
    const auto& order = graph_.order();
    pass_start();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const auto v = *it;
      const auto t0 = layer_start();
      backward(v);
      layer_end(v, t0, &LayerState::backward_s);
      for (int g : layers_[v].gradient_indices) ready(g);
      // Every reader of this layer's output is done: free it as autograd frees what it saved
      // (a loss stays for loss()).
      if (layers_[v].kind != Kind::kLoss && layers_[v].kind != Kind::kInput) {
        layers_[v].out = at::Tensor();
        layers_[v].leaves.clear();
      }
    }
    pass_end(&LayerState::backward_s);
  }

  void update(float scale) override {
    // torch.optim.SGD(lr, momentum=0.9): the momentum buffer times 0.9 plus the gradient, then
    // the parameter minus lr times the buffer. On the CPU one tensor at a time
    // (_single_tensor_sgd, its default there); on CUDA over all tensors at once (_multi_tensor_sgd,
    // the foreach kernels), after GradScaler's unscale and overflow check under amp.
    at::NoGradGuard no_grad;
    if (options_.cuda) {
      bool step = true;
      if (options_.scaler()) {
        found_inf_.zero_();
        at::_amp_foreach_non_finite_check_and_unscale_(
            grads_, found_inf_, loss_scale_.to(at::kDouble).reciprocal().to(at::kFloat));
        step = found_inf_.item<float>() == 0.0f;  // GradScaler.step skips a step that overflowed
      }
      if (step) {
        at::_foreach_mul_(momenta_, 0.9);
        at::_foreach_add_(momenta_, grads_, scale);
        at::_foreach_add_(values_, momenta_, -kLearningRate);
      }
      if (options_.scaler()) {
        at::_amp_update_scale_(loss_scale_, growth_tracker_, found_inf_, 2.0, 0.5, 2000);
      }
      torch::cuda::synchronize();
      return;
    }
    for (auto& s : layers_) {
      for (auto& p : s.params) {
        if (!p.grad.defined()) continue;
        p.momentum.mul_(0.9).add_(p.grad, scale);
        p.value.add_(p.momentum, -kLearningRate);
      }
    }
  }

  const std::vector<GradientBuffer>& gradients() const override { return gradients_; }

  double loss() override {
    double sum = 0;
    for (const auto& s : layers_) {
      if (s.kind == Kind::kLoss && s.out.defined()) sum += s.out.sum().item<double>();
    }
    return sum;
  }

  double bytes() const override {
    double b = 0;
    for (const auto& s : layers_) {
      if (s.out.defined()) b += static_cast<double>(s.out.nbytes());
      for (const auto& p : s.params) {
        if (!p.grad.defined()) continue;
        b += 3.0 * static_cast<double>(p.value.nbytes());
      }
    }
    return b;
  }

  std::string device() const override {
    if (options_.cuda) {
      return fmt::format("cuda:0 (libtorch {}, {}{})", torch_version(),
                         options_.precision == StepPrecision::kAmp    ? "amp float16"
                         : options_.precision == StepPrecision::kBf16 ? "amp bfloat16"
                         : options_.precision == StepPrecision::kTf32 ? "float32 with TF32"
                                                                      : "float32",
                         options_.autocast() || tf32_set_ ? "" : ", TF32 as the library defaults");
    }
    return fmt::format("cpu (libtorch {}, {} thread{})", torch_version(), options_.threads,
                       options_.threads == 1 ? "" : "s");
  }

  void to_host(int g, float* dst) override {
    const auto& b = gradients_.at(static_cast<std::size_t>(g));
    if (options_.cuda) {
      at::from_blob(dst, {b.elements}, at::TensorOptions().dtype(at::kFloat))
          .copy_(gradient_tensors_.at(static_cast<std::size_t>(g)));
      return;
    }
    if (b.data != dst) std::memcpy(dst, b.data, static_cast<std::size_t>(b.elements) * 4);
  }
  void from_host(int g, const float* src) override {
    const auto& b = gradients_.at(static_cast<std::size_t>(g));
    if (options_.cuda) {
      gradient_tensors_.at(static_cast<std::size_t>(g))
          .copy_(at::from_blob(const_cast<float*>(src), {b.elements},
                               at::TensorOptions().dtype(at::kFloat)));
      return;
    }
    if (b.data != src) std::memcpy(b.data, src, static_cast<std::size_t>(b.elements) * 4);
  }
  bool host_memory() const override { return !options_.cuda; }

  void start_layer_timing() override {
    timing_ = true;
    for (auto& s : layers_) s.forward_s = s.backward_s = s.forward_host_s = s.backward_host_s = 0;
  }
  std::vector<LayerTime> layer_times() override {
    std::vector<LayerTime> out;
    for (auto v : graph_.order()) {
      const auto& s = layers_[v];
      out.push_back({graph_.layer(v).name, s.op, s.forward_s, s.backward_s, s.forward_host_s,
                     s.backward_host_s});
    }
    return out;
  }

 private:
  static constexpr double kLearningRate = 0.01;

  at::ScalarType autocast_dtype() const {
    return options_.precision == StepPrecision::kBf16 ? at::kBFloat16 : at::kHalf;
  }

  void build();
  void forward(std::size_t v);
  void backward(std::size_t v);
  at::Tensor input(std::size_t v, std::size_t i) { return layers_[graph_.layer(v).inputs[i]].out; }

  // Layer timing. On the CPU the wall clock around each layer. On CUDA an event after each
  // layer's kernels on the current stream and one at the start of the pass, read once the pass
  // is done: a layer's time is the stream's time from the previous layer's end to its own, the
  // gaps where the GPU waited for the host's launches included, with no synchronization between
  // layers. A libtorch whose events cannot be timed synchronizes around each layer instead.
  bool events() const { return options_.cuda && !events_.empty(); }
  c10::Stream stream() const {
    return c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getStream(device_);
  }
  void pass_start() {
    if (timing_ && events()) events_.back().record(stream());
  }
  std::chrono::steady_clock::time_point layer_start() const {
    if (timing_ && options_.cuda && !events()) torch::cuda::synchronize();
    return std::chrono::steady_clock::now();
  }
  void layer_end(std::size_t v, std::chrono::steady_clock::time_point t0, double LayerState::*sum) {
    if (!timing_) return;
    if (events()) {
      events_[v].record(stream());
      // The host's time issuing the layer's kernels (its ATen calls return once they are
      // queued): the dispatch cost that bounds a step whose kernels are shorter.
      layers_[v].*(sum == &LayerState::forward_s ? &LayerState::forward_host_s
                                                 : &LayerState::backward_host_s) += since(t0);
      return;
    }
    if (options_.cuda) torch::cuda::synchronize();
    layers_[v].*sum += since(t0);
  }
  void pass_end(double LayerState::*sum) {
    if (!timing_ || !events()) return;
    torch::cuda::synchronize();
    const c10::Event* previous = &events_.back();
    const auto& order = graph_.order();
    const bool reverse = sum == &LayerState::backward_s;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const auto v = reverse ? order[order.size() - 1 - i] : order[i];
      layers_[v].*sum += elapsed_s(*previous, events_[v]);
      previous = &events_[v];
    }
  }

  const model::LayerGraph& graph_;
  std::int64_t batch_;
  TorchStepOptions options_;
  at::Device device_ = at::Device(at::kCPU);
  bool tf32_set_ = false;  // TF32 switched as the precision asks
  bool timing_ = false;
  std::vector<LayerState> layers_;
  std::vector<GradientBuffer> gradients_;
  std::vector<at::Tensor> gradient_tensors_;  // gradient g's tensor
  // The optimizer's tensors, one per owned parameter (CUDA's foreach update).
  std::vector<at::Tensor> values_, grads_, momenta_;
  std::vector<c10::Event> events_;                      // one per layer, then the pass's start
  at::Tensor loss_scale_, growth_tracker_, found_inf_;  // GradScaler's state under amp
};

void TorchStep::build() {
  layers_.resize(graph_.size());
  const auto stats = model::analyze(graph_, batch_, Precision::kFp32);
  const auto gradient_index = model::gradient_index(stats);
  gradients_.resize(stats.gradients.size());
  // Token ids below the smallest vocabulary that reads them.
  std::int64_t vocab = std::numeric_limits<std::int64_t>::max();
  for (auto v : graph_.order()) {
    const auto& l = graph_.layer(v);
    if (l.op->kind() == "embedding")
      vocab = std::min(vocab, l.op->attributes().at("vocab").get<std::int64_t>());
  }
  const auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device_);
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device_);
  gradient_tensors_.resize(stats.gradients.size());
  for (auto v : graph_.order()) {
    const auto& l = graph_.layer(v);
    auto& s = layers_[v];
    s.op = l.op->kind();
    const auto k = kinds().find(s.op);
    if (k == kinds().end()) {
      fail_at(l.where, l.name,
              fmt::format("the libtorch step has no kernel for op '{}' (it runs: {})", s.op,
                          fmt::join(torch_ops(), ", ")));
    }
    s.kind = k->second;
    s.attrs = l.op->attributes();
    for (const auto& p : l.params) {
      Param q;
      if (p.tied && l.tied_to) {
        q.owner_layer = *l.tied_to;
        q.owner_index = 0;
        q.value = layers_[*l.tied_to].params.at(0).value;
      } else {
        // Small values, as an initializer's: the kernels' times do not depend on them.
        q.value = (torch::randn(p.shape, f32) * 0.05).requires_grad_(true);
        if (s.kind == Kind::kBatchNorm || s.kind == Kind::kLayerNorm) {
          q.value = (p.name == "weight" ? torch::ones(p.shape, f32) : torch::zeros(p.shape, f32))
                        .requires_grad_(true);
        }
        q.grad = torch::zeros(p.shape, f32);
        q.momentum = torch::zeros(p.shape, f32);
      }
      s.params.push_back(q);
      const auto gi = gradient_index.find({v, p.name});
      if (gi != gradient_index.end()) {
        auto& gb = gradients_[static_cast<std::size_t>(gi->second)];
        const auto& owner = s.params.back();
        gb.data = owner.grad.defined() ? owner.grad.data_ptr<float>() : nullptr;
        gradient_tensors_[static_cast<std::size_t>(gi->second)] = owner.grad;
        gb.value = owner.value.data_ptr<float>();
        gb.elements = owner.value.numel();
        gb.layer = l.name;
        gb.tensor = p.name;
        s.gradient_indices.push_back(gi->second);
      }
    }
    std::sort(s.gradient_indices.begin(), s.gradient_indices.end());
    if (s.kind == Kind::kInput) {
      const auto shape = with_batch(batch_, l.output.shape);
      s.out = l.output.dtype == model::DType::kInt64
                  ? torch::randint(0, vocab == std::numeric_limits<std::int64_t>::max() ? 2 : vocab,
                                   shape, i64)
                  : torch::randn(shape, f32);
    }
    if (s.kind == Kind::kBatchNorm) {
      const auto channels = l.output.shape.at(0);
      s.running_mean = torch::zeros({channels}, f32);
      s.running_var = torch::ones({channels}, f32);
    }
    if (s.kind == Kind::kLoss) {
      const auto& in = graph_.layer(l.inputs.at(0)).output.shape;
      const auto classes = in.back();
      const auto rows = batch_ * static_cast<std::int64_t>(model::numel(in)) / classes;
      s.labels = torch::randint(0, classes, {rows}, i64);
    }
    for (auto& p : s.params) {
      if (!p.grad.defined()) continue;
      values_.push_back(p.value);
      grads_.push_back(p.grad);
      momenta_.push_back(p.momentum);
    }
  }
  if (options_.scaler()) {
    loss_scale_ = torch::full({1}, 65536.0, f32);  // GradScaler's init_scale
    growth_tracker_ = torch::zeros({1}, i64.dtype(torch::kInt32));
    found_inf_ = torch::zeros({1}, f32);
  }
  // In place: ReLU and add whose first input is read by nothing else and made by a layer whose
  // backward needs its input, not its output (convolution, linear, normalization, add).
  std::vector<int> readers(graph_.size(), 0);
  for (auto v : graph_.order()) {
    for (auto u : graph_.layer(v).inputs) ++readers[u];
  }
  for (auto v : graph_.order()) {
    auto& s = layers_[v];
    const auto& l = graph_.layer(v);
    if (s.op != "relu" && s.kind != Kind::kAdd) continue;
    const auto u = l.inputs.at(0);
    const auto k = layers_[u].kind;
    s.in_place =
        readers[u] == 1 && (k == Kind::kConv || k == Kind::kLinear || k == Kind::kBatchNorm ||
                            k == Kind::kLayerNorm || (k == Kind::kAdd && layers_[u].in_place));
  }
  for (auto& gb : gradients_) {
    if (gb.data == nullptr) {
      throw std::logic_error("libtorch step: a gradient of model::analyze() has no buffer");
    }
  }
}

void TorchStep::forward(std::size_t v) {
  auto& s = layers_[v];
  const auto& l = graph_.layer(v);
  if (s.kind == Kind::kInput) return;
  if (s.in_place) {
    // On the first input's storage, outside autograd (its producer's graph does not read it).
    at::NoGradGuard no_grad;
    at::Tensor y = layers_[l.inputs[0]].out.detach();
    if (s.kind == Kind::kAdd) {
      for (std::size_t i = 1; i < l.inputs.size(); ++i) y.add_(layers_[l.inputs[i]].out.detach());
    } else {
      at::relu_(y);
    }
    s.leaves.clear();
    s.leaf_source.clear();
    s.out = y;
    return;
  }
  // Inputs that need a gradient enter as leaves of this layer's own graph.
  std::vector<at::Tensor> in;
  s.leaves.clear();
  s.leaf_source.clear();
  for (auto u : l.inputs) {
    at::Tensor x = layers_[u].out;
    if (graph_.layer(u).requires_grad) {
      x = x.detach().requires_grad_(true);
      s.leaves.push_back(x);
      s.leaf_source.push_back(u);
    }
    in.push_back(x);
  }
  const auto& a = s.attrs;
  const auto param = [&](std::size_t i) {
    return s.params.size() > i ? s.params[i].value : at::Tensor();
  };
  at::Tensor y;
  switch (s.kind) {
    case Kind::kInput:
      return;
    case Kind::kConv:
      y = at::conv2d(in[0], param(0), param(1), ints(a.at("stride")), ints(a.at("padding")),
                     ints(a.at("dilation")), a.at("groups").get<std::int64_t>());
      break;
    case Kind::kLinear:
      y = at::linear(in[0], param(0), param(1));
      break;
    case Kind::kMatmul:
      y = at::matmul(in[0], a.at("transpose_b").get<bool>() ? in[1].transpose(-1, -2) : in[1]);
      break;
    case Kind::kEmbedding: {
      // BERT's embeddings: word + position + token type (all type 0), three lookups summed.
      const auto seq = in[0].size(1);
      y = at::embedding(param(0), in[0]);
      if (s.params.size() > 1) {
        y = y + at::embedding(param(1), at::arange(seq, in[0].options()));
      }
      if (s.params.size() > 2) {
        y = y + at::embedding(param(2), at::zeros_like(in[0]));
      }
      break;
    }
    case Kind::kScores: {  // q [B, S, d], k [B, T, d] -> [B, h, S, T]
      const auto h = a.at("heads").get<std::int64_t>();
      const auto S = in[0].size(1), T = in[1].size(1), d = in[0].size(2), dh = d / h;
      const auto q = in[0].view({batch_, S, h, dh}).transpose(1, 2);
      const auto kk = in[1].view({batch_, T, h, dh}).transpose(1, 2);
      y = at::matmul(q, kk.transpose(-1, -2)) / std::sqrt(static_cast<double>(dh));
      if (a.value("causal", false)) {
        const auto mask = at::ones({S, T}, in[0].options().dtype(torch::kBool)).triu(1);
        y = y.masked_fill(mask, -1e4);
      }
      break;
    }
    case Kind::kContext: {  // p [B, h, S, T], v [B, T, d] -> [B, S, d]
      const auto h = a.at("heads").get<std::int64_t>();
      const auto S = in[0].size(2), T = in[1].size(1), d = in[1].size(2), dh = d / h;
      const auto vv = in[1].view({batch_, T, h, dh}).transpose(1, 2);
      y = at::matmul(in[0], vv).transpose(1, 2).reshape({batch_, S, d});
      break;
    }
    case Kind::kActivation:
      if (s.op == "relu")
        y = at::relu(in[0]);
      else if (s.op == "relu6")
        y = at::hardtanh(in[0], 0, 6);
      else if (s.op == "sigmoid")
        y = at::sigmoid(in[0]);
      else if (s.op == "tanh")
        y = at::tanh(in[0]);
      else if (s.op == "gelu")
        y = at::gelu(in[0]);
      else
        y = at::silu(in[0]);
      break;
    case Kind::kDropout:
      y = at::dropout(in[0], a.at("p").get<double>(), true);
      break;
    case Kind::kAdd:
      y = in[0];
      for (std::size_t i = 1; i < in.size(); ++i) y = y + in[i];
      break;
    case Kind::kConcat:
      y = at::cat(in, batched_axis(a.at("axis").get<std::int64_t>()));
      break;
    case Kind::kSoftmax:
      y = at::softmax(in[0], batched_axis(a.at("axis").get<std::int64_t>()));
      break;
    case Kind::kLoss: {  // nn.CrossEntropyLoss over every row, per sample the mean
      const auto classes = in[0].size(-1);
      y = at::cross_entropy_loss(in[0].reshape({-1, classes}), s.labels, {}, at::Reduction::None)
              .view({batch_, -1})
              .mean(1);
      break;
    }
    case Kind::kBatchNorm:
      y = at::batch_norm(in[0], param(0), param(1), s.running_mean, s.running_var, true, 0.1,
                         a.at("eps").get<double>(), false);
      break;
    case Kind::kLayerNorm:
      y = at::layer_norm(in[0], {in[0].size(-1)}, param(0), param(1), a.at("eps").get<double>());
      break;
    case Kind::kMaxPool:
      y = at::max_pool2d(in[0], ints(a.at("kernel")), ints(a.at("stride")), ints(a.at("padding")),
                         ints(a.at("dilation")), a.at("ceil_mode").get<bool>());
      break;
    case Kind::kAvgPool:
      y = at::avg_pool2d(in[0], ints(a.at("kernel")), ints(a.at("stride")), ints(a.at("padding")),
                         a.at("ceil_mode").get<bool>(), a.at("count_include_pad").get<bool>());
      break;
    case Kind::kAdaptivePool:
      y = at::adaptive_avg_pool2d(
          in[0], a.contains("output") ? ints(a.at("output")) : std::vector<std::int64_t>{1, 1});
      break;
    case Kind::kLrn: {  // torch.nn.functional.local_response_norm on [B, C, H, W]
      const auto size = a.at("size").get<std::int64_t>();
      const auto x = in[0];
      auto div = x.mul(x).view({batch_, 1, x.size(1), x.size(2), -1});
      div = at::constant_pad_nd(div, {0, 0, 0, 0, size / 2, (size - 1) / 2});
      div = at::avg_pool3d(div, {size, 1, 1}, {1, 1, 1}).squeeze(1).view(x.sizes());
      div = div.mul(a.at("alpha").get<double>())
                .add(a.at("k").get<double>())
                .pow(a.at("beta").get<double>());
      y = x / div;
      break;
    }
    case Kind::kView:
      y = in[0];
      break;
  }
  const auto shape = with_batch(batch_, l.output.shape);
  if (y.sizes() != at::IntArrayRef(shape)) y = y.reshape(shape);
  s.out = y;
}

void TorchStep::backward(std::size_t v) {
  auto& s = layers_[v];
  if (s.kind == Kind::kInput || !graph_.layer(v).requires_grad) return;
  if (s.kind == Kind::kLoss) {
    // d(sum of losses) / d(loss), times the loss scale under amp (GradScaler.scale(loss)).
    s.grad = options_.scaler() ? at::ones_like(s.out) * loss_scale_ : at::ones_like(s.out);
  }
  if (s.in_place) {
    if (!s.grad.defined()) return;
    const auto& l = graph_.layer(v);
    at::NoGradGuard no_grad;
    // ReluBackward0: threshold_backward(grad, result, 0); add passes the gradient on.
    const at::Tensor g = s.kind == Kind::kAdd ? s.grad : at::threshold_backward(s.grad, s.out, 0);
    for (auto u : l.inputs) {
      if (!graph_.layer(u).requires_grad) continue;
      auto& src = layers_[u].grad;
      src = src.defined() ? src + g : g;
    }
    s.grad = at::Tensor();
    return;
  }
  std::vector<at::Tensor> wrt = s.leaves;
  for (const auto& p : s.params) wrt.push_back(p.value);
  if (!s.grad.defined() || wrt.empty()) {
    // Nothing downstream reads this layer: its parameters' gradients are zero.
    for (auto& p : s.params) {
      auto& owner = p.owner_layer == SIZE_MAX ? p : layers_[p.owner_layer].params[p.owner_index];
      if (!owner.written) owner.grad.zero_();
      owner.written = true;
    }
    return;
  }
  const auto grads = torch::autograd::grad({s.out}, wrt, {s.grad}, false, false, true);
  for (std::size_t i = 0; i < s.leaves.size(); ++i) {
    if (!grads[i].defined()) continue;
    auto& src = layers_[s.leaf_source[i]].grad;
    src = src.defined() ? src + grads[i] : grads[i];
  }
  at::NoGradGuard no_grad;
  for (std::size_t j = 0; j < s.params.size(); ++j) {
    auto& p = s.params[j];
    auto& owner = p.owner_layer == SIZE_MAX ? p : layers_[p.owner_layer].params[p.owner_index];
    const auto& g = grads[s.leaves.size() + j];
    if (!g.defined()) {
      if (!owner.written) owner.grad.zero_();
    } else if (owner.written) {
      owner.grad.add_(g);
    } else {
      owner.grad.copy_(g);
    }
    owner.written = true;
  }
  s.grad = at::Tensor();
}

}  // namespace

bool have_torch() { return true; }

std::string torch_version() { return TORCH_VERSION; }

const std::vector<std::string>& torch_ops() { return step_ops(); }

bool torch_has_cuda() { return torch::cuda::is_available(); }

std::unique_ptr<TrainingStep> make_torch_step(const model::LayerGraph& graph, std::int64_t batch,
                                              std::uint64_t seed, const TorchStepOptions& options) {
  return std::make_unique<TorchStep>(graph, batch, seed, options);
}

}  // namespace dlsim::calibrate
