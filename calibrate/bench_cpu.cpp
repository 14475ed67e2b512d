// CPU benchmarks (backend "cpu"), one thread, with Eigen:
//
// copy, triad: memory bandwidth as STREAM measures it (McCalpin 1995, "Memory Bandwidth and
//   Machine Balance in Current High Performance Computers", IEEE TCCA Newsletter; stream.c):
//   float64 arrays of n elements, copy a[i] = b[i] counts 2 x 8 B per element and triad
//   a[i] = b[i] + s c[i] counts 3 x 8 B, STREAM's `bytes[]` table. Like STREAM, the write-allocate
//   read of a[] is not counted, so these are the bytes a program asks for, not the bus traffic.
//   The sweep's size is the size of ONE array (STREAM's N x 8 B); the record's `bytes` is what
//   one call moves (2 or 3 arrays) and its shape is "n=<elements>". Sizes below the last-level
//   cache measure a cache; STREAM asks for arrays of 4x the caches for memory bandwidth.
//
// gemm: float32 C = A B with Eigen's blocked product (column-major operands) at the shapes a
//   model's layers produce: a dense layer is m = batch (x the input's leading dimensions), n =
//   out features, k = in features; a convolution lowered to a product by im2col (Chellapilla,
//   Puri & Simard 2006, "High Performance Convolutional Neural Networks for Document
//   Processing"; Caffe's im2col_cpu) is m = out_channels, n = batch x out_h x out_w,
//   k = in_channels / groups x kernel_h x kernel_w (per group). FLOP = 2 m n k, a multiply and an
//   add per MAC (docs/model.md). Shapes are deduplicated; `bytes` is 0 (the record's work is its
//   FLOP; params.operand_bytes = 4 (mk + kn + mn) for roofline use).
//
// conv_fwd: a few of the model's convolutions, each timed as one call of im2col into a scratch
//   matrix plus the product(s) over it, so the time includes the im2col copy the lowering costs;
//   FLOP are the products' only.
//
// Every buffer is allocated and written in setup, before the driver warms up and times (the
// first-touch trap, driver.hpp).

#include "calibrate/bench_cpu.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "common/error.hpp"
#include "common/units.hpp"
#include "model/loader.hpp"

namespace dlsim::calibrate {
namespace {

using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Keeps the compiler from proving a benchmark's stores dead or hoisting them out of the
// driver's loop (GCC and Clang: an empty asm that may read and write all memory).
inline void clobber_memory() { asm volatile("" : : : "memory"); }

std::string count(double v) { return fmt::format("{:.0f}", v); }

std::array<std::int64_t, 2> pair_of(const nlohmann::json& attrs, const char* key) {
  const auto v = attrs.at(key).get<std::vector<std::int64_t>>();
  return {v.at(0), v.at(1)};
}

// Memory operations share their state: the three STREAM arrays.
struct StreamArrays {
  Eigen::VectorXd a, b, c;
};

Benchmark stream_benchmark(const char* op, int arrays, const std::vector<double>& array_bytes) {
  Benchmark bench;
  bench.op = op;
  bench.dtype = "float64";
  for (double size : array_bytes) {
    const double n = std::floor(size / sizeof(double));
    BenchPoint p;
    p.bytes = arrays * sizeof(double) * n;  // STREAM's bytes[] (McCalpin)
    p.shape = fmt::format("n={}", count(n));
    p.params = {{"array_bytes", count(n * sizeof(double))}};
    bench.points.push_back(p);
  }
  auto s = std::make_shared<StreamArrays>();
  const bool triad = arrays == 3;
  bench.setup = [s, triad](const BenchPoint& p) {
    const auto n = static_cast<Eigen::Index>(p.bytes / ((triad ? 3 : 2) * sizeof(double)));
    // STREAM's initial values; setConstant writes (and so faults in) every page.
    s->a.setConstant(n, 1.0);
    s->b.setConstant(n, 2.0);
    if (triad) s->c.setConstant(n, 0.5);
  };
  if (triad) {
    bench.run = [s] {
      constexpr double scalar = 3.0;  // STREAM's scalar
      s->a.noalias() = s->b + scalar * s->c;
      clobber_memory();
    };
  } else {
    bench.run = [s] {
      s->a.noalias() = s->b;
      clobber_memory();
    };
  }
  bench.teardown = [s] { *s = StreamArrays{}; };
  return bench;
}

}  // namespace

double GemmShape::flops() const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
         static_cast<double>(groups);
}

std::string GemmShape::str() const { return fmt::format("m={} n={} k={}", m, n, k); }

GemmShape ConvShape::gemm() const {
  GemmShape g;
  g.m = out_c / groups;
  g.n = batch * out_h * out_w;
  g.k = in_c / groups * kernel_h * kernel_w;
  g.groups = groups;
  g.layer = layer;
  g.layers = layers;
  return g;
}

double ConvShape::flops() const { return gemm().flops(); }

std::string ConvShape::str() const {
  // cuDNN's names: n c h w for the input, k output channels, r x s the filter.
  return fmt::format(
      "n={} c={} h={} w={} k={} r={} s={} stride={}x{} pad={}x{} dilation={}x{} groups={}", batch,
      in_c, in_h, in_w, out_c, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
      dilation_w, groups);
}

// From the op's attributes and the shapes finalize() inferred.
ConvShape conv_shape(const model::LayerGraph& graph, const model::Layer& l, std::int64_t batch) {
  const auto attrs = l.op->attributes();
  const auto& in = graph.layer(l.inputs.at(0)).output.shape;  // [C, H, W]
  const auto kernel = pair_of(attrs, "kernel"), stride = pair_of(attrs, "stride"),
             pad = pair_of(attrs, "padding"), dilation = pair_of(attrs, "dilation");
  ConvShape s;
  s.batch = batch;
  s.in_c = in.at(0);
  s.in_h = in.at(1);
  s.in_w = in.at(2);
  s.out_c = l.output.shape.at(0);
  s.out_h = l.output.shape.at(1);
  s.out_w = l.output.shape.at(2);
  s.kernel_h = kernel[0];
  s.kernel_w = kernel[1];
  s.stride_h = stride[0];
  s.stride_w = stride[1];
  s.pad_h = pad[0];
  s.pad_w = pad[1];
  s.dilation_h = dilation[0];
  s.dilation_w = dilation[1];
  s.groups = attrs.at("groups").get<std::int64_t>();
  s.layer = l.name;
  return s;
}

namespace {

// Appends `x` to `list` unless an equal one (by `key`) is there, which then counts one more
// layer.
template <class T, class Key>
void add_unique(std::vector<T>& list, T x, Key key) {
  const auto same =
      std::find_if(list.begin(), list.end(), [&](const T& o) { return key(o) == key(x); });
  if (same != list.end()) {
    ++same->layers;
  } else {
    list.push_back(std::move(x));
  }
}

}  // namespace

std::vector<ConvShape> model_conv_shapes(const model::LayerGraph& graph, std::int64_t batch) {
  std::vector<ConvShape> out;
  for (auto v : graph.order()) {
    const auto& l = graph.layer(v);
    if (l.op->kind() == "conv2d") {
      add_unique(out, conv_shape(graph, l, batch), [](const ConvShape& c) { return c.str(); });
    }
  }
  return out;
}

std::vector<GemmShape> model_gemm_shapes(const model::LayerGraph& graph, std::int64_t batch) {
  std::vector<GemmShape> out;
  const auto key = [](const GemmShape& g) { return std::tuple(g.m, g.n, g.k, g.groups); };
  for (auto v : graph.order()) {
    const auto& l = graph.layer(v);
    if (l.op->kind() == "conv2d") {
      add_unique(out, conv_shape(graph, l, batch).gemm(), key);
    } else if (l.op->kind() == "linear") {
      const auto& in = graph.layer(l.inputs.at(0)).output.shape;
      GemmShape g;
      g.m = batch;
      for (std::size_t i = 0; i + 1 < in.size(); ++i) g.m *= in[i];  // [S, features]: m = B S
      g.n = l.output.shape.back();
      g.k = in.back();
      g.layer = l.name;
      add_unique(out, g, key);
    }
  }
  return out;
}

void im2col(const ConvShape& s, const float* input, float* cols) {
  const std::int64_t pixels = s.out_h * s.out_w;
  const std::int64_t n = s.batch * pixels;
  // Caffe's im2col_cpu extended over the batch: row (c, ky, kx), column (b, oy, ox), row-major,
  // so each row is written contiguously; padding reads as 0.
  for (std::int64_t c = 0; c < s.in_c; ++c) {
    for (std::int64_t ky = 0; ky < s.kernel_h; ++ky) {
      for (std::int64_t kx = 0; kx < s.kernel_w; ++kx) {
        float* row = cols + ((c * s.kernel_h + ky) * s.kernel_w + kx) * n;
        for (std::int64_t b = 0; b < s.batch; ++b) {
          const float* image = input + (b * s.in_c + c) * s.in_h * s.in_w;
          for (std::int64_t oy = 0; oy < s.out_h; ++oy) {
            float* dst = row + b * pixels + oy * s.out_w;
            const std::int64_t iy = oy * s.stride_h - s.pad_h + ky * s.dilation_h;
            if (iy < 0 || iy >= s.in_h) {
              std::fill(dst, dst + s.out_w, 0.0f);
              continue;
            }
            const float* src = image + iy * s.in_w;
            for (std::int64_t ox = 0; ox < s.out_w; ++ox) {
              const std::int64_t ix = ox * s.stride_w - s.pad_w + kx * s.dilation_w;
              dst[ox] = ix >= 0 && ix < s.in_w ? src[ix] : 0.0f;
            }
          }
        }
      }
    }
  }
}

void col2im_add(const ConvShape& s, const float* cols, float* input_grad) {
  const std::int64_t pixels = s.out_h * s.out_w;
  const std::int64_t n = s.batch * pixels;
  // The transpose of im2col (Caffe's col2im_cpu): every column entry adds into the input pixel
  // it was copied from; padding positions are dropped.
  for (std::int64_t c = 0; c < s.in_c; ++c) {
    for (std::int64_t ky = 0; ky < s.kernel_h; ++ky) {
      for (std::int64_t kx = 0; kx < s.kernel_w; ++kx) {
        const float* row = cols + ((c * s.kernel_h + ky) * s.kernel_w + kx) * n;
        for (std::int64_t b = 0; b < s.batch; ++b) {
          float* image = input_grad + (b * s.in_c + c) * s.in_h * s.in_w;
          for (std::int64_t oy = 0; oy < s.out_h; ++oy) {
            const std::int64_t iy = oy * s.stride_h - s.pad_h + ky * s.dilation_h;
            if (iy < 0 || iy >= s.in_h) continue;
            const float* src = row + b * pixels + oy * s.out_w;
            float* dst = image + iy * s.in_w;
            for (std::int64_t ox = 0; ox < s.out_w; ++ox) {
              const std::int64_t ix = ox * s.stride_w - s.pad_w + kx * s.dilation_w;
              if (ix >= 0 && ix < s.in_w) dst[ix] += src[ox];
            }
          }
        }
      }
    }
  }
}

void conv_forward_im2col(const ConvShape& s, const float* input, const float* weight, float* cols,
                         float* output) {
  im2col(s, input, cols);
  const std::int64_t n = s.batch * s.out_h * s.out_w;
  // One product per group: output rows of the group = its weights x its rows of cols.
  const GemmShape g = s.gemm();
  Eigen::Map<const RowMajorF> w(weight, s.out_c, g.k);
  Eigen::Map<const RowMajorF> x(cols, s.in_c * s.kernel_h * s.kernel_w, n);
  Eigen::Map<RowMajorF> y(output, s.out_c, n);
  for (std::int64_t grp = 0; grp < s.groups; ++grp) {
    y.middleRows(grp * g.m, g.m).noalias() =
        w.middleRows(grp * g.m, g.m) * x.middleRows(grp * g.k, g.k);
  }
}

Benchmark stream_copy_benchmark(const std::vector<double>& array_bytes) {
  return stream_benchmark("copy", 2, array_bytes);
}

Benchmark stream_triad_benchmark(const std::vector<double>& array_bytes) {
  return stream_benchmark("triad", 3, array_bytes);
}

BenchPoint gemm_point(const GemmShape& g, const std::string& model, std::int64_t batch,
                      double element_bytes) {
  BenchPoint p;
  p.flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) *
            static_cast<double>(g.k);  // one product; a grouped conv's groups are separate calls
  p.shape = g.str();
  p.params = {{"layer", g.layer},
              {"model", model},
              {"batch", std::to_string(batch)},
              {"layers", std::to_string(g.layers)},
              {"operand_bytes",
               count(element_bytes * static_cast<double>(g.m * g.k + g.k * g.n + g.m * g.n))}};
  if (g.groups > 1) p.params["groups"] = std::to_string(g.groups);
  return p;
}

Benchmark gemm_benchmark(const std::vector<GemmShape>& shapes, const std::string& model,
                         std::int64_t batch) {
  Benchmark bench;
  bench.op = "gemm";
  auto by_shape = std::make_shared<std::map<std::string, GemmShape>>();
  for (const auto& g : shapes) {
    const BenchPoint p = gemm_point(g, model, batch, 4);
    bench.points.push_back(p);
    (*by_shape)[p.shape] = g;
  }
  struct State {
    Eigen::MatrixXf a, b, c;
  };
  auto s = std::make_shared<State>();
  bench.setup = [s, by_shape](const BenchPoint& p) {
    const GemmShape& g = by_shape->at(p.shape);
    // Random() and Zero() write every element (the first touch) before timing.
    s->a = Eigen::MatrixXf::Random(g.m, g.k);
    s->b = Eigen::MatrixXf::Random(g.k, g.n);
    s->c = Eigen::MatrixXf::Zero(g.m, g.n);
  };
  bench.run = [s] {
    s->c.noalias() = s->a * s->b;
    clobber_memory();
  };
  bench.teardown = [s] { *s = State{}; };
  return bench;
}

Benchmark conv_fwd_benchmark(const std::vector<ConvShape>& shapes, const std::string& model) {
  Benchmark bench;
  bench.op = "conv_fwd";
  auto by_shape = std::make_shared<std::map<std::string, ConvShape>>();
  for (const auto& c : shapes) {
    BenchPoint p;
    p.flops = c.flops();
    p.shape = c.str();
    const auto cols = static_cast<double>(c.in_c * c.kernel_h * c.kernel_w) *
                      static_cast<double>(c.batch * c.out_h * c.out_w);
    p.params = {{"layer", c.layer},
                {"model", model},
                {"layers", std::to_string(c.layers)},
                {"method", "im2col+gemm"},
                {"im2col_bytes", count(4 * cols)}};
    bench.points.push_back(p);
    (*by_shape)[p.shape] = c;
  }
  struct State {
    ConvShape shape;
    Eigen::VectorXf input, weight, cols, output;
  };
  auto s = std::make_shared<State>();
  bench.setup = [s, by_shape](const BenchPoint& p) {
    const ConvShape& c = by_shape->at(p.shape);
    s->shape = c;
    const auto in = c.batch * c.in_c * c.in_h * c.in_w;
    const auto w = c.out_c * (c.in_c / c.groups) * c.kernel_h * c.kernel_w;
    const auto k = c.in_c * c.kernel_h * c.kernel_w;
    const auto n = c.batch * c.out_h * c.out_w;
    s->input = Eigen::VectorXf::Random(in);
    s->weight = Eigen::VectorXf::Random(w);
    s->cols = Eigen::VectorXf::Zero(k * n);
    s->output = Eigen::VectorXf::Zero(c.out_c * n);
  };
  bench.run = [s] {
    conv_forward_im2col(s->shape, s->input.data(), s->weight.data(), s->cols.data(),
                        s->output.data());
    clobber_memory();
  };
  bench.teardown = [s] { *s = State{}; };
  return bench;
}

const std::vector<std::string>& cpu_ops() {
  static const std::vector<std::string> ops = {"copy", "triad", "gemm", "conv_fwd"};
  return ops;
}

CpuPlan cpu_benchmarks(const CpuOptions& o) {
  if (o.ops.empty()) fail_at({}, "--ops", "names no operation");
  for (const auto& op : o.ops) {
    if (std::find(cpu_ops().begin(), cpu_ops().end(), op) == cpu_ops().end()) {
      fail_at({}, "--ops",
              fmt::format("'{}' is not a CPU benchmark{} (they are: {})", op,
                          did_you_mean(op, cpu_ops()), fmt::join(cpu_ops(), ", ")));
    }
  }
  auto wants = [&](const char* op) {
    return std::find(o.ops.begin(), o.ops.end(), op) != o.ops.end();
  };
  if (o.batch < 1) fail_at({}, "--batch", fmt::format("must be positive, got {}", o.batch));
  if (!(o.max_flops > 0)) fail_at({}, "--max-flops", "must be positive");
  if (o.conv_layers < 1) fail_at({}, "--conv-layers", "must be at least 1");

  CpuPlan plan;
  if (wants("copy") || wants("triad")) {
    const auto sizes = geometric_sizes(o.from_bytes, o.to_bytes, o.factor, sizeof(double));
    if (wants("copy")) plan.benchmarks.push_back(stream_copy_benchmark(sizes));
    if (wants("triad")) plan.benchmarks.push_back(stream_triad_benchmark(sizes));
  }
  if (!wants("gemm") && !wants("conv_fwd")) return plan;

  const auto graph = model::load_model(o.model);
  const auto too_big = [&](double flops) { return flops > o.max_flops; };
  if (wants("gemm")) {
    std::vector<GemmShape> kept;
    std::size_t skipped = 0;
    for (const auto& g : model_gemm_shapes(graph, o.batch)) {
      // A grouped convolution's product is one call per group: its size is one group's.
      if (too_big(2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) *
                  static_cast<double>(g.k))) {
        ++skipped;
      } else {
        kept.push_back(g);
      }
    }
    if (skipped > 0) {
      plan.notes.push_back(fmt::format(
          "gemm: {} of the {} shapes of {} at batch {} left out, above --max-flops {} per call",
          skipped, skipped + kept.size(), graph.name(), o.batch, format_flops(Flops(o.max_flops))));
    }
    plan.benchmarks.push_back(gemm_benchmark(kept, graph.name(), o.batch));
  }
  if (wants("conv_fwd") && o.conv_layers > 0) {
    std::vector<ConvShape> fit;
    for (const auto& c : model_conv_shapes(graph, o.batch)) {
      if (!too_big(c.flops())) fit.push_back(c);
    }
    // `conv_layers` of them spread evenly over the model (first, last and between), so early
    // (large images, few channels) and late (small images, many channels) layers are both seen.
    std::vector<ConvShape> chosen;
    const std::size_t want =
        std::min<std::size_t>(static_cast<std::size_t>(o.conv_layers), fit.size());
    for (std::size_t i = 0; i < want; ++i) {
      const std::size_t at =
          want == 1
              ? 0
              : static_cast<std::size_t>(std::llround(static_cast<double>(i * (fit.size() - 1)) /
                                                      static_cast<double>(want - 1)));
      chosen.push_back(fit[at]);
    }
    plan.notes.push_back(fmt::format(
        "conv_fwd: {} of the {} distinct convolutions of {} at batch {} within --max-flops {}",
        chosen.size(), fit.size(), graph.name(), o.batch, format_flops(Flops(o.max_flops))));
    plan.benchmarks.push_back(conv_fwd_benchmark(chosen, graph.name()));
  }
  return plan;
}

}  // namespace dlsim::calibrate
