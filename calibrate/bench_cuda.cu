// GPU benchmarks (backend "cuda"), one device, one stream:
//
// Timing: a CUDA event is recorded on the stream before and after an inner loop of calls, and a
//   sample is the elapsed time over the calls (CUDA C++ Best Practices Guide, "Using CUDA GPU
//   Timers"). Events time the GPU's own timeline, so the host's launch work overlaps the kernels
//   and no synchronization falls inside a sample. cudaEventElapsedTime resolves about 0.5 us
//   (CUDA Runtime API reference), so the inner loop lasts at least --min-time (1 ms): its count
//   grows as the CPU driver's does (driver.hpp, Google Benchmark's PredictNumItersNeeded). Before
//   that, --warmup untimed calls and a stream synchronization (module loading is lazy since
//   CUDA 11.7, CUDA_MODULE_LOADING: a kernel's first launch loads it).
//
// copy, triad: device memory bandwidth in the manner of BabelStream (Deakin, Price, Martineau &
//   McIntosh-Smith 2016, "GPU-STREAM v2.0: Benchmarking the Achievable Memory Bandwidth of
//   Many-Core Processors Across Diverse Parallel Programming Models"; its CUDA kernels): float64
//   arrays, one element per thread, copy c[i] = a[i] counting 2 x 8 B per element and triad
//   a[i] = b[i] + s c[i] counting 3 x 8 B (STREAM's bytes[], as bench_cpu.cpp counts them). The
//   sweep's size is one array's; arrays well above the L2 cache (50 MiB on an H100) measure
//   device memory.
//
// launch: an empty kernel <<<1, 1>>> launched back to back on the stream; the sample is the time
//   per launch, which is the larger of the host's cost to launch and the GPU's to run an empty
//   kernel: the floor under every small kernel a framework launches (dlsim's kernel_launch).
//
// gemm: cuBLAS C = A B, column-major, at the zoo model's shapes (model_gemm_shapes, the shapes
//   `run cpu` uses): m = batch x tokens for a dense layer, the im2col product for a convolution,
//   one group's product for a grouped one; FLOP = 2 m n k. fp32 is cublasSgemm in cuBLAS's
//   default math mode, which does not use TF32 tensor cores (cuBLAS documentation,
//   cublasSetMathMode: TF32 needs CUBLAS_TF32_TENSOR_OP_MATH), so the rate compares with the
//   datasheet's fp32 peak; fp16 is cublasGemmEx with half operands and float accumulation
//   (CUBLAS_COMPUTE_32F), as PyTorch runs half matmuls.
//
// conv_fwd, conv_bwd_data, conv_bwd_filter: cuDNN's convolution through its legacy API
//   (cudnnConvolutionForward, cudnnConvolutionBackwardData, cudnnConvolutionBackwardFilter, still
//   in cuDNN 9), NCHW, cross-correlation with PyTorch's conv2d semantics, at every distinct
//   convolution of the model (model_conv_shapes). The algorithm is the fastest that
//   cudnnFind*Algorithm finds (as PyTorch with torch.backends.cudnn.benchmark = True), run with
//   the workspace it asked for; the record names the algorithm, its workspace and math type.
//   fp32 is CUDNN_FMA_MATH (no TF32, so that the rate compares with the fp32 peak); fp16 keeps
//   half tensors with float compute (cuDNN's PSEUDO_HALF_CONFIG) and allows tensor cores. The
//   FLOP of each is the forward product's (ConvShape::flops()): backward-data and
//   backward-filter are products of the same size, dx = W^T dy and dW = dy x^T.
//
// Every buffer is allocated and filled by a kernel in setup, before warm-up. A point whose
// buffers do not fit in device memory, or whose shape cuBLAS or cuDNN does not support, is left
// out with a warning and a note in the file; any other CUDA error ends the run.

#include "calibrate/bench_cuda.hpp"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "calibrate/bench_cpu.hpp"
#include "calibrate/driver.hpp"
#include "calibrate/results.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "model/loader.hpp"

namespace dlsim::calibrate {
namespace {

using Params = std::map<std::string, std::string>;

constexpr int kBlock = 256;            // threads per block of the memory and fill kernels
constexpr long kMaxInner = 1'000'000;  // calls in one sample's inner loop, at most
constexpr double kTriadScalar = 0.4;   // BabelStream's startScalar

// A point that cannot be measured here (its buffers do not fit in device memory, or the library
// does not support its shape): it is left out with a note, the run goes on.
class PointLeftOut : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it, the context stays usable
    throw PointLeftOut(fmt::format("{}: {}", call, cudaGetErrorString(e)));
  }
  throw std::runtime_error(fmt::format("{}: {}", call, cudaGetErrorString(e)));
}

void check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const auto text = fmt::format("{}: {}", call, cublasGetStatusString(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED || s == CUBLAS_STATUS_NOT_SUPPORTED) throw PointLeftOut(text);
  throw std::runtime_error(text);
}

void check(cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  const auto text = fmt::format("{}: {}", call, cudnnGetErrorString(s));
  // cuDNN 9's codes: 3000-3999 are CUDNN_STATUS_NOT_SUPPORTED and its refinements.
  const int code = static_cast<int>(s);
  if ((code >= CUDNN_STATUS_NOT_SUPPORTED && code < CUDNN_STATUS_INTERNAL_ERROR) ||
      s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    throw PointLeftOut(text);
  }
  throw std::runtime_error(text);
}

// ---- kernels ----

// Values in [-1, 1) from a hash of the index (Wang's integer hash), so that operands are neither
// all equal nor denormal, whatever their type.
template <class T>
__global__ void fill_uniform(T* p, std::size_t n, std::uint32_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    std::uint32_t h = static_cast<std::uint32_t>(i) ^ seed;
    h = (h ^ 61u) ^ (h >> 16);
    h *= 9u;
    h ^= h >> 4;
    h *= 0x27d4eb2du;
    h ^= h >> 15;
    p[i] = static_cast<T>(static_cast<float>(h >> 8) * (1.0f / 8388608.0f) - 1.0f);
  }
}

__global__ void fill_constant(double* p, std::size_t n, double value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    p[i] = value;
  }
}

// BabelStream's copy_kernel and triad_kernel (CUDAStream.cu): one element per thread.
__global__ void stream_copy(const double* __restrict__ a, double* __restrict__ c, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i];
}

__global__ void stream_triad(double* __restrict__ a, const double* __restrict__ b,
                             const double* __restrict__ c, double scalar, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) a[i] = b[i] + scalar * c[i];
}

__global__ void empty_kernel() {}

// Blocks of kBlock threads covering n elements, one each.
unsigned blocks_for(std::size_t n) {
  const std::size_t b = (n + kBlock - 1) / kBlock;
  if (b > static_cast<std::size_t>(INT_MAX)) {
    throw PointLeftOut(fmt::format("{} elements are more than one launch covers", n));
  }
  return static_cast<unsigned>(std::max<std::size_t>(b, 1));
}

// Blocks of a grid-stride loop: enough to fill any GPU, no more.
unsigned fill_blocks(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock + 1, 65536));
}

// ---- device resources ----

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check(cudaMalloc(&p_, bytes), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// The device, its stream and library handles (bound to the stream), and the timing events.
class Gpu {
 public:
  explicit Gpu(int device) : device_(device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    check(cublasCreate(&cublas_), "cublasCreate");
    check(cublasSetStream(cublas_, stream_), "cublasSetStream");
    check(cudnnCreate(&cudnn_), "cudnnCreate");
    check(cudnnSetStream(cudnn_, stream_), "cudnnSetStream");
  }
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;
  ~Gpu() {
    if (cudnn_) cudnnDestroy(cudnn_);
    if (cublas_) cublasDestroy(cublas_);
    if (stop_) cudaEventDestroy(stop_);
    if (start_) cudaEventDestroy(start_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }

  void sync() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  // s, the GPU time of `n` calls of `enqueue` between two events on the stream.
  double elapsed_s(const std::function<void()>& enqueue, long n) const {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (long i = 0; i < n; ++i) enqueue();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    check(cudaGetLastError(), "kernel launch");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }

  template <class T>
  void fill(const DeviceBuffer& b, std::uint32_t seed) const {
    const std::size_t n = b.bytes() / sizeof(T);
    fill_uniform<T><<<fill_blocks(n), kBlock, 0, stream_>>>(b.as<T>(), n, seed);
    check(cudaGetLastError(), "fill_uniform");
  }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
};

// ---- benchmarks ----

// One GPU operation: a Benchmark (driver.hpp) whose run() only enqueues one call on the stream,
// and whose setup() also says what it chose (cuDNN's algorithm and workspace) for the record.
// setup() may throw PointLeftOut: the point is then left out.
struct GpuBenchmark {
  std::string op;
  std::string dtype;
  std::vector<BenchPoint> points;
  std::function<Params(const BenchPoint&)> setup;
  std::function<void()> run;
  std::function<void()> teardown;
};

std::string count(double v) { return fmt::format("{:.0f}", v); }

GpuBenchmark stream_benchmark(const Gpu& gpu, const char* op, int arrays,
                              const std::vector<double>& array_bytes) {
  GpuBenchmark bench;
  bench.op = op;
  bench.dtype = "float64";
  for (const double size : array_bytes) {
    const double n = std::floor(size / sizeof(double));
    BenchPoint p;
    p.bytes = arrays * sizeof(double) * n;  // STREAM's bytes[] (McCalpin)
    p.shape = fmt::format("n={}", count(n));
    p.params = {{"array_bytes", count(n * sizeof(double))},
                {"kernel", fmt::format("BabelStream {}, {} threads per block", op, kBlock)}};
    bench.points.push_back(p);
  }
  struct State {
    std::size_t n = 0;
    DeviceBuffer a, b, c;
  };
  auto s = std::make_shared<State>();
  const bool triad = arrays == 3;
  bench.setup = [&gpu, s, triad](const BenchPoint& p) {
    s->n = static_cast<std::size_t>(p.bytes / ((triad ? 3 : 2) * sizeof(double)));
    const std::size_t bytes = s->n * sizeof(double);
    s->a = DeviceBuffer(bytes);
    s->c = DeviceBuffer(bytes);
    if (triad) s->b = DeviceBuffer(bytes);  // copy reads a and writes c only
    // BabelStream's start values.
    const unsigned blocks = fill_blocks(s->n);
    fill_constant<<<blocks, kBlock, 0, gpu.stream()>>>(s->a.as<double>(), s->n, 0.1);
    fill_constant<<<blocks, kBlock, 0, gpu.stream()>>>(s->c.as<double>(), s->n, 0.0);
    if (triad) fill_constant<<<blocks, kBlock, 0, gpu.stream()>>>(s->b.as<double>(), s->n, 0.2);
    check(cudaGetLastError(), "fill_constant");
    blocks_for(s->n);  // a size one launch cannot cover is left out here, not in the loop
    return Params{};
  };
  if (triad) {
    bench.run = [&gpu, s] {
      stream_triad<<<blocks_for(s->n), kBlock, 0, gpu.stream()>>>(
          s->a.as<double>(), s->b.as<double>(), s->c.as<double>(), kTriadScalar, s->n);
    };
  } else {
    bench.run = [&gpu, s] {
      stream_copy<<<blocks_for(s->n), kBlock, 0, gpu.stream()>>>(s->a.as<double>(),
                                                                 s->c.as<double>(), s->n);
    };
  }
  bench.teardown = [s] { *s = State{}; };
  return bench;
}

GpuBenchmark launch_benchmark(const Gpu& gpu) {
  GpuBenchmark bench;
  bench.op = "launch";
  bench.dtype = "none";
  BenchPoint p;
  p.shape = "empty kernel <<<1, 1>>>";
  p.params = {{"measures", "time per launch, back to back on one stream"}};
  bench.points.push_back(p);
  bench.setup = [](const BenchPoint&) { return Params{}; };
  bench.run = [&gpu] { empty_kernel<<<1, 1, 0, gpu.stream()>>>(); };
  return bench;
}

GpuBenchmark gemm_benchmark(const Gpu& gpu, const std::vector<GemmShape>& shapes,
                            const std::string& model, std::int64_t batch, bool fp16) {
  GpuBenchmark bench;
  bench.op = "gemm";
  bench.dtype = fp16 ? "float16" : "float32";
  const double element = fp16 ? 2 : 4;  // B
  auto by_shape = std::make_shared<std::map<std::string, GemmShape>>();
  for (const auto& g : shapes) {
    BenchPoint p = gemm_point(g, model, batch, element);
    p.params["library"] = fp16 ? "cublasGemmEx (CUDA_R_16F, CUBLAS_COMPUTE_32F)"
                               : "cublasSgemm (CUBLAS_DEFAULT_MATH, no TF32)";
    bench.points.push_back(p);
    (*by_shape)[p.shape] = g;
  }
  struct State {
    int m = 0, n = 0, k = 0;
    DeviceBuffer a, b, c;
  };
  auto s = std::make_shared<State>();
  bench.setup = [&gpu, s, by_shape, fp16](const BenchPoint& p) {
    const GemmShape& g = by_shape->at(p.shape);
    if (g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX) {
      throw PointLeftOut(fmt::format("{} is beyond cuBLAS's 32-bit dimensions", g.str()));
    }
    s->m = static_cast<int>(g.m);
    s->n = static_cast<int>(g.n);
    s->k = static_cast<int>(g.k);
    const std::size_t e = fp16 ? sizeof(__half) : sizeof(float);
    s->a = DeviceBuffer(e * static_cast<std::size_t>(g.m * g.k));
    s->b = DeviceBuffer(e * static_cast<std::size_t>(g.k * g.n));
    s->c = DeviceBuffer(e * static_cast<std::size_t>(g.m * g.n));
    if (fp16) {
      gpu.fill<__half>(s->a, 1);
      gpu.fill<__half>(s->b, 2);
      gpu.fill<__half>(s->c, 3);
    } else {
      gpu.fill<float>(s->a, 1);
      gpu.fill<float>(s->b, 2);
      gpu.fill<float>(s->c, 3);
    }
    return Params{};
  };
  if (fp16) {
    bench.run = [&gpu, s] {
      const float alpha = 1, beta = 0;
      check(cublasGemmEx(gpu.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, s->m, s->n, s->k, &alpha,
                         s->a.as<__half>(), CUDA_R_16F, s->m, s->b.as<__half>(), CUDA_R_16F, s->k,
                         &beta, s->c.as<__half>(), CUDA_R_16F, s->m, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    };
  } else {
    bench.run = [&gpu, s] {
      const float alpha = 1, beta = 0;
      check(cublasSgemm(gpu.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, s->m, s->n, s->k, &alpha,
                        s->a.as<float>(), s->m, s->b.as<float>(), s->k, &beta, s->c.as<float>(),
                        s->m),
            "cublasSgemm");
    };
  }
  bench.teardown = [s] { *s = State{}; };
  return bench;
}

// The descriptors of one convolution (cuDNN's legacy API), created and destroyed together.
class ConvDescriptors {
 public:
  ConvDescriptors(const ConvShape& c, bool fp16) {
    const cudnnDataType_t type = fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
    check(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    const auto i = [](std::int64_t v) { return static_cast<int>(v); };
    check(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, type, i(c.batch), i(c.in_c), i(c.in_h),
                                     i(c.in_w)),
          "cudnnSetTensor4dDescriptor");
    check(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NCHW, i(c.out_c), i(c.in_c / c.groups),
                                     i(c.kernel_h), i(c.kernel_w)),
          "cudnnSetFilter4dDescriptor");
    // Float compute for half tensors too (PSEUDO_HALF_CONFIG): what frameworks run.
    check(cudnnSetConvolution2dDescriptor(conv, i(c.pad_h), i(c.pad_w), i(c.stride_h),
                                          i(c.stride_w), i(c.dilation_h), i(c.dilation_w),
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(cudnnSetConvolutionGroupCount(conv, i(c.groups)), "cudnnSetConvolutionGroupCount");
    check(cudnnSetConvolutionMathType(conv, fp16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
          "cudnnSetConvolutionMathType");
    int n = 0, k = 0, h = 0, wd = 0;
    check(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &k, &h, &wd),
          "cudnnGetConvolution2dForwardOutputDim");
    if (n != c.batch || k != c.out_c || h != c.out_h || wd != c.out_w) {
      throw std::runtime_error(
          fmt::format("cuDNN's output of {} is {}x{}x{}x{}, the model's {}x{}x{}x{}", c.str(), n, k,
                      h, wd, c.batch, c.out_c, c.out_h, c.out_w));
    }
    check(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, type, n, k, h, wd),
          "cudnnSetTensor4dDescriptor");
  }
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
  ~ConvDescriptors() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

const char* fwd_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT:
      return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "unknown";
  }
}

const char* bwd_data_algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    default:
      return "unknown";
  }
}

const char* bwd_filter_algo_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0:
      return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1:
      return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT:
      return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3:
      return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD:
      return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED:
      return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING:
      return "FFT_TILING";
    default:
      return "unknown";
  }
}

const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "CUDNN_DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH:
      return "CUDNN_TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "CUDNN_FMA_MATH";
    default:
      return "unknown";
  }
}

// The first (fastest) of cudnnFind*'s results that ran, with its workspace allocated; a result
// whose workspace does not fit gives way to the next.
template <class Perf>
std::pair<Perf, DeviceBuffer> pick(const std::vector<Perf>& found, const char* find) {
  for (const Perf& p : found) {
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    try {
      return {p, DeviceBuffer(p.memory)};
    } catch (const PointLeftOut&) {
      continue;
    }
  }
  throw PointLeftOut(fmt::format("{}: no algorithm ran within the device memory", find));
}

template <class Perf>
Params algorithm_params(const Perf& p, const char* name, const char* find) {
  return {{"algorithm", name},
          {"algorithm_search", find},
          {"workspace_bytes", std::to_string(p.memory)},
          {"math", math_name(p.mathType)},
          {"deterministic", p.determinism == CUDNN_DETERMINISTIC ? "yes" : "no"},
          {"find_time_ms", fmt::format("{:.4f}", p.time)}};
}

GpuBenchmark conv_benchmark(const Gpu& gpu, const std::string& op,
                            const std::vector<ConvShape>& shapes, const std::string& model,
                            bool fp16) {
  GpuBenchmark bench;
  bench.op = op;
  bench.dtype = fp16 ? "float16" : "float32";
  auto by_shape = std::make_shared<std::map<std::string, ConvShape>>();
  for (const auto& c : shapes) {
    BenchPoint p;
    p.flops = c.flops();
    p.shape = c.str();
    p.params = {{"layer", c.layer},
                {"model", model},
                {"layers", std::to_string(c.layers)},
                {"layout", "NCHW"},
                {"library", fmt::format("cuDNN legacy convolution API ({})", op)}};
    bench.points.push_back(p);
    (*by_shape)[p.shape] = c;
  }
  struct State {
    std::unique_ptr<ConvDescriptors> d;
    DeviceBuffer x, w, y, workspace;  // y is dy and x is dx for the backward passes
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t bwd_data{};
    cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  };
  auto s = std::make_shared<State>();
  bench.setup = [&gpu, s, by_shape, op, fp16](const BenchPoint& p) {
    const ConvShape& c = by_shape->at(p.shape);
    s->d = std::make_unique<ConvDescriptors>(c, fp16);
    const std::size_t e = fp16 ? sizeof(__half) : sizeof(float);
    const auto n = [](std::int64_t v) { return static_cast<std::size_t>(v); };
    s->x = DeviceBuffer(e * n(c.batch * c.in_c * c.in_h * c.in_w));
    s->w = DeviceBuffer(e * n(c.out_c * (c.in_c / c.groups) * c.kernel_h * c.kernel_w));
    s->y = DeviceBuffer(e * n(c.batch * c.out_c * c.out_h * c.out_w));
    if (fp16) {
      gpu.fill<__half>(s->x, 1);
      gpu.fill<__half>(s->w, 2);
      gpu.fill<__half>(s->y, 3);
    } else {
      gpu.fill<float>(s->x, 1);
      gpu.fill<float>(s->w, 2);
      gpu.fill<float>(s->y, 3);
    }
    gpu.sync();
    const ConvDescriptors& d = *s->d;
    constexpr int kAlgos = 16;  // more than any of the three *_ALGO_COUNT
    int returned = 0;
    if (op == "conv_fwd") {
      constexpr const char* find = "cudnnFindConvolutionForwardAlgorithm";
      std::vector<cudnnConvolutionFwdAlgoPerf_t> found(kAlgos);
      check(cudnnFindConvolutionForwardAlgorithm(gpu.cudnn(), d.x, d.w, d.conv, d.y, kAlgos,
                                                 &returned, found.data()),
            find);
      found.resize(static_cast<std::size_t>(returned));
      auto [perf, ws] = pick(found, find);
      s->fwd = perf.algo;
      s->workspace = std::move(ws);
      check(cudnnSetConvolutionMathType(d.conv, perf.mathType), "cudnnSetConvolutionMathType");
      return algorithm_params(perf, fwd_algo_name(perf.algo), find);
    }
    if (op == "conv_bwd_data") {
      constexpr const char* find = "cudnnFindConvolutionBackwardDataAlgorithm";
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> found(kAlgos);
      check(cudnnFindConvolutionBackwardDataAlgorithm(gpu.cudnn(), d.w, d.y, d.conv, d.x, kAlgos,
                                                      &returned, found.data()),
            find);
      found.resize(static_cast<std::size_t>(returned));
      auto [perf, ws] = pick(found, find);
      s->bwd_data = perf.algo;
      s->workspace = std::move(ws);
      check(cudnnSetConvolutionMathType(d.conv, perf.mathType), "cudnnSetConvolutionMathType");
      return algorithm_params(perf, bwd_data_algo_name(perf.algo), find);
    }
    constexpr const char* find = "cudnnFindConvolutionBackwardFilterAlgorithm";
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> found(kAlgos);
    check(cudnnFindConvolutionBackwardFilterAlgorithm(gpu.cudnn(), d.x, d.y, d.conv, d.w, kAlgos,
                                                      &returned, found.data()),
          find);
    found.resize(static_cast<std::size_t>(returned));
    auto [perf, ws] = pick(found, find);
    s->bwd_filter = perf.algo;
    s->workspace = std::move(ws);
    check(cudnnSetConvolutionMathType(d.conv, perf.mathType), "cudnnSetConvolutionMathType");
    return algorithm_params(perf, bwd_filter_algo_name(perf.algo), find);
  };
  // alpha and beta are float for float and for half-with-float-compute convolutions.
  if (op == "conv_fwd") {
    bench.run = [&gpu, s] {
      const float alpha = 1, beta = 0;
      const ConvDescriptors& d = *s->d;
      check(cudnnConvolutionForward(gpu.cudnn(), &alpha, d.x, s->x.as<void>(), d.w, s->w.as<void>(),
                                    d.conv, s->fwd, s->workspace.as<void>(), s->workspace.bytes(),
                                    &beta, d.y, s->y.as<void>()),
            "cudnnConvolutionForward");
    };
  } else if (op == "conv_bwd_data") {
    bench.run = [&gpu, s] {
      const float alpha = 1, beta = 0;
      const ConvDescriptors& d = *s->d;
      check(cudnnConvolutionBackwardData(gpu.cudnn(), &alpha, d.w, s->w.as<void>(), d.y,
                                         s->y.as<void>(), d.conv, s->bwd_data,
                                         s->workspace.as<void>(), s->workspace.bytes(), &beta, d.x,
                                         s->x.as<void>()),
            "cudnnConvolutionBackwardData");
    };
  } else {
    bench.run = [&gpu, s] {
      const float alpha = 1, beta = 0;
      const ConvDescriptors& d = *s->d;
      check(cudnnConvolutionBackwardFilter(gpu.cudnn(), &alpha, d.x, s->x.as<void>(), d.y,
                                           s->y.as<void>(), d.conv, s->bwd_filter,
                                           s->workspace.as<void>(), s->workspace.bytes(), &beta,
                                           d.w, s->w.as<void>()),
            "cudnnConvolutionBackwardFilter");
    };
  }
  bench.teardown = [s] { *s = State{}; };
  return bench;
}

// ---- options, provenance, the run ----

struct GpuOptions {
  std::vector<std::string> ops = gpu_ops();
  int device = 0;
  std::string model = "resnet50";
  std::int64_t batch = 32;
  std::string precision = "fp32";
  double from_bytes = 64.0 * 1024, to_bytes = 256.0 * 1024 * 1024, factor = 2;  // B per array
  int warmup = 3, iters = 10;
  double min_time_s = 1e-3;
  bool resume = false;
  std::string out;
};

// "12.4" from CUDA's 1000 x major + 10 x minor.
std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

// "13.1.0" from cuBLAS's (and cuDNN 9's) 10000 x major + 100 x minor + patch.
std::string library_version(std::size_t v) {
  return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

// Why cudaGetDeviceCount failed, in the user's terms: the CUDA runtime reports a missing driver
// and a driver too old for it with the same error (cudaErrorInsufficientDriver);
// cudaDriverGetVersion tells them apart (0 without a driver).
std::string no_gpu_reason(cudaError_t e) {
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  if (driver == 0) {
    return fmt::format("no NVIDIA driver is loaded (cudaGetDeviceCount: {})",
                       cudaGetErrorString(e));
  }
  if (driver < CUDART_VERSION) {
    return fmt::format("the NVIDIA driver supports CUDA {}, older than this build's CUDA {}",
                       cuda_version(driver), cuda_version(CUDART_VERSION));
  }
  return fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(e));
}

// An InputError unless `device` is a GPU the CUDA runtime can use.
void require_device(int device) {
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
    fail_at({}, "run gpu", "no usable CUDA GPU: " + no_gpu_reason(e));
  }
  if (devices == 0) fail_at({}, "run gpu", "no usable CUDA GPU: the CUDA runtime sees 0 devices");
  if (device < 0 || device >= devices) {
    fail_at({}, "--device",
            fmt::format("there is no GPU {} (this machine has {}: 0 to {})", device, devices,
                        devices - 1));
  }
}

Provenance gpu_provenance(const Gpu& gpu, const std::string& command_line) {
  Provenance p = host_provenance(command_line);
  // The host's CPU notes (first touch, Eigen threads) are not what this run measures.
  p.notes.clear();
  p.versions.erase("eigen");
  p.versions.erase("eigen_simd");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, gpu.device()), "cudaGetDeviceProperties");
  p.devices["gpu"] = prop.name;
  p.devices["gpu_index"] = std::to_string(gpu.device());
  p.devices["gpu_compute_capability"] = fmt::format("{}.{}", prop.major, prop.minor);
  p.devices["gpu_memory_bytes"] = std::to_string(prop.totalGlobalMem);
  p.devices["gpu_multiprocessors"] = std::to_string(prop.multiProcessorCount);
  p.devices["gpu_l2_cache_bytes"] = std::to_string(prop.l2CacheSize);
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, gpu.device()) == cudaSuccess) {
    p.devices["gpu_pci_bus_id"] = bus;
  }
  // Peak clocks (kHz) as the driver reports them; the clocks a run gets vary with boost and
  // throttling unless they are locked (nvidia-smi --lock-gpu-clocks).
  const auto attribute = [&](cudaDeviceAttr a, const char* key, const char* unit) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, a, gpu.device()) == cudaSuccess && v > 0) {
      p.devices[key] = fmt::format("{} {}", v, unit);
    }
  };
  attribute(cudaDevAttrClockRate, "gpu_clock_peak", "kHz");
  attribute(cudaDevAttrMemoryClockRate, "gpu_memory_clock_peak", "kHz");
  attribute(cudaDevAttrGlobalMemoryBusWidth, "gpu_memory_bus_width", "bit");
  (void)cudaGetLastError();  // an attribute this driver lacks is not an error of the run

  int driver = 0, runtime = 0, cublas = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  check(cublasGetVersion(gpu.cublas(), &cublas), "cublasGetVersion");
  p.versions["cuda_driver"] = cuda_version(driver);
  p.versions["cuda_runtime"] = cuda_version(runtime);
  p.versions["cuda_compiled"] = cuda_version(CUDART_VERSION);
  p.versions["nvcc"] = fmt::format("{}.{}", __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__);
  p.versions["cublas"] = library_version(static_cast<std::size_t>(cublas));
  p.versions["cudnn"] = library_version(cudnnGetVersion());
  p.versions["cudnn_compiled"] = library_version(CUDNN_VERSION);
  for (const char* v : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING",
                        "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS",
                        "NVIDIA_TF32_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG", "CUDNN_LOGLEVEL_DBG"}) {
    if (const char* value = std::getenv(v)) p.environment[v] = value;
  }
  p.notes = {
      "a sample is the GPU time of an inner loop of calls between two CUDA events on one stream, "
      "divided by the calls; warm-up calls and a stream synchronization come first",
      "every buffer is allocated and filled by a kernel before warm-up and timing",
      "GPU clocks are whatever boost and temperature give unless locked (nvidia-smi "
      "--lock-gpu-clocks); gpu_clock_peak is the driver's peak"};
  return p;
}

std::string describe(const GpuBenchmark& b, const BenchPoint& p) {
  return fmt::format("{} cuda{}{}", b.op, p.bytes > 0 ? " " + format_bytes(Bytes(p.bytes)) : "",
                     p.shape.empty() ? "" : " " + p.shape);
}

// Warm-up, then samples of the GPU time per call (the driver's time_calls, with events).
Timing time_gpu(const Gpu& gpu, const std::function<void()>& run, const GpuOptions& o) {
  for (int i = 0; i < o.warmup; ++i) run();
  gpu.sync();
  check(cudaGetLastError(), "kernel launch");
  Timing t;
  long n = 1;
  for (;;) {
    const double s = gpu.elapsed_s(run, n);
    if (s >= o.min_time_s || n >= kMaxInner) break;
    const double multiplier = s > 0 ? o.min_time_s * 1.4 / s : 10.0;
    n = std::min(kMaxInner,
                 std::max(n + 1, static_cast<long>(std::ceil(static_cast<double>(n) *
                                                             std::min(multiplier, 10.0)))));
  }
  t.inner_calls = n;
  for (int r = 0; r < o.iters; ++r) {
    t.samples_s.push_back(gpu.elapsed_s(run, n) / static_cast<double>(n));
  }
  return t;
}

void run_gpu(const GpuOptions& o, const std::string& command_line) {
  // Every input is checked before the GPU is looked for, and the GPU before the file is made.
  if (o.ops.empty()) fail_at({}, "--ops", "names no operation");
  for (const auto& op : o.ops) {
    if (std::find(gpu_ops().begin(), gpu_ops().end(), op) == gpu_ops().end()) {
      fail_at({}, "--ops",
              fmt::format("'{}' is not a GPU benchmark{} (they are: {})", op,
                          did_you_mean(op, gpu_ops()), fmt::join(gpu_ops(), ", ")));
    }
  }
  const auto wants = [&](const char* op) {
    return std::find(o.ops.begin(), o.ops.end(), op) != o.ops.end();
  };
  if (o.precision != "fp32" && o.precision != "fp16") {
    fail_at({}, "--precision", fmt::format("'{}' is neither fp32 nor fp16", o.precision));
  }
  if (o.batch < 1) fail_at({}, "--batch", fmt::format("must be positive, got {}", o.batch));
  if (o.device < 0) fail_at({}, "--device", "must not be negative");
  DriverOptions d;
  d.warmup = o.warmup;
  d.repetitions = o.iters;
  d.min_time_s = o.min_time_s;
  d.resume = o.resume;
  check_options(d, o.out);
  std::vector<double> sizes;
  if (wants("copy") || wants("triad")) {
    sizes = geometric_sizes(o.from_bytes, o.to_bytes, o.factor, sizeof(double));
  }
  const bool convs = wants("conv_fwd") || wants("conv_bwd_data") || wants("conv_bwd_filter");
  std::vector<GemmShape> gemms;
  std::vector<ConvShape> conv_shapes;
  std::string model_name;
  if (wants("gemm") || convs) {
    const auto graph = model::load_model(o.model);
    model_name = graph.name();
    if (wants("gemm")) gemms = model_gemm_shapes(graph, o.batch);
    if (convs) conv_shapes = model_conv_shapes(graph, o.batch);
  }
  require_device(o.device);

  const Gpu gpu(o.device);
  const bool fp16 = o.precision == "fp16";
  std::vector<GpuBenchmark> benchmarks;
  std::set<std::string> seen;
  for (const auto& op : o.ops) {
    if (!seen.insert(op).second) continue;
    if (op == "copy") benchmarks.push_back(stream_benchmark(gpu, "copy", 2, sizes));
    if (op == "triad") benchmarks.push_back(stream_benchmark(gpu, "triad", 3, sizes));
    if (op == "launch") benchmarks.push_back(launch_benchmark(gpu));
    if (op == "gemm") benchmarks.push_back(gemm_benchmark(gpu, gemms, model_name, o.batch, fp16));
    if (op.rfind("conv_", 0) == 0) {
      benchmarks.push_back(conv_benchmark(gpu, op, conv_shapes, model_name, fp16));
    }
  }

  const bool exists = std::filesystem::exists(o.out);
  std::set<std::string> done;
  if (exists) {
    for (const auto& m : read_results(o.out, true).measurements) {
      done.insert(resume_key(m.op, m.backend, m.ranks, m.bytes, m.shape));
    }
  }
  Provenance prov = gpu_provenance(gpu, command_line);
  // What happens during the run (points left out, a resumption) goes in this run's trailer: the
  // header is written when the file is made.
  std::vector<std::string> trailer_notes;
  if (exists) {
    trailer_notes.push_back(fmt::format("resumed on {} ({}) at {} by: {}", prov.hosts.front(),
                                        prov.devices["gpu"], prov.date, command_line));
  }
  ResultsWriter writer(o.out, prov, exists);

  const bool progress = isatty(STDERR_FILENO) != 0;
  std::size_t total = 0, index = 0, measured = 0, skipped = 0, left_out = 0;
  for (const auto& b : benchmarks) total += b.points.size();
  for (const auto& b : benchmarks) {
    for (const auto& p : b.points) {
      ++index;
      if (done.count(resume_key(b.op, "cuda", 1, p.bytes, p.shape))) {
        ++skipped;
        continue;
      }
      Measurement m;
      m.op = b.op;
      m.backend = "cuda";
      m.bytes = p.bytes;
      m.flops = p.flops;
      m.shape = p.shape;
      m.dtype = b.dtype;
      m.params = p.params;
      try {
        for (auto& [k, v] : b.setup(p)) m.params[k] = v;
        const Timing t = time_gpu(gpu, b.run, o);
        m.samples_s = t.samples_s;
        m.params["inner_calls"] = std::to_string(t.inner_calls);
      } catch (const PointLeftOut& e) {
        if (b.teardown) b.teardown();
        ++left_out;
        const auto text = fmt::format("{}: left out, {}", describe(b, p), e.what());
        trailer_notes.push_back(text);
        std::cerr << "dlcalibrate: warning: " << text << "\n";
        continue;
      }
      if (b.teardown) b.teardown();
      writer.add(m);
      ++measured;
      if (progress) {
        std::cerr << fmt::format(
            "[{}/{}] {}: median {}{}{}\n", index, total, describe(b, p),
            format_seconds(Seconds(m.median_s())),
            m.bytes > 0 ? ", " + format_bandwidth(Bandwidth(m.algbw())) : "",
            m.flops > 0 ? ", " + format_flop_rate(FlopRate(m.flop_rate())) : "");
      }
    }
  }
  Provenance end;
  end.load_after = load_average();
  end.notes = trailer_notes;
  writer.finish(end);
  std::cerr << fmt::format(
      "dlcalibrate: {} points measured into {}{}{}\n", measured, o.out,
      skipped ? fmt::format(" ({} already there)", skipped) : "",
      left_out ? fmt::format(", {} left out (see the warnings)", left_out) : "");
}

}  // namespace

const std::vector<std::string>& gpu_ops() {
  static const std::vector<std::string> ops = {
      "gemm", "conv_fwd", "conv_bwd_data", "conv_bwd_filter", "copy", "triad", "launch"};
  return ops;
}

void add_run_gpu(CLI::App& run, const std::string& command_line) {
  auto* c = run.add_subcommand(
      "gpu",
      "cuBLAS GEMM and cuDNN convolutions at a model's shapes, device memory bandwidth (copy, "
      "triad) and kernel launch cost, on one GPU");
  auto o = std::make_shared<GpuOptions>();
  auto text = std::make_shared<std::map<std::string, std::string>>();
  (*text)["ops"] = fmt::format("{}", fmt::join(gpu_ops(), ","));
  (*text)["from"] = "64KiB";
  (*text)["to"] = "256MiB";
  (*text)["min_time"] = "1ms";
  c->add_option("--device", o->device, "CUDA device index")->capture_default_str();
  c->add_option("--ops", (*text)["ops"],
                "Comma-separated: gemm, conv_fwd, conv_bwd_data, conv_bwd_filter, copy, triad, "
                "launch")
      ->capture_default_str();
  c->add_option("--model", o->model,
                "Zoo model or model file whose layer shapes gemm and the convolutions measure")
      ->capture_default_str();
  c->add_option("--batch", o->batch, "Batch size of those shapes")->capture_default_str();
  c->add_option("--precision", o->precision, "fp32 or fp16 (gemm and the convolutions)")
      ->capture_default_str();
  c->add_option("-b,--minbytes", (*text)["from"], "Smallest array (copy, triad), e.g. 64KiB")
      ->capture_default_str();
  c->add_option("-e,--maxbytes", (*text)["to"], "Largest array (copy, triad)")
      ->capture_default_str();
  c->add_option("-f,--stepfactor", o->factor, "Size multiplier between steps")
      ->capture_default_str();
  c->add_option("-n,--iters", o->iters, "Timed samples per point")->capture_default_str();
  c->add_option("-w,--warmup", o->warmup, "Untimed calls per point")->capture_default_str();
  c->add_option("--min-time", (*text)["min_time"], "Least GPU time of one sample's inner loop")
      ->capture_default_str();
  c->add_flag("--resume", o->resume,
              "Continue an existing results file: skip the points it has, append the rest");
  c->add_option("-o,--output", o->out, "Results file (JSON Lines), written as points complete")
      ->required();
  c->callback([o, text, command_line] {
    if (o->out == "-") fail_at({}, "--output", "needs a file (results are appended as measured)");
    o->ops = split_list((*text)["ops"]);
    o->from_bytes = parse_size_flag("--minbytes", (*text)["from"]);
    o->to_bytes = parse_size_flag("--maxbytes", (*text)["to"]);
    try {
      o->min_time_s = parse_seconds((*text)["min_time"]).value();
    } catch (const std::invalid_argument& e) {
      fail_at({}, "--min-time", e.what());
    }
    run_gpu(*o, command_line);
  });
}

}  // namespace dlsim::calibrate
