#include "simulator/compute.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "common/error.hpp"

namespace dlsim::simulator {

Precision activation_precision(TrainingPrecision p) {
  switch (p) {
    case TrainingPrecision::kFp32:
    case TrainingPrecision::kTf32:
      return Precision::kFp32;
    case TrainingPrecision::kBf16:
      return Precision::kBf16;
    case TrainingPrecision::kFp16:
    case TrainingPrecision::kAmp:
      break;
  }
  return Precision::kFp16;
}
Bytes gradient_element(TrainingPrecision p) {
  return element_size(p == TrainingPrecision::kFp16 ? Precision::kFp16 : Precision::kFp32);
}

std::optional<Optimizer> parse_optimizer(const std::string& s) {
  if (s == "sgd") return Optimizer::kSgd;
  if (s == "momentum") return Optimizer::kMomentum;
  if (s == "adam") return Optimizer::kAdam;
  return std::nullopt;
}
std::string to_string(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kAdam:
      return "adam";
    case Optimizer::kMomentum:
      break;
  }
  return "momentum";
}
int optimizer_states(Optimizer o) {
  return o == Optimizer::kSgd ? 0 : o == Optimizer::kMomentum ? 1 : 2;
}

namespace {

// The roofline's two terms, arithmetic and traffic (s).
std::pair<double, double> roofline_terms(Flops flops, Bytes bytes, FlopRate peak,
                                         const hardware::EfficiencyCurve& c, Bandwidth memory,
                                         const hardware::EfficiencyCurve& m) {
  // F / (P e(F)) with e(F) = e F / (F + h) is (F + h) / (P e): finite for every F > 0.
  return {flops.value() > 0 ? (flops.value() + c.half) / (peak.value() * c.max) : 0.0,
          bytes.value() > 0 ? (bytes.value() + m.half) / (memory.value() * m.max) : 0.0};
}

}  // namespace

Seconds kernel_time(Flops flops, Bytes bytes, FlopRate peak, const hardware::EfficiencyCurve& c,
                    Bandwidth memory, const hardware::EfficiencyCurve& m, Seconds launch) {
  if (flops.value() <= 0 && bytes.value() <= 0) return Seconds(0);
  const auto [compute, traffic] = roofline_terms(flops, bytes, peak, c, memory, m);
  return launch + Seconds(std::max(compute, traffic));
}

bool memory_bound(Flops flops, Bytes bytes, FlopRate peak, const hardware::EfficiencyCurve& c,
                  Bandwidth memory, const hardware::EfficiencyCurve& m) {
  const auto [compute, traffic] = roofline_terms(flops, bytes, peak, c, memory, m);
  return traffic > compute;
}

namespace {

bool is_conv(const std::string& op) { return op == "conv2d"; }

// The dense peak GEMMs and convolutions run at: the profile's `tf32` entry for tf32 (fp32 where
// the GPU has none), its fp16 or bf16 entry for the mixed precisions.
FlopRate gemm_peak_for(const hardware::GpuSpec& gpu, TrainingPrecision p) {
  switch (p) {
    case TrainingPrecision::kFp32:
      return gpu.peak_for(Precision::kFp32);
    case TrainingPrecision::kTf32: {
      const auto it = gpu.peak.find("tf32");
      return it != gpu.peak.end() ? it->second : gpu.peak_for(Precision::kFp32);
    }
    case TrainingPrecision::kBf16:
      return gpu.peak_for(Precision::kBf16);
    case TrainingPrecision::kFp16:
    case TrainingPrecision::kAmp:
      break;
  }
  return gpu.peak_for(Precision::kFp16);
}

}  // namespace

std::optional<std::pair<Seconds, Seconds>> measured_layer(const hardware::GpuSpec& gpu,
                                                          const std::string& signature,
                                                          std::int64_t batch,
                                                          TrainingPrecision precision) {
  const auto wanted = to_string(precision);
  std::vector<const hardware::KernelEntry*> at;  // this layer at the profile's threads
  for (const auto& k : gpu.kernels) {
    if (k.threads == gpu.threads && k.layer == signature && k.precision == wanted) {
      if (k.batch == batch) return std::make_pair(k.forward, k.backward);
      at.push_back(&k);
    }
  }
  if (at.empty()) return std::nullopt;
  const auto b = static_cast<double>(batch);
  std::sort(at.begin(), at.end(), [b](const auto* x, const auto* y) {
    const double dx = std::abs(static_cast<double>(x->batch) - b);
    const double dy = std::abs(static_cast<double>(y->batch) - b);
    return dx != dy ? dx < dy : x->batch < y->batch;
  });
  if (at.size() == 1) {
    const double f = b / static_cast<double>(at[0]->batch);
    return std::make_pair(at[0]->forward * f, at[0]->backward * f);
  }
  const auto& p = *at[0];
  const auto& q = *at[1];
  const double w = (b - static_cast<double>(p.batch)) / static_cast<double>(q.batch - p.batch);
  const auto line = [w](Seconds y0, Seconds y1) {
    return Seconds(std::max(0.0, y0.value() + w * (y1.value() - y0.value())));
  };
  return std::make_pair(line(p.forward, q.forward), line(p.backward, q.backward));
}

ComputeProfile compute_profile(const model::ModelStats& stats, const hardware::GpuSpec& gpu,
                               const ComputeOptions& options) {
  // GEMM-like kernels (conv, linear, matmul) use tensor cores in tf32, fp16, amp and bf16;
  // everything else runs on the vector units at the fp32 rate and is bound by memory traffic in
  // practice.
  const FlopRate gemm_peak = gemm_peak_for(gpu, options.precision);
  const FlopRate vector_peak = gpu.peak_for(Precision::kFp32);
  auto time = [&](const model::LayerStats& l, Flops f, Bytes b) {
    const bool gemm = l.forward_macs > 0;
    return kernel_time(f, b, gemm ? gemm_peak : vector_peak, is_conv(l.op) ? gpu.conv : gpu.gemm,
                       gpu.memory_bandwidth, gpu.memory, gpu.kernel_launch);
  };
  // A layer's backward kernels (input gradient, weight gradient; their traffic split by FLOP
  // share): each one's roofline time and whether it is memory-bound.
  auto backward_kernels = [&](const model::LayerStats& l) {
    const Bytes traffic = l.backward_read_bytes + l.backward_write_bytes;
    const double total = l.backward_flops().value();
    const double wshare = total > 0 ? l.backward_weight_flops.value() / total : 0.0;
    const bool gemm = l.forward_macs > 0;
    std::array<std::pair<Seconds, bool>, 2> k;
    const std::array<std::pair<Flops, Bytes>, 2> work = {
        std::pair{l.backward_input_flops, traffic * (1 - wshare)},
        std::pair{l.backward_weight_flops, traffic * wshare}};
    for (std::size_t i = 0; i < 2; ++i) {
      k[i] = {time(l, work[i].first, work[i].second),
              memory_bound(work[i].first, work[i].second, gemm ? gemm_peak : vector_peak,
                           is_conv(l.op) ? gpu.conv : gpu.gemm, gpu.memory_bandwidth, gpu.memory)};
    }
    return k;
  };

  ComputeProfile p;
  std::map<model::LayerGraph::Vertex, std::size_t> index;
  for (std::size_t i = 0; i < stats.layers.size(); ++i) index[stats.layers[i].vertex] = i;
  p.layers.resize(stats.layers.size());
  // Measured layer times stand for runs in their own precision at the profile's thread count.
  const bool tables = !gpu.kernels.empty();
  for (std::size_t i = 0; i < stats.layers.size(); ++i) {
    const auto& l = stats.layers[i];
    auto& t = p.layers[i];
    p.layer_names.push_back(l.name);
    if (l.op != "input") ++p.layers_with_work;
    // A layer table's step feeds its data without a kernel (run torch measures no input layer).
    if (tables && l.op == "input") continue;
    // Input and weight gradients are separate kernels.
    const auto kernels = backward_kernels(l);
    Seconds roofline, memory_side;
    for (const auto& [d, bound] : kernels) {
      roofline += d;
      if (bound) memory_side += d;
    }
    if (tables) {
      if (const auto m = measured_layer(gpu, l.signature, stats.batch, options.precision)) {
        t.forward = m->first;
        t.backward = m->second;
        ++p.measured_layers;
        p.measured += t.forward + t.backward;
        if (roofline.value() > 0) {
          p.backward_memory_bound += t.backward * (memory_side.value() / roofline.value());
        }
        continue;
      }
    }
    t.forward = time(l, l.forward_flops, l.forward_read_bytes + l.forward_write_bytes);
    t.backward = roofline;
    p.backward_memory_bound += memory_side;
  }
  // A profile with layer tables predicts the models it measured: one none of whose layers is in
  // the table would silently fall back to the base device's uncalibrated roofline.
  if (tables && p.measured_layers == 0) {
    if (p.layers_with_work > 0) {
      fail_at({gpu.about.file}, "node.gpu.layers",
              fmt::format("no layer of {} in {} at {} thread(s) is in the profile's layer table "
                          "({}); measure it (dlcalibrate run torch --model {}{}) and fit again, "
                          "or predict with a profile without layer tables",
                          stats.name, to_string(options.precision), gpu.threads, gpu.kernels_source,
                          stats.name,
                          options.precision == TrainingPrecision::kFp32
                              ? ""
                              : " --precision " + to_string(options.precision)));
    }
  }
  const double grad_elem = gradient_element(options.precision).value();
  for (std::size_t g = 0; g < stats.gradients.size(); ++g) {
    p.layers[index.at(stats.gradients[g].vertex)].gradients.push_back(static_cast<int>(g));
    p.gradient_bytes.push_back(static_cast<double>(stats.gradients[g].elements) * grad_elem);
  }

  // The optimizer step reads weights and gradients, reads and writes its states and writes the
  // weights, one memory-bound kernel per tensor (fp32 master values in amp).
  const double per_param = (3.0 + 2.0 * optimizer_states(options.optimizer)) *
                           (options.precision == TrainingPrecision::kFp16 ? 2.0 : 4.0);
  for (const auto& g : stats.gradients) {
    p.update +=
        kernel_time(Flops(0), Bytes(per_param * static_cast<double>(g.elements)), vector_peak,
                    gpu.gemm, gpu.memory_bandwidth, gpu.memory, gpu.kernel_launch);
  }
  if (options.optimizer == Optimizer::kMomentum) {
    std::int64_t elements = 0;
    for (const auto& g : stats.gradients) elements += g.elements;
    const auto tensors = static_cast<std::int64_t>(stats.gradients.size());
    const auto wanted = to_string(options.precision);
    for (const auto& u : gpu.updates) {
      if (u.threads == gpu.threads && u.elements == elements && u.tensors == tensors &&
          u.precision == wanted) {
        p.update = u.time;
        p.measured_update = true;
      }
    }
    if (p.measured_update) p.measured += p.update;
  }
  for (const auto& t : p.layers) {
    p.forward += t.forward;
    p.backward += t.backward;
  }

  if (options.anchor_throughput) {
    const double x = *options.anchor_throughput;
    if (!(x > 0)) {
      fail_at({}, "anchor_throughput", fmt::format("must be positive, got {}", x));
    }
    p.scale = (static_cast<double>(stats.batch) / x) / p.step().value();
    for (auto& t : p.layers) {
      t.forward *= p.scale;
      t.backward *= p.scale;
    }
    p.forward *= p.scale;
    p.backward *= p.scale;
    p.backward_memory_bound *= p.scale;
    p.update *= p.scale;
    p.measured *= p.scale;
  }
  return p;
}

Seconds memory_kernel_time(const hardware::GpuSpec& gpu, Bytes traffic) {
  return kernel_time(Flops(0), traffic, gpu.peak_for(Precision::kFp32), gpu.gemm,
                     gpu.memory_bandwidth, gpu.memory, gpu.kernel_launch);
}

Seconds fp16_cast_time(const hardware::GpuSpec& gpu, std::int64_t elements, Bytes wide) {
  return memory_kernel_time(gpu, Bytes(static_cast<double>(elements) * (wide.value() + 2.0)));
}

MemoryUse memory_use(const model::ModelStats& stats, const ComputeOptions& options, Bytes buffers) {
  const double params = static_cast<double>(stats.params);
  MemoryUse m;
  switch (options.precision) {
    case TrainingPrecision::kFp32:
    case TrainingPrecision::kTf32:
      m.weights = Bytes(4 * params);
      break;
    case TrainingPrecision::kFp16:
      m.weights = Bytes(2 * params);
      break;
    case TrainingPrecision::kAmp:
    case TrainingPrecision::kBf16:
      m.weights = Bytes(6 * params);  // fp32 master copy + 16-bit working copy
      break;
  }
  m.gradients = Bytes(params * gradient_element(options.precision).value());
  // States in fp32, or fp16 when everything is (the update's traffic counts them the same way).
  const double state_elem = options.precision == TrainingPrecision::kFp16 ? 2.0 : 4.0;
  m.optimizer_state = Bytes(params * state_elem * optimizer_states(options.optimizer));
  m.activations = stats.activation_bytes;
  m.buffers = buffers;
  // cuDNN's workspace: the largest layer's traffic, the size an implicit-GEMM or FFT algorithm
  // may ask for (a conservative bound; frameworks cap it near this).
  for (const auto& l : stats.layers) {
    m.workspace = std::max(m.workspace, l.forward_read_bytes + l.forward_write_bytes);
  }
  m.runtime = kRuntimeReserve;
  return m;
}

}  // namespace dlsim::simulator
