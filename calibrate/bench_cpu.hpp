#pragma once
// CPU benchmarks of dlcalibrate (backend "cpu"): memory bandwidth in the STREAM manner and the
// float32 matrix products and convolutions a zoo model's layers run, with Eigen. Each only
// describes its points and one call; calibrate/driver.hpp times them. Conventions and sources
// are at the top of bench_cpu.cpp.

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/driver.hpp"
#include "model/graph.hpp"

namespace dlsim::calibrate {

// One matrix product C (m x n) = A (m x k) B (k x n).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::string layer;        // the first layer (in topological order) with this shape
  int layers = 1;           // how many layers of the model have it
  std::int64_t groups = 1;  // a grouped convolution runs this product `groups` times

  double flops() const;     // FLOP, 2 m n k x groups (one multiply and one add per MAC)
  std::string str() const;  // "m=64 n=401408 k=147"
};

// The benchmark point of one GEMM shape (2mnk FLOP per call; a grouped convolution's groups are
// separate calls), named by its shape, with the layer, model, batch, layer count, operand bytes
// at `element_bytes` per element and, for grouped convolutions, the groups. Shared by the CPU and
// GPU GEMM benchmarks.
struct BenchPoint;
BenchPoint gemm_point(const GemmShape& g, const std::string& model, std::int64_t batch,
                      double element_bytes);

// One 2-D convolution of a batch, NCHW, PyTorch's conv2d semantics.
struct ConvShape {
  std::int64_t batch = 1, in_c = 1, in_h = 1, in_w = 1;
  std::int64_t out_c = 1, out_h = 1, out_w = 1;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
  std::string layer;
  int layers = 1;

  // The product im2col turns it into, per group: m = out_c / groups,
  // n = batch x out_h x out_w, k = in_c / groups x kernel_h x kernel_w.
  GemmShape gemm() const;
  double flops() const;  // FLOP of the products (im2col does none)
  std::string str() const;
};

// Every dense layer (m = batch x the input's leading dimensions, n = out features, k = in
// features) and every convolution as im2col + GEMM of `graph` at `batch`, deduplicated, in the
// order the layers first run.
std::vector<GemmShape> model_gemm_shapes(const model::LayerGraph& graph, std::int64_t batch);
// Every distinct convolution of `graph` at `batch`, in order.
std::vector<ConvShape> model_conv_shapes(const model::LayerGraph& graph, std::int64_t batch);

// The convolution layer `l` of `graph` at `batch`.
ConvShape conv_shape(const model::LayerGraph& graph, const model::Layer& l, std::int64_t batch);

// im2col of a batch: `cols` (in_c x kernel_h x kernel_w) x (batch x out_h x out_w), row-major.
void im2col(const ConvShape& s, const float* input, float* cols);
// Its transpose: adds every entry of `cols` into the input pixel it came from (the input
// gradient of a convolution from the gradient of its columns).
void col2im_add(const ConvShape& s, const float* cols, float* input_grad);

// Convolution forward as im2col + GEMM. `input` is NCHW (batch x in_c x in_h x in_w), `weight`
// PyTorch's [out_c, in_c / groups, kernel_h, kernel_w], `cols` scratch of
// (in_c x kernel_h x kernel_w) x (batch x out_h x out_w) floats, `output` out_c x (batch x out_h
// x out_w) (channel-major, "CNHW").
void conv_forward_im2col(const ConvShape& s, const float* input, const float* weight, float* cols,
                         float* output);

// The memory operations: points at each array size in `array_bytes` (B per array).
Benchmark stream_copy_benchmark(const std::vector<double>& array_bytes);
Benchmark stream_triad_benchmark(const std::vector<double>& array_bytes);
Benchmark gemm_benchmark(const std::vector<GemmShape>& shapes, const std::string& model,
                         std::int64_t batch);
Benchmark conv_fwd_benchmark(const std::vector<ConvShape>& shapes, const std::string& model);

// The ops `dlcalibrate run cpu` measures.
const std::vector<std::string>& cpu_ops();

struct CpuOptions {
  std::vector<std::string> ops = cpu_ops();
  std::string model = "resnet50";  // zoo name or model file
  std::int64_t batch = 32;
  double from_bytes = 64.0 * 1024;        // B per array
  double to_bytes = 256.0 * 1024 * 1024;  // B per array
  double factor = 2;
  double max_flops = 2e10;  // FLOP per call; larger products and convolutions are left out
  int conv_layers = 4;      // convolutions measured as conv_fwd, spread over the model's
};

struct CpuPlan {
  std::vector<Benchmark> benchmarks;
  std::vector<std::string> notes;  // what was left out, and why
};

// The benchmarks `options` asks for. Every input error (unknown op or model, bad sizes) is an
// InputError raised here, before anything is measured or written.
CpuPlan cpu_benchmarks(const CpuOptions& options);

}  // namespace dlsim::calibrate
