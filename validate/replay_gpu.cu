// The replay's training step on a GPU (docs/validate-replay.md, "On a GPU"). One device, one
// stream; every kernel of a step is issued asynchronously and the host waits only at the end of
// the forward pass, at the end of the backward pass, for a gradient the exchange reads, and at
// the end of the update.
//
// Per op:
//   conv2d      cudnnConvolutionForward / BackwardFilter / BackwardData with the algorithm
//               cudnnFind*Algorithm measures fastest (PyTorch's cudnn.benchmark), CUDNN_FMA_MATH
//               (no TF32); bias through cudnnAddTensor and cudnnConvolutionBackwardBias
//   batchnorm   cudnnBatchNormalizationForwardTraining / Backward (spatial)
//   lrn         cudnnLRNCrossChannelForward / Backward
//   linear, matmul, attention
//               cublasSgemm(StridedBatched) in cuBLAS's default math (no TF32), row-major
//               operands as transposed column-major ones
//   pooling, layernorm, softmax, cross-entropy, activations, dropout, add, concat, embedding,
//   the SGD-momentum update
//               CUDA kernels below (one thread per output element, or one block per row)
// The layouts, gradient accumulation and backward order follow the CPU step
// (validate/replay_cpu.cpp); the values are synthetic.

#include "calibrate/step_ops.hpp"
#include "validate/replay_gpu.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/analysis.hpp"

namespace dlsim::validate {
namespace {

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", call, cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("{}: {}", call, cublasGetStatusString(s)));
  }
}
void check(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("{}: {}", call, cudnnGetErrorString(s)));
  }
}

std::int64_t elems(const model::Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

unsigned blocks(std::int64_t n, int threads = 256) {
  return static_cast<unsigned>(std::max<std::int64_t>(1, (n + threads - 1) / threads));
}

// ---- kernels ----

__device__ inline float hash_uniform(std::uint64_t seed, std::int64_t i) {
  std::uint64_t z = seed + static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / 16777216.0f;  // splitmix64 (Vigna)
}

__global__ void k_set(float* p, std::int64_t n, float v) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = v;
}

__global__ void k_fill(float* p, std::int64_t n, std::uint64_t seed, float scale) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = (hash_uniform(seed, i) - 0.5f) * 2 * scale;
}

__device__ inline float act_f(int f, float x) {
  switch (f) {
    case 0:
      return x > 0 ? x : 0;  // relu
    case 1:
      return fminf(fmaxf(x, 0.0f), 6.0f);  // relu6
    case 2:
      return 1 / (1 + expf(-x));  // sigmoid
    case 3:
      return tanhf(x);  // tanh
    case 4:
      return x / (1 + expf(-x));  // silu
    default: {                    // gelu (tanh form)
      const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1 + tanhf(u));
    }
  }
}
__device__ inline float act_df(int f, float x) {
  switch (f) {
    case 0:
      return x > 0 ? 1.0f : 0.0f;
    case 1:
      return x > 0 && x < 6 ? 1.0f : 0.0f;
    case 2: {
      const float s = 1 / (1 + expf(-x));
      return s * (1 - s);
    }
    case 3: {
      const float t = tanhf(x);
      return 1 - t * t;
    }
    case 4: {
      const float s = 1 / (1 + expf(-x));
      return s * (1 + x * (1 - s));
    }
    default: {
      const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
      const float t = tanhf(u);
      return 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * 0.7978845608f * (1 + 3 * 0.044715f * x * x);
    }
  }
}

__global__ void k_act(int f, const float* x, float* y, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = act_f(f, x[i]);
}
__global__ void k_act_back(int f, const float* x, const float* dy, float* dx, std::int64_t n,
                           bool add) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float g = dy[i] * act_df(f, x[i]);
    dx[i] = add ? dx[i] + g : g;
  }
}
__global__ void k_dropout(const float* x, float* y, float* mask, std::int64_t n, std::uint64_t seed,
                          float p) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float m = hash_uniform(seed, i) < p ? 0.0f : 1.0f / (1.0f - p);
    mask[i] = m;
    y[i] = x[i] * m;
  }
}
// dst (+)= a * b (b may be null: dst (+)= a)
__global__ void k_mul(const float* a, const float* b, float* dst, std::int64_t n, bool add) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    const float v = b ? a[i] * b[i] : a[i];
    dst[i] = add ? dst[i] + v : v;
  }
}
// Rows of `rows` x `width` copied between a packed array and a strided slab, adding or not.
__global__ void k_slab(const float* src, std::int64_t src_stride, float* dst,
                       std::int64_t dst_stride, std::int64_t rows, std::int64_t width, bool add) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < rows * width) {
    const std::int64_t r = i / width, c = i % width;
    const float v = src[r * src_stride + c];
    float& d = dst[r * dst_stride + c];
    d = add ? d + v : v;
  }
}
__global__ void k_add_bias_rows(float* y, const float* b, std::int64_t rows, std::int64_t n) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < rows * n) y[i] += b[i % n];
}

struct Win {
  int kh, kw, sh, sw, ph, pw;
  bool adaptive, max, count_pad;
};
__device__ inline void window(const Win& w, int oy, int ox, int ih, int iw, int oh, int ow, int& y0,
                              int& y1, int& x0, int& x1) {
  if (w.adaptive) {
    y0 = oy * ih / oh;
    y1 = ((oy + 1) * ih + oh - 1) / oh;
    x0 = ox * iw / ow;
    x1 = ((ox + 1) * iw + ow - 1) / ow;
    return;
  }
  const int a = oy * w.sh - w.ph, b = ox * w.sw - w.pw;
  y0 = max(a, 0);
  y1 = min(a + w.kh, ih);
  x0 = max(b, 0);
  x1 = min(b + w.kw, iw);
}
__global__ void k_pool(Win w, const float* x, float* y, int* arg, std::int64_t planes, int ih,
                       int iw, int oh, int ow) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= planes * oh * ow) return;
  const std::int64_t p = i / (oh * ow);
  const int oy = static_cast<int>(i / ow % oh), ox = static_cast<int>(i % ow);
  int y0, y1, x0, x1;
  window(w, oy, ox, ih, iw, oh, ow, y0, y1, x0, x1);
  const float* xp = x + p * ih * iw;
  if (w.max) {
    float best = -INFINITY;
    int at = 0;
    for (int yy = y0; yy < y1; ++yy)
      for (int xx = x0; xx < x1; ++xx)
        if (xp[yy * iw + xx] > best) {
          best = xp[yy * iw + xx];
          at = yy * iw + xx;
        }
    y[i] = best;
    arg[i] = at;
  } else {
    float s = 0;
    for (int yy = y0; yy < y1; ++yy)
      for (int xx = x0; xx < x1; ++xx) s += xp[yy * iw + xx];
    const int n = w.count_pad ? w.kh * w.kw : (y1 - y0) * (x1 - x0);
    y[i] = s / static_cast<float>(max(n, 1));
  }
}
__global__ void k_pool_back(Win w, const float* dy, const int* arg, float* dx, std::int64_t planes,
                            int ih, int iw, int oh, int ow) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= planes * oh * ow) return;
  const std::int64_t p = i / (oh * ow);
  float* dxp = dx + p * ih * iw;
  if (w.max) {
    atomicAdd(dxp + arg[i], dy[i]);
    return;
  }
  const int oy = static_cast<int>(i / ow % oh), ox = static_cast<int>(i % ow);
  int y0, y1, x0, x1;
  window(w, oy, ox, ih, iw, oh, ow, y0, y1, x0, x1);
  const int n = w.count_pad ? w.kh * w.kw : (y1 - y0) * (x1 - x0);
  const float g = dy[i] / static_cast<float>(max(n, 1));
  for (int yy = y0; yy < y1; ++yy)
    for (int xx = x0; xx < x1; ++xx) atomicAdd(dxp + yy * iw + xx, g);
}

// One block per row: block-wide sum of `v`.
__device__ float block_sum(float v) {
  __shared__ float s[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? s[threadIdx.x] : 0.0f;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  const float r = total;
  __syncthreads();
  return r;
}
__device__ float block_max(float v) {
  __shared__ float s[32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
  if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? s[threadIdx.x] : -INFINITY;
  if (threadIdx.x < 32)
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, o));
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  const float r = total;
  __syncthreads();
  return r;
}
__global__ void k_softmax(const float* x, float* p, int len) {
  const float* xr = x + blockIdx.x * static_cast<std::int64_t>(len);
  float* pr = p + blockIdx.x * static_cast<std::int64_t>(len);
  float m = -INFINITY;
  for (int c = threadIdx.x; c < len; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_max(m);
  float s = 0;
  for (int c = threadIdx.x; c < len; c += blockDim.x) s += (pr[c] = expf(xr[c] - m));
  s = block_sum(s);
  for (int c = threadIdx.x; c < len; c += blockDim.x) pr[c] /= s;
}
__global__ void k_softmax_back(const float* p, const float* dy, float* dx, int len, bool add) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(len);
  float dot = 0;
  for (int c = threadIdx.x; c < len; c += blockDim.x) dot += dy[o + c] * p[o + c];
  dot = block_sum(dot);
  for (int c = threadIdx.x; c < len; c += blockDim.x) {
    const float g = p[o + c] * (dy[o + c] - dot);
    dx[o + c] = add ? dx[o + c] + g : g;
  }
}
// Per row: loss -log p[label]; the sample's loss is the mean over its rows.
__global__ void k_xent(const float* p, const int* labels, float* row_loss, int len) {
  if (threadIdx.x == 0) {
    row_loss[blockIdx.x] =
        -logf(p[blockIdx.x * static_cast<std::int64_t>(len) + labels[blockIdx.x]] + 1e-30f);
  }
}
__global__ void k_xent_back(const float* p, const int* labels, float* dx, int len, float scale,
                            bool add) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(len);
  for (int c = threadIdx.x; c < len; c += blockDim.x) {
    const float g = scale * (p[o + c] - (c == labels[blockIdx.x] ? 1.0f : 0.0f));
    dx[o + c] = add ? dx[o + c] + g : g;
  }
}
__global__ void k_layernorm(const float* x, float* y, const float* g, const float* b, float* stats,
                            int len) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(len);
  float s = 0, q = 0;
  for (int c = threadIdx.x; c < len; c += blockDim.x) s += x[o + c];
  s = block_sum(s);
  const float mean = s / len;
  for (int c = threadIdx.x; c < len; c += blockDim.x) {
    const float d = x[o + c] - mean;
    q += d * d;
  }
  q = block_sum(q);
  const float inv = rsqrtf(q / len + 1e-5f);
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = inv;
  }
  for (int c = threadIdx.x; c < len; c += blockDim.x) {
    y[o + c] = (x[o + c] - mean) * inv * (g ? g[c] : 1.0f) + (b ? b[c] : 0.0f);
  }
}
__global__ void k_layernorm_back(const float* x, const float* dy, const float* g,
                                 const float* stats, float* dx, float* dg, float* db, int len,
                                 bool add) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(len);
  const float mean = stats[2 * blockIdx.x], inv = stats[2 * blockIdx.x + 1];
  float s1 = 0, s2 = 0;
  for (int c = threadIdx.x; c < len; c += blockDim.x) {
    const float xh = (x[o + c] - mean) * inv;
    const float gy = dy[o + c] * (g ? g[c] : 1.0f);
    s1 += gy;
    s2 += gy * xh;
    if (dg) {
      atomicAdd(dg + c, dy[o + c] * xh);
      atomicAdd(db + c, dy[o + c]);
    }
  }
  s1 = block_sum(s1);
  s2 = block_sum(s2);
  if (!dx) return;
  for (int c = threadIdx.x; c < len; c += blockDim.x) {
    const float xh = (x[o + c] - mean) * inv;
    const float gy = dy[o + c] * (g ? g[c] : 1.0f);
    const float v = inv / len * (len * gy - s1 - xh * s2);
    dx[o + c] = add ? dx[o + c] + v : v;
  }
}
__global__ void k_embed(const int* ids, const float* word, const float* pos, const float* type,
                        float* y, std::int64_t rows, int seq, int dim, int pos_rows) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * dim) return;
  const std::int64_t r = i / dim;
  const int c = static_cast<int>(i % dim);
  float v = word[static_cast<std::int64_t>(ids[r]) * dim + c];
  if (pos) v += pos[static_cast<std::int64_t>(r % seq % pos_rows) * dim + c];
  if (type) v += type[c];
  y[i] = v;
}
__global__ void k_embed_back(const int* ids, const float* dy, float* dword, float* dpos,
                             float* dtype, std::int64_t rows, int seq, int dim, int pos_rows) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows * dim) return;
  const std::int64_t r = i / dim;
  const int c = static_cast<int>(i % dim);
  atomicAdd(dword + static_cast<std::int64_t>(ids[r]) * dim + c, dy[i]);
  if (dpos) atomicAdd(dpos + static_cast<std::int64_t>(r % seq % pos_rows) * dim + c, dy[i]);
  if (dtype) atomicAdd(dtype + c, dy[i]);
}
__global__ void k_sgd(float* w, const float* g, float* m, std::int64_t n, float scale) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    m[i] = 0.9f * m[i] + scale * g[i];
    w[i] -= 1e-4f * m[i];
  }
}

// ---- host side ----

struct DeviceArray {
  float* p = nullptr;
  std::int64_t n = 0;
  DeviceArray() = default;
  explicit DeviceArray(std::int64_t count) : n(count) {
    if (n > 0) check(cudaMalloc(&p, static_cast<std::size_t>(n) * sizeof(float)), "cudaMalloc");
  }
  DeviceArray(DeviceArray&& o) noexcept : p(o.p), n(o.n) {
    o.p = nullptr;
    o.n = 0;
  }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~DeviceArray() {
    if (p) cudaFree(p);
  }
};

using Kind = calibrate::OpKind;

struct Param {
  DeviceArray value, grad, momentum;
  float* value_p = nullptr;
  float* grad_p = nullptr;
  std::int64_t elements = 0;
  bool tied_target = false;
};

struct Layer {
  Kind kind = Kind::kInput;
  std::string op;
  int act_fn = 0;
  std::int64_t out = 0;  // elements per sample
  DeviceArray act, grad, saved, spare;
  std::size_t alias = SIZE_MAX;
  std::vector<Param> params;
  std::vector<int> gradients;
  bool grad_written = false;
  cudaEvent_t done = nullptr;  // the layer's backward kernels are complete
  cudaEvent_t marks[4] = {};   // before/after forward, before/after backward
  double forward_s = 0, backward_s = 0;
  // cuDNN state
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnLRNDescriptor_t lrn = nullptr;
  Win win{};
  int* arg = nullptr;  // max pooling's arg-max / loss labels
  std::int64_t heads = 1, axis = 0;
  float p = 0;  // dropout
};

class GpuStep final : public TrainingStep {
 public:
  GpuStep(const model::LayerGraph& graph, std::int64_t batch, std::uint64_t seed)
      : g_(graph), batch_(batch), seed_(seed) {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&cublas_), "cublasCreate");
    check(cublasSetStream(cublas_, stream_), "cublasSetStream");
    check(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check(cudnnCreate(&cudnn_), "cudnnCreate");
    check(cudnnSetStream(cudnn_, stream_), "cudnnSetStream");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    device_ = fmt::format("{} (cuDNN {}, cuBLAS, CUDA runtime {})", prop.name, cudnnGetVersion(),
                          CUDART_VERSION);
    build();
  }
  ~GpuStep() override {
    cudaStreamSynchronize(stream_);
    for (auto& l : layers_) {
      if (l.x) cudnnDestroyTensorDescriptor(l.x);
      if (l.y) cudnnDestroyTensorDescriptor(l.y);
      if (l.bias) cudnnDestroyTensorDescriptor(l.bias);
      if (l.w) cudnnDestroyFilterDescriptor(l.w);
      if (l.conv) cudnnDestroyConvolutionDescriptor(l.conv);
      if (l.lrn) cudnnDestroyLRNDescriptor(l.lrn);
      if (l.arg) cudaFree(l.arg);
      if (l.done) cudaEventDestroy(l.done);
      for (auto e : l.marks) {
        if (e) cudaEventDestroy(e);
      }
    }
    if (ids_) cudaFree(ids_);
    cudnnDestroy(cudnn_);
    cublasDestroy(cublas_);
    if (pinned_) cudaFreeHost(pinned_);
    cudaStreamDestroy(copy_);
    cudaStreamDestroy(stream_);
  }

  void forward() override {
    ++step_;
    for (auto v : g_.order()) {
      check(cudaEventRecord(layers_[v].marks[0], stream_), "cudaEventRecord");
      fwd(v);
      check(cudaEventRecord(layers_[v].marks[1], stream_), "cudaEventRecord");
    }
    check(cudaStreamSynchronize(stream_), "forward");
    for (auto& l : layers_) l.forward_s += elapsed(l.marks[0], l.marks[1]);
  }
  void start_layer_timing() override {
    for (auto& l : layers_) l.forward_s = l.backward_s = 0;
  }
  std::vector<LayerTime> layer_times() override {
    std::vector<LayerTime> out;
    for (auto v : g_.order()) {
      out.push_back({g_.layer(v).name, layers_[v].op, layers_[v].forward_s, layers_[v].backward_s});
    }
    return out;
  }
  void backward(const std::function<void(int)>& ready) override {
    for (auto& l : layers_) l.grad_written = false;
    const auto& order = g_.order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      check(cudaEventRecord(layers_[*it].marks[2], stream_), "cudaEventRecord");
      bwd(*it);
      auto& l = layers_[*it];
      check(cudaEventRecord(l.marks[3], stream_), "cudaEventRecord");
      if (l.gradients.empty()) continue;
      check(cudaEventRecord(l.done, stream_), "cudaEventRecord");
      for (int gi : l.gradients) {
        owner_[static_cast<std::size_t>(gi)] = *it;
        ready(gi);
      }
    }
    check(cudaStreamSynchronize(stream_), "backward");
    for (auto& l : layers_) l.backward_s += elapsed(l.marks[2], l.marks[3]);
  }
  void update(float scale) override {
    for (auto& l : layers_) {
      for (auto& p : l.params) {
        if (!p.momentum.p) continue;
        k_sgd<<<blocks(p.elements), 256, 0, stream_>>>(p.value.p, p.grad.p, p.momentum.p,
                                                       p.elements, scale);
      }
    }
    check(cudaGetLastError(), "update");
    check(cudaStreamSynchronize(stream_), "update");
  }
  const std::vector<GradientBuffer>& gradients() const override { return grads_; }
  double loss() override {
    double sum = 0;
    for (auto& l : layers_) {
      if (l.kind != Kind::kLoss) continue;
      std::vector<float> h(static_cast<std::size_t>(l.act.n));
      check(cudaMemcpy(h.data(), l.act.p, h.size() * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
      for (float x : h) sum += x;
    }
    return sum;
  }
  double bytes() const override { return bytes_; }
  std::string device() const override { return device_; }
  // Copies go through a pinned buffer on their own stream (as NCCL-less frameworks stage
  // through pinned memory): a pageable cudaMemcpy would hold up the compute stream's launches.
  void to_host(int gi, float* dst) override {
    const auto& b = grads_.at(static_cast<std::size_t>(gi));
    const std::size_t bytes = static_cast<std::size_t>(b.elements) * sizeof(float);
    pinned(bytes);
    check(cudaStreamWaitEvent(copy_, layers_[owner_[static_cast<std::size_t>(gi)]].done, 0),
          "cudaStreamWaitEvent");
    check(cudaMemcpyAsync(pinned_, b.data, bytes, cudaMemcpyDeviceToHost, copy_),
          "cudaMemcpyAsync (gradient to host)");
    check(cudaStreamSynchronize(copy_), "cudaStreamSynchronize");
    std::memcpy(dst, pinned_, bytes);
  }
  void from_host(int gi, const float* src) override {
    const auto& b = grads_.at(static_cast<std::size_t>(gi));
    const std::size_t bytes = static_cast<std::size_t>(b.elements) * sizeof(float);
    pinned(bytes);
    std::memcpy(pinned_, src, bytes);
    check(cudaMemcpyAsync(b.data, pinned_, bytes, cudaMemcpyHostToDevice, copy_),
          "cudaMemcpyAsync (gradient to device)");
    check(cudaStreamSynchronize(copy_), "cudaStreamSynchronize");
  }
  bool host_memory() const override { return false; }

 private:
  static double elapsed(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    return ms / 1000.0;
  }
  Layer& src(std::size_t v) {
    auto* l = &layers_[v];
    while (l->alias != SIZE_MAX) l = &layers_[l->alias];
    return *l;
  }
  float* act(std::size_t v) { return src(v).act.p; }
  float* grad_out(std::size_t v, bool& add) {
    auto& l = src(v);
    add = l.grad_written;
    l.grad_written = true;
    return l.grad.p;
  }
  bool needs_grad(std::size_t v) const { return g_.layer(v).requires_grad; }
  const model::Shape& in_shape(std::size_t v, std::size_t i) const {
    return g_.layer(g_.layer(v).inputs.at(i)).output.shape;
  }
  void fill(DeviceArray& a, float scale) {
    k_fill<<<blocks(a.n), 256, 0, stream_>>>(a.p, a.n, seed_ * 7919u + fills_++, scale);
  }
  // Row-major C = op(A) op(B) (+ beta C), batched with strides, as column-major C^T.
  void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, std::int64_t sa, const float* b, std::int64_t ldb,
            std::int64_t sb, float beta, float* c, std::int64_t ldc, std::int64_t sc,
            std::int64_t count) {
    const auto opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasSgemmStridedBatched(cublas_, opb, opa, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &alpha, b, static_cast<int>(ldb), sb, a,
                                    static_cast<int>(lda), sa, &beta, c, static_cast<int>(ldc), sc,
                                    static_cast<int>(count)),
          "cublasSgemmStridedBatched");
  }
  static cudnnTensorDescriptor_t tensor4(std::int64_t n, std::int64_t c, std::int64_t h,
                                         std::int64_t w) {
    cudnnTensorDescriptor_t d;
    check(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
    check(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                     static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
          "cudnnSetTensor4dDescriptor");
    return d;
  }
  // The first (fastest) algorithm cudnnFind* ran successfully; its workspace is reserved.
  template <class Perf>
  auto fastest(const Perf* perf, int found, const char* what, const std::string& layer) {
    for (int i = 0; i < found; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS) {
        workspace(perf[i].memory);
        return perf[i].algo;
      }
    }
    throw std::runtime_error(fmt::format("no cuDNN {} algorithm for {}", what, layer));
  }
  void workspace(std::size_t bytes) {
    if (bytes > ws_.n * sizeof(float)) ws_ = DeviceArray(static_cast<std::int64_t>(bytes / 4 + 1));
  }

  void pinned(std::size_t bytes) {
    if (bytes <= pinned_bytes_) return;
    if (pinned_) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    check(cudaMallocHost(&pinned_, bytes), "cudaMallocHost");
    pinned_bytes_ = bytes;
  }
  void build();
  void setup_conv(std::size_t v, Layer& l);
  void fwd(std::size_t v);
  void bwd(std::size_t v);

  const model::LayerGraph& g_;
  std::int64_t batch_;
  std::uint64_t seed_;
  std::uint64_t fills_ = 1, step_ = 0;
  cudaStream_t stream_{}, copy_{};
  void* pinned_ = nullptr;
  std::size_t pinned_bytes_ = 0;
  cublasHandle_t cublas_{};
  cudnnHandle_t cudnn_{};
  std::string device_;
  std::vector<Layer> layers_;
  std::vector<GradientBuffer> grads_;
  std::vector<std::size_t> owner_;
  DeviceArray ws_, ones_;
  int* ids_ = nullptr;
  double bytes_ = 0;
};

void GpuStep::setup_conv(std::size_t v, Layer& l) {
  const auto& lay = g_.layer(v);
  const auto a = lay.op->attributes();
  const auto k = a.at("kernel").get<std::vector<int>>(), s = a.at("stride").get<std::vector<int>>(),
             p = a.at("padding").get<std::vector<int>>(),
             d = a.at("dilation").get<std::vector<int>>();
  const int groups = a.at("groups").get<int>();
  const auto& in = in_shape(v, 0);
  const auto& out = lay.output.shape;
  l.x = tensor4(batch_, in[0], in[1], in[2]);
  l.y = tensor4(batch_, out[0], out[1], out[2]);
  check(cudnnCreateFilterDescriptor(&l.w), "cudnnCreateFilterDescriptor");
  check(
      cudnnSetFilter4dDescriptor(l.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(out[0]),
                                 static_cast<int>(in[0] / groups), k[0], k[1]),
      "cudnnSetFilter4dDescriptor");
  check(cudnnCreateConvolutionDescriptor(&l.conv), "cudnnCreateConvolutionDescriptor");
  check(cudnnSetConvolution2dDescriptor(l.conv, p[0], p[1], s[0], s[1], d[0], d[1],
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionGroupCount(l.conv, groups), "cudnnSetConvolutionGroupCount");
  check(cudnnSetConvolutionMathType(l.conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  if (l.params.size() > 1) l.bias = tensor4(1, out[0], 1, 1);
  // The fastest algorithm of each kind, measured (cudnnFind*), that runs in FMA math.
  int found = 0;
  cudnnConvolutionFwdAlgoPerf_t f[8];
  check(cudnnFindConvolutionForwardAlgorithm(cudnn_, l.x, l.w, l.conv, l.y, 8, &found, f),
        "cudnnFindConvolutionForwardAlgorithm");
  l.fwd = fastest(f, found, "forward", lay.name);
  cudnnConvolutionBwdDataAlgoPerf_t bd[8];
  check(cudnnFindConvolutionBackwardDataAlgorithm(cudnn_, l.w, l.y, l.conv, l.x, 8, &found, bd),
        "cudnnFindConvolutionBackwardDataAlgorithm");
  l.bwd_data = fastest(bd, found, "backward-data", lay.name);
  cudnnConvolutionBwdFilterAlgoPerf_t bf[8];
  check(cudnnFindConvolutionBackwardFilterAlgorithm(cudnn_, l.x, l.y, l.conv, l.w, 8, &found, bf),
        "cudnnFindConvolutionBackwardFilterAlgorithm");
  l.bwd_filter = fastest(bf, found, "backward-filter", lay.name);
}

void GpuStep::build() {
  const auto& kinds = calibrate::step_op_kinds();
  static const std::map<std::string, int> fns = {{"relu", 0}, {"relu6", 1}, {"sigmoid", 2},
                                                 {"tanh", 3}, {"silu", 4},  {"gelu", 5}};
  const auto stats = model::analyze(g_, batch_, Precision::kFp32);
  std::map<std::pair<std::size_t, std::string>, int> index;
  for (std::size_t i = 0; i < stats.gradients.size(); ++i) {
    index[{stats.gradients[i].vertex, stats.gradients[i].tensor}] = static_cast<int>(i);
  }
  grads_.resize(stats.gradients.size());
  owner_.assign(stats.gradients.size(), 0);
  layers_.resize(g_.size());
  std::int64_t max_rows = 1;
  for (auto v : g_.order()) {
    const auto& lay = g_.layer(v);
    auto& l = layers_[v];
    l.op = lay.op->kind();
    const auto k = kinds.find(l.op);
    if (k == kinds.end()) {
      fail_at(lay.where, lay.name, fmt::format("the GPU replay has no kernel for op '{}'", l.op));
    }
    l.kind = k->second;
    if (l.kind == Kind::kActivation) l.act_fn = fns.at(l.op);
    l.out = elems(lay.output.shape);
    check(cudaEventCreateWithFlags(&l.done, cudaEventDisableTiming), "cudaEventCreate");
    for (auto& e : l.marks) check(cudaEventCreate(&e), "cudaEventCreate");
    if (l.kind == Kind::kView) {
      l.alias = lay.inputs.at(0);
    } else {
      l.act = DeviceArray(batch_ * l.out);
      fill(l.act, 1.0f);
      if (l.kind != Kind::kInput) l.grad = DeviceArray(batch_ * l.out);
    }
    for (const auto& p : lay.params) {
      Param q;
      q.elements = elems(p.shape);
      if (p.tied && lay.tied_to) {
        auto& owner = layers_[*lay.tied_to].params.at(0);
        owner.tied_target = true;
        q.value_p = owner.value_p;
        q.grad_p = owner.grad_p;
      } else {
        q.value = DeviceArray(q.elements);
        fill(q.value, 0.05f);
        q.grad = DeviceArray(q.elements);
        q.momentum = DeviceArray(q.elements);
        check(cudaMemsetAsync(q.momentum.p, 0, static_cast<std::size_t>(q.elements) * 4, stream_),
              "cudaMemset");
        q.value_p = q.value.p;
        q.grad_p = q.grad.p;
        bytes_ += 12.0 * static_cast<double>(q.elements);
      }
      l.params.push_back(std::move(q));
      const auto gi = index.find({v, p.name});
      if (gi != index.end()) {
        auto& b = grads_[static_cast<std::size_t>(gi->second)];
        b.data = l.params.back().grad_p;
        b.value = l.params.back().value_p;
        b.elements = l.params.back().elements;
        b.layer = lay.name;
        b.tensor = p.name;
        l.gradients.push_back(gi->second);
      }
    }
    std::sort(l.gradients.begin(), l.gradients.end());
    const auto a = lay.op->attributes();
    const auto& out = lay.output.shape;
    switch (l.kind) {
      case Kind::kConv:
        setup_conv(v, l);
        break;
      case Kind::kMaxPool:
      case Kind::kAvgPool:
      case Kind::kAdaptivePool: {
        const bool adaptive = l.op == "adaptive_avgpool" || l.op == "global_avgpool";
        l.win.adaptive = adaptive;
        l.win.max = l.op == "maxpool";
        l.win.count_pad = l.op == "avgpool";
        if (!adaptive) {
          const auto kk = a.at("kernel").get<std::vector<int>>(),
                     st = a.at("stride").get<std::vector<int>>(),
                     pd = a.at("padding").get<std::vector<int>>();
          l.win.kh = kk[0];
          l.win.kw = kk[1];
          l.win.sh = st[0];
          l.win.sw = st[1];
          l.win.ph = pd[0];
          l.win.pw = pd[1];
        }
        if (l.win.max) {
          check(cudaMalloc(&l.arg, static_cast<std::size_t>(batch_ * l.out) * sizeof(int)),
                "cudaMalloc");
        }
        break;
      }
      case Kind::kLrn:
        check(cudnnCreateLRNDescriptor(&l.lrn), "cudnnCreateLRNDescriptor");
        check(
            cudnnSetLRNDescriptor(l.lrn, a.at("size").get<unsigned>(), a.at("alpha").get<double>(),
                                  a.at("beta").get<double>(), a.at("k").get<double>()),
            "cudnnSetLRNDescriptor");
        l.x = tensor4(batch_, out[0], out[1], out.size() > 2 ? out[2] : 1);
        break;
      case Kind::kBatchNorm: {
        std::int64_t rest = 1;
        for (std::size_t i = 1; i < out.size(); ++i) rest *= out[i];
        l.x = tensor4(batch_, out[0], rest, 1);
        l.bias = tensor4(1, out[0], 1, 1);
        l.saved = DeviceArray(2 * out[0]);
        // cuDNN writes an input gradient even where the input needs none: a scratch takes it.
        if (!needs_grad(lay.inputs.at(0))) l.spare = DeviceArray(batch_ * l.out);
        break;
      }
      case Kind::kLayerNorm:
        l.saved = DeviceArray(2 * batch_ * l.out / out.back());
        break;
      case Kind::kScores:
      case Kind::kContext:
        l.heads = a.at("heads").get<std::int64_t>();
        break;
      case Kind::kDropout:
        l.p = a.at("p").get<float>();
        l.saved = DeviceArray(batch_ * l.out);
        break;
      case Kind::kConcat:
      case Kind::kSoftmax: {
        const auto rank = static_cast<std::int64_t>(out.size());
        const auto ax = a.at("axis").get<std::int64_t>();
        l.axis = ax < 0 ? ax + rank : ax;
        break;
      }
      case Kind::kLoss: {
        const auto& in = in_shape(v, 0);
        const std::int64_t rows = batch_ * elems(in) / in.back();
        l.saved = DeviceArray(batch_ * elems(in) + rows);  // probabilities, then row losses
        std::vector<int> labels(static_cast<std::size_t>(rows));
        for (std::size_t i = 0; i < labels.size(); ++i) {
          labels[i] =
              static_cast<int>((i * 2654435761u + seed_) % static_cast<std::uint64_t>(in.back()));
        }
        check(cudaMalloc(&l.arg, labels.size() * sizeof(int)), "cudaMalloc");
        check(cudaMemcpy(l.arg, labels.data(), labels.size() * sizeof(int), cudaMemcpyHostToDevice),
              "cudaMemcpy");
        break;
      }
      case Kind::kInput:
        if (lay.output.dtype == model::DType::kInt64 && !ids_) {
          std::vector<int> ids(static_cast<std::size_t>(batch_ * l.out));
          for (std::size_t i = 0; i < ids.size(); ++i)
            ids[i] = static_cast<int>((i * 48271u + seed_) % 30000u);
          check(cudaMalloc(&ids_, ids.size() * sizeof(int)), "cudaMalloc");
          check(cudaMemcpy(ids_, ids.data(), ids.size() * sizeof(int), cudaMemcpyHostToDevice),
                "cudaMemcpy");
        }
        break;
      case Kind::kLinear: {
        const auto& in = in_shape(v, 0);
        max_rows = std::max(max_rows, batch_ * elems(in) / in.back());
        break;
      }
      default:
        break;
    }
    bytes_ += 4.0 * static_cast<double>(l.act.n + l.grad.n + l.saved.n);
  }
  ones_ = DeviceArray(max_rows);
  std::vector<float> ones(static_cast<std::size_t>(max_rows), 1.0f);
  check(cudaMemcpy(ones_.p, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  bytes_ += 4.0 * static_cast<double>(ws_.n + ones_.n);
  check(cudaStreamSynchronize(stream_), "setup");
  check(cudaGetLastError(), "setup");
}

void GpuStep::fwd(std::size_t v) {
  auto& l = layers_[v];
  const auto& lay = g_.layer(v);
  const std::int64_t n = batch_ * l.out;
  const float one = 1, zero = 0;
  switch (l.kind) {
    case Kind::kInput:
    case Kind::kView:
      return;
    case Kind::kConv:
      check(cudnnConvolutionForward(cudnn_, &one, l.x, act(lay.inputs[0]), l.w, l.params[0].value_p,
                                    l.conv, l.fwd, ws_.p, static_cast<std::size_t>(ws_.n) * 4,
                                    &zero, l.y, l.act.p),
            "cudnnConvolutionForward");
      if (l.bias) {
        check(cudnnAddTensor(cudnn_, &one, l.bias, l.params[1].value_p, &one, l.y, l.act.p),
              "cudnnAddTensor");
      }
      return;
    case Kind::kLinear: {
      const auto& in = in_shape(v, 0);
      const std::int64_t k = in.back(), o = lay.output.shape.back(), m = n / o;
      gemm(false, true, m, o, k, 1, act(lay.inputs[0]), k, 0, l.params[0].value_p, k, 0, 0, l.act.p,
           o, 0, 1);
      if (l.params.size() > 1) {
        k_add_bias_rows<<<blocks(n), 256, 0, stream_>>>(l.act.p, l.params[1].value_p, m, o);
      }
      break;
    }
    case Kind::kMatmul: {
      const auto& a = in_shape(v, 0);
      const bool tb = lay.op->attributes().at("transpose_b").get<bool>();
      const std::int64_t m = a[a.size() - 2], k = a.back(), c = lay.output.shape.back();
      const std::int64_t count = batch_ * elems(a) / (m * k);
      gemm(false, tb, m, c, k, 1, act(lay.inputs[0]), k, m * k, act(lay.inputs[1]), tb ? k : c,
           k * c, 0, l.act.p, c, m * c, count);
      break;
    }
    case Kind::kEmbedding: {
      const std::int64_t dim = lay.output.shape.back(), seq = l.out / dim;
      const float* pos = l.params.size() > 1 ? l.params[1].value_p : nullptr;
      const float* type = l.params.size() > 2 ? l.params[2].value_p : nullptr;
      const int pos_rows = l.params.size() > 1 ? static_cast<int>(l.params[1].elements / dim) : 1;
      k_embed<<<blocks(n), 256, 0, stream_>>>(ids_, l.params[0].value_p, pos, type, l.act.p,
                                              batch_ * seq, static_cast<int>(seq),
                                              static_cast<int>(dim), pos_rows);
      break;
    }
    case Kind::kScores:
    case Kind::kContext: {
      const auto& a = in_shape(v, 0);
      const auto& b = in_shape(v, 1);
      for (std::int64_t i = 0; i < batch_; ++i) {
        if (l.kind == Kind::kScores) {  // q [S, d], k [T, d] -> [h, S, T]
          const std::int64_t S = a[0], d = a[1], T = b[0], dh = d / l.heads;
          gemm(false, true, S, T, dh, 1.0f / std::sqrt(static_cast<float>(dh)),
               act(lay.inputs[0]) + i * S * d, d, dh, act(lay.inputs[1]) + i * T * d, d, dh, 0,
               l.act.p + i * l.heads * S * T, T, S * T, l.heads);
        } else {  // p [h, S, T], v [T, d] -> [S, d]
          const std::int64_t S = a[1], T = a[2], d = b[1], dh = d / l.heads;
          gemm(false, false, S, dh, T, 1, act(lay.inputs[0]) + i * l.heads * S * T, T, S * T,
               act(lay.inputs[1]) + i * T * d, d, dh, 0, l.act.p + i * S * d, d, dh, l.heads);
        }
      }
      break;
    }
    case Kind::kActivation:
      k_act<<<blocks(n), 256, 0, stream_>>>(l.act_fn, act(lay.inputs[0]), l.act.p, n);
      break;
    case Kind::kDropout:
      k_dropout<<<blocks(n), 256, 0, stream_>>>(act(lay.inputs[0]), l.act.p, l.saved.p, n,
                                                seed_ * 1000003u + step_ * 7919u + v, l.p);
      break;
    case Kind::kAdd:
      k_mul<<<blocks(n), 256, 0, stream_>>>(act(lay.inputs[0]), nullptr, l.act.p, n, false);
      for (std::size_t j = 1; j < lay.inputs.size(); ++j) {
        k_mul<<<blocks(n), 256, 0, stream_>>>(act(lay.inputs[j]), nullptr, l.act.p, n, true);
      }
      break;
    case Kind::kConcat: {
      const auto& out = lay.output.shape;
      std::int64_t outer = 1, inner = 1;
      for (std::int64_t d = 0; d < l.axis; ++d) outer *= out[static_cast<std::size_t>(d)];
      for (std::size_t d = static_cast<std::size_t>(l.axis) + 1; d < out.size(); ++d)
        inner *= out[d];
      const std::int64_t out_slab = out[static_cast<std::size_t>(l.axis)] * inner;
      std::int64_t offset = 0;
      for (std::size_t j = 0; j < lay.inputs.size(); ++j) {
        const std::int64_t slab = in_shape(v, j)[static_cast<std::size_t>(l.axis)] * inner;
        check(cudaMemcpy2DAsync(l.act.p + offset, out_slab * 4, act(lay.inputs[j]), slab * 4,
                                slab * 4, batch_ * outer, cudaMemcpyDeviceToDevice, stream_),
              "cudaMemcpy2DAsync");
        offset += slab;
      }
      break;
    }
    case Kind::kSoftmax: {
      const std::int64_t len = lay.output.shape.back();
      k_softmax<<<static_cast<unsigned>(n / len), 256, 0, stream_>>>(act(lay.inputs[0]), l.act.p,
                                                                     static_cast<int>(len));
      break;
    }
    case Kind::kLoss: {
      const auto& in = in_shape(v, 0);
      const std::int64_t len = in.back(), rows = batch_ * elems(in) / len;
      float* probs = l.saved.p;
      float* row_loss = l.saved.p + batch_ * elems(in);
      k_softmax<<<static_cast<unsigned>(rows), 256, 0, stream_>>>(act(lay.inputs[0]), probs,
                                                                  static_cast<int>(len));
      k_xent<<<static_cast<unsigned>(rows), 32, 0, stream_>>>(probs, l.arg, row_loss,
                                                              static_cast<int>(len));
      // The sample's loss: the mean of its rows' (a product with a ones vector).
      const std::int64_t per = rows / batch_;
      gemm(false, false, batch_, 1, per, 1.0f / static_cast<float>(per), row_loss, per, 0, ones_.p,
           1, 0, 0, l.act.p, 1, 0, 1);
      break;
    }
    case Kind::kBatchNorm:
      check(cudnnBatchNormalizationForwardTraining(
                cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &zero, l.x, act(lay.inputs[0]), l.x, l.act.p,
                l.bias, l.params[0].value_p, l.params[1].value_p, 0.1, nullptr, nullptr, 1e-5,
                l.saved.p, l.saved.p + lay.output.shape[0]),
            "cudnnBatchNormalizationForwardTraining");
      break;
    case Kind::kLayerNorm: {
      const std::int64_t len = lay.output.shape.back();
      k_layernorm<<<static_cast<unsigned>(n / len), 256, 0, stream_>>>(
          act(lay.inputs[0]), l.act.p, l.params.empty() ? nullptr : l.params[0].value_p,
          l.params.size() < 2 ? nullptr : l.params[1].value_p, l.saved.p, static_cast<int>(len));
      break;
    }
    case Kind::kMaxPool:
    case Kind::kAvgPool:
    case Kind::kAdaptivePool: {
      const auto& in = in_shape(v, 0);
      const auto& out = lay.output.shape;
      k_pool<<<blocks(n), 256, 0, stream_>>>(
          l.win, act(lay.inputs[0]), l.act.p, l.arg, batch_ * in[0], static_cast<int>(in[1]),
          static_cast<int>(in[2]), static_cast<int>(out[1]), static_cast<int>(out[2]));
      break;
    }
    case Kind::kLrn:
      check(cudnnLRNCrossChannelForward(cudnn_, l.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, l.x,
                                        act(lay.inputs[0]), &zero, l.x, l.act.p),
            "cudnnLRNCrossChannelForward");
      break;
  }
  check(cudaGetLastError(), lay.name.c_str());
}

void GpuStep::bwd(std::size_t v) {
  auto& l = layers_[v];
  const auto& lay = g_.layer(v);
  if (l.kind == Kind::kInput || l.kind == Kind::kView) return;
  const std::int64_t n = batch_ * l.out;
  const float one = 1, zero = 0;
  if (l.kind == Kind::kLoss) {
    k_set<<<blocks(n), 256, 0, stream_>>>(l.grad.p, n, 1.0f);  // dL/dloss = 1 per sample
    l.grad_written = true;
  }
  if (!l.grad_written) return;
  const float* dy = l.grad.p;
  bool add = false;
  switch (l.kind) {
    case Kind::kConv: {
      check(cudnnConvolutionBackwardFilter(cudnn_, &one, l.x, act(lay.inputs[0]), l.y, dy, l.conv,
                                           l.bwd_filter, ws_.p, static_cast<std::size_t>(ws_.n) * 4,
                                           &zero, l.w, l.params[0].grad_p),
            "cudnnConvolutionBackwardFilter");
      if (l.bias) {
        check(
            cudnnConvolutionBackwardBias(cudnn_, &one, l.y, dy, &zero, l.bias, l.params[1].grad_p),
            "cudnnConvolutionBackwardBias");
      }
      const auto u = lay.inputs[0];
      if (needs_grad(u)) {
        float* dx = grad_out(u, add);
        const float beta = add ? 1.0f : 0.0f;
        check(cudnnConvolutionBackwardData(cudnn_, &one, l.w, l.params[0].value_p, l.y, dy, l.conv,
                                           l.bwd_data, ws_.p, static_cast<std::size_t>(ws_.n) * 4,
                                           &beta, l.x, dx),
              "cudnnConvolutionBackwardData");
      }
      break;
    }
    case Kind::kLinear: {
      const auto& in = in_shape(v, 0);
      const std::int64_t k = in.back(), o = lay.output.shape.back(), m = n / o;
      gemm(true, false, o, k, m, 1, dy, o, 0, act(lay.inputs[0]), k, 0, 0, l.params[0].grad_p, k, 0,
           1);                    // dW = dY^T X (a tied weight writes its owner's gradient first)
      if (l.params.size() > 1) {  // db = dY^T 1
        gemm(true, false, o, 1, m, 1, dy, o, 0, ones_.p, 1, 0, 0, l.params[1].grad_p, 1, 0, 1);
      }
      const auto u = lay.inputs[0];
      if (needs_grad(u)) {
        float* dx = grad_out(u, add);
        gemm(false, false, m, k, o, 1, dy, o, 0, l.params[0].value_p, k, 0, add ? 1.0f : 0.0f, dx,
             k, 0, 1);
      }
      break;
    }
    case Kind::kMatmul: {
      const auto& a = in_shape(v, 0);
      const bool tb = lay.op->attributes().at("transpose_b").get<bool>();
      const std::int64_t m = a[a.size() - 2], k = a.back(), c = lay.output.shape.back();
      const std::int64_t count = batch_ * elems(a) / (m * k);
      if (needs_grad(lay.inputs[0])) {
        float* da = grad_out(lay.inputs[0], add);
        gemm(false, !tb, m, k, c, 1, dy, c, m * c, act(lay.inputs[1]), tb ? k : c, k * c,
             add ? 1.0f : 0.0f, da, k, m * k, count);
      }
      if (needs_grad(lay.inputs[1])) {
        float* db = grad_out(lay.inputs[1], add);
        if (tb) {  // dB (c x k) = dY^T A
          gemm(true, false, c, k, m, 1, dy, c, m * c, act(lay.inputs[0]), k, m * k,
               add ? 1.0f : 0.0f, db, k, k * c, count);
        } else {  // dB (k x c) = A^T dY
          gemm(true, false, k, c, m, 1, act(lay.inputs[0]), k, m * k, dy, c, m * c,
               add ? 1.0f : 0.0f, db, c, k * c, count);
        }
      }
      break;
    }
    case Kind::kEmbedding: {
      const std::int64_t dim = lay.output.shape.back(), seq = l.out / dim;
      for (auto& p : l.params) {
        if (!p.tied_target) {
          check(cudaMemsetAsync(p.grad_p, 0, static_cast<std::size_t>(p.elements) * 4, stream_),
                "cudaMemsetAsync");
        }
      }
      float* dpos = l.params.size() > 1 ? l.params[1].grad_p : nullptr;
      float* dtype = l.params.size() > 2 ? l.params[2].grad_p : nullptr;
      const int pos_rows = l.params.size() > 1 ? static_cast<int>(l.params[1].elements / dim) : 1;
      k_embed_back<<<blocks(n), 256, 0, stream_>>>(ids_, dy, l.params[0].grad_p, dpos, dtype,
                                                   batch_ * seq, static_cast<int>(seq),
                                                   static_cast<int>(dim), pos_rows);
      break;
    }
    case Kind::kScores:
    case Kind::kContext: {
      const auto& a = in_shape(v, 0);
      const auto& b = in_shape(v, 1);
      bool add_a = false, add_b = false;
      float* dA = needs_grad(lay.inputs[0]) ? grad_out(lay.inputs[0], add_a) : nullptr;
      float* dB = needs_grad(lay.inputs[1]) ? grad_out(lay.inputs[1], add_b) : nullptr;
      const float ba = add_a ? 1.0f : 0.0f, bb = add_b ? 1.0f : 0.0f;
      for (std::int64_t i = 0; i < batch_; ++i) {
        if (l.kind == Kind::kScores) {
          const std::int64_t S = a[0], d = a[1], T = b[0], dh = d / l.heads;
          const float sc = 1.0f / std::sqrt(static_cast<float>(dh));
          const float* dS = dy + i * l.heads * S * T;
          if (dA) {  // dQ = dS K
            gemm(false, false, S, dh, T, sc, dS, T, S * T, act(lay.inputs[1]) + i * T * d, d, dh,
                 ba, dA + i * S * d, d, dh, l.heads);
          }
          if (dB) {  // dK = dS^T Q
            gemm(true, false, T, dh, S, sc, dS, T, S * T, act(lay.inputs[0]) + i * S * d, d, dh, bb,
                 dB + i * T * d, d, dh, l.heads);
          }
        } else {
          const std::int64_t S = a[1], T = a[2], d = b[1], dh = d / l.heads;
          const float* dO = dy + i * S * d;
          if (dA) {  // dP = dO V^T
            gemm(false, true, S, T, dh, 1, dO, d, dh, act(lay.inputs[1]) + i * T * d, d, dh, ba,
                 dA + i * l.heads * S * T, T, S * T, l.heads);
          }
          if (dB) {  // dV = P^T dO
            gemm(true, false, T, dh, S, 1, act(lay.inputs[0]) + i * l.heads * S * T, T, S * T, dO,
                 d, dh, bb, dB + i * T * d, d, dh, l.heads);
          }
        }
      }
      break;
    }
    case Kind::kActivation:
    case Kind::kDropout:
    case Kind::kAdd:
      for (std::size_t j = 0; j < lay.inputs.size(); ++j) {
        const auto u = lay.inputs[j];
        if (!needs_grad(u)) continue;
        float* dx = grad_out(u, add);
        if (l.kind == Kind::kActivation) {
          k_act_back<<<blocks(n), 256, 0, stream_>>>(l.act_fn, act(u), dy, dx, n, add);
        } else {
          k_mul<<<blocks(n), 256, 0, stream_>>>(dy, l.kind == Kind::kDropout ? l.saved.p : nullptr,
                                                dx, n, add);
        }
      }
      break;
    case Kind::kConcat: {
      const auto& out = lay.output.shape;
      std::int64_t outer = 1, inner = 1;
      for (std::int64_t d = 0; d < l.axis; ++d) outer *= out[static_cast<std::size_t>(d)];
      for (std::size_t d = static_cast<std::size_t>(l.axis) + 1; d < out.size(); ++d)
        inner *= out[d];
      const std::int64_t out_slab = out[static_cast<std::size_t>(l.axis)] * inner;
      std::int64_t offset = 0;
      for (std::size_t j = 0; j < lay.inputs.size(); ++j) {
        const std::int64_t slab = in_shape(v, j)[static_cast<std::size_t>(l.axis)] * inner;
        if (needs_grad(lay.inputs[j])) {
          float* dx = grad_out(lay.inputs[j], add);
          k_slab<<<blocks(batch_ * outer * slab), 256, 0, stream_>>>(
              dy + offset, out_slab, dx, slab, batch_ * outer, slab, add);
        }
        offset += slab;
      }
      break;
    }
    case Kind::kSoftmax:
    case Kind::kLoss: {
      const auto u = lay.inputs[0];
      if (!needs_grad(u)) break;
      const auto& in = in_shape(v, 0);
      const std::int64_t len = in.back(), rows = batch_ * elems(in) / len;
      float* dx = grad_out(u, add);
      if (l.kind == Kind::kLoss) {
        // dL/dloss = 1 per sample, spread over its rows (the mean).
        k_xent_back<<<static_cast<unsigned>(rows), 256, 0, stream_>>>(
            l.saved.p, l.arg, dx, static_cast<int>(len), 1.0f / static_cast<float>(rows / batch_),
            add);
      } else {
        k_softmax_back<<<static_cast<unsigned>(rows), 256, 0, stream_>>>(
            l.act.p, dy, dx, static_cast<int>(len), add);
      }
      break;
    }
    case Kind::kBatchNorm: {
      const auto u = lay.inputs[0];
      float* dx = nullptr;
      bool a2 = false;
      if (needs_grad(u)) dx = grad_out(u, a2);
      // cuDNN wants a dx buffer; where the input needs none, the layer's own scratch takes it.
      const float bdx = a2 ? 1.0f : 0.0f;
      check(cudnnBatchNormalizationBackward(
                cudnn_, CUDNN_BATCHNORM_SPATIAL, &one, &bdx, &one, &zero, l.x, act(u), l.x, dy, l.x,
                dx ? dx : l.spare.p, l.bias, l.params[0].value_p, l.params[0].grad_p,
                l.params[1].grad_p, 1e-5, l.saved.p, l.saved.p + lay.output.shape[0]),
            "cudnnBatchNormalizationBackward");
      break;
    }
    case Kind::kLayerNorm: {
      const std::int64_t len = lay.output.shape.back();
      float* dg = l.params.empty() ? nullptr : l.params[0].grad_p;
      float* db = l.params.size() < 2 ? nullptr : l.params[1].grad_p;
      if (dg) {
        check(cudaMemsetAsync(dg, 0, static_cast<std::size_t>(len) * 4, stream_), "cudaMemset");
        check(cudaMemsetAsync(db, 0, static_cast<std::size_t>(len) * 4, stream_), "cudaMemset");
      }
      const auto u = lay.inputs[0];
      float* dx = needs_grad(u) ? grad_out(u, add) : nullptr;
      k_layernorm_back<<<static_cast<unsigned>(n / len), 256, 0, stream_>>>(
          act(u), dy, l.params.empty() ? nullptr : l.params[0].value_p, l.saved.p, dx, dg, db,
          static_cast<int>(len), add);
      break;
    }
    case Kind::kMaxPool:
    case Kind::kAvgPool:
    case Kind::kAdaptivePool: {
      const auto u = lay.inputs[0];
      if (!needs_grad(u)) break;
      const auto& in = in_shape(v, 0);
      const auto& out = lay.output.shape;
      float* dx = grad_out(u, add);
      if (!add) {
        check(cudaMemsetAsync(dx, 0, static_cast<std::size_t>(batch_ * elems(in)) * 4, stream_),
              "cudaMemsetAsync");
      }
      k_pool_back<<<blocks(n), 256, 0, stream_>>>(
          l.win, dy, l.arg, dx, batch_ * in[0], static_cast<int>(in[1]), static_cast<int>(in[2]),
          static_cast<int>(out[1]), static_cast<int>(out[2]));
      break;
    }
    case Kind::kLrn: {
      const auto u = lay.inputs[0];
      if (!needs_grad(u)) break;
      float* dx = grad_out(u, add);
      const float beta = add ? 1.0f : 0.0f;
      check(cudnnLRNCrossChannelBackward(cudnn_, l.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, l.x,
                                         l.act.p, l.x, dy, l.x, act(u), &beta, l.x, dx),
            "cudnnLRNCrossChannelBackward");
      break;
    }
    case Kind::kInput:
    case Kind::kView:
      break;
  }
  check(cudaGetLastError(), lay.name.c_str());
}

}  // namespace

std::unique_ptr<TrainingStep> make_gpu_training_step(const model::LayerGraph& graph,
                                                     std::int64_t batch, std::uint64_t seed) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    fail_at({}, "--device", "gpu: no CUDA device is visible to this process");
  }
  return std::make_unique<GpuStep>(graph, batch, seed);
}

}  // namespace dlsim::validate
