#include "calibrate/torch_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <ostream>

#include "calibrate/driver.hpp"
#include "calibrate/results.hpp"
#include "calibrate/torch_step.hpp"
#include "common/error.hpp"
#include "model/analysis.hpp"
#include "model/loader.hpp"

namespace dlsim::calibrate {

void check_torch_step(const TorchStepOptions& options) {
  if (options.threads < 1) {
    fail_at({}, "--threads", fmt::format("must be at least 1, got {}", options.threads));
  }
  if (options.precision != TorchStepOptions::Precision::kFp32 && !options.cuda) {
    fail_at(
        {}, "--precision",
        fmt::format("{} runs on a CUDA device only (--device cuda)", to_string(options.precision)));
  }
  if (!have_torch()) {
    fail_at({}, "--device",
            "this build has no libtorch (install Debian's libtorch-dev and build again: "
            "DLSIM_WITH_TORCH)");
  }
  if (options.cuda && !torch_has_cuda()) {
    fail_at({}, "--device",
            fmt::format("cuda: this libtorch ({}) sees no CUDA device", torch_version()));
  }
}

std::optional<TorchStepOptions::Precision> parse_torch_precision(const std::string& s) {
  using P = TorchStepOptions::Precision;
  if (s == "fp32") return P::kFp32;
  if (s == "tf32") return P::kTf32;
  if (s == "amp") return P::kAmp;
  if (s == "bf16") return P::kBf16;
  return std::nullopt;
}

std::string to_string(TorchStepOptions::Precision p) {
  using P = TorchStepOptions::Precision;
  switch (p) {
    case P::kTf32:
      return "tf32";
    case P::kAmp:
      return "amp";
    case P::kBf16:
      return "bf16";
    case P::kFp32:
      break;
  }
  return "fp32";
}

namespace {

std::string precision_words(TorchStepOptions::Precision p) {
  using P = TorchStepOptions::Precision;
  switch (p) {
    case P::kTf32:
      return "float32 with TF32 in cuBLAS and cuDNN";
    case P::kAmp:
      return "float32 parameters, forward under autocast(float16), GradScaler";
    case P::kBf16:
      return "float32 parameters, forward under autocast(bfloat16), no scaler";
    case P::kFp32:
      break;
  }
  return "float32 (TF32 off)";
}

}  // namespace

std::size_t run_torch(const TorchRunOptions& o, const std::string& path,
                      const std::string& command_line, std::ostream* log) {
  if (o.threads < 1 || o.threads > 4096) {
    fail_at({}, "--threads", fmt::format("must be in 1..4096, got {}", o.threads));
  }
  if (o.iters < 1) fail_at({}, "--iters", fmt::format("must be at least 1, got {}", o.iters));
  if (o.warmup < 0) fail_at({}, "--warmup", fmt::format("must not be negative, got {}", o.warmup));
  if (o.device != "cpu" && o.device != "cuda") {
    fail_at({}, "--device", fmt::format("'{}' is not cpu or cuda", o.device));
  }
  const auto precision = parse_torch_precision(o.precision);
  if (!precision) {
    fail_at({}, "--precision", fmt::format("'{}' is not fp32, tf32, amp or bf16", o.precision));
  }
  TorchStepOptions step_options;
  step_options.threads = o.threads;
  step_options.cuda = o.device == "cuda";
  step_options.precision = *precision;
  if (std::error_code ec; std::filesystem::exists(path, ec)) {
    fail_at({path}, "", "already exists (choose another name)");
  }
  const auto graph = model::load_model(o.model);
  check_torch_step(step_options);  // before the results file is made

  Provenance prov = host_provenance(command_line);
  prov.versions["libtorch"] = torch_version();
  prov.notes.push_back(fmt::format(
      "libtorch step of {}: every layer's ATen call at the model's shapes, {} on {}, {} intra-op "
      "thread(s); {} untimed then {} timed steps per batch size; each layer's forward and "
      "backward timed on its own (its inputs enter as leaves), {}",
      graph.name(), precision_words(step_options.precision), o.device, o.threads, o.warmup, o.iters,
      step_options.cuda
          ? "CUDA events between layers on the stream (no synchronization); host_samples_s: "
            "the host's wall clock from the layer's first call to its end event's record"
          : "wall clock"));
  ResultsWriter out(path, prov);
  std::size_t written = 0;
  for (const auto batch : o.batches) {
    auto step = make_torch_step(graph, batch, o.seed, step_options);
    auto stats = model::analyze(graph, batch, Precision::kFp32);
    model::add_signatures(stats, graph);
    const auto none = [](int) {};
    for (int i = 0; i < o.warmup; ++i) {
      step->forward();
      step->backward(none);
      step->update(1.0f);
    }
    // Each timed step's per-layer times: the sums after it minus those before.
    std::vector<std::vector<double>> fwd(stats.layers.size()), bwd(stats.layers.size());
    std::vector<std::vector<double>> fwd_host(stats.layers.size()), bwd_host(stats.layers.size());
    std::vector<double> update_s;
    step->start_layer_timing();
    std::vector<LayerTime> before = step->layer_times();
    for (int i = 0; i < o.iters; ++i) {
      step->forward();
      step->backward(none);
      const auto t0 = std::chrono::steady_clock::now();
      step->update(1.0f);
      update_s.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      const auto after = step->layer_times();
      for (std::size_t l = 0; l < after.size(); ++l) {
        fwd[l].push_back(after[l].forward_s - before[l].forward_s);
        bwd[l].push_back(after[l].backward_s - before[l].backward_s);
        fwd_host[l].push_back(after[l].forward_host_s - before[l].forward_host_s);
        bwd_host[l].push_back(after[l].backward_host_s - before[l].backward_host_s);
      }
      before = after;
    }
    // One record per distinct layer: the layers of one signature run the same kernels, so
    // their samples are pooled (the median per step of the per-layer times).
    std::map<std::string, std::vector<std::size_t>> by_signature;
    for (std::size_t l = 0; l < stats.layers.size(); ++l) {
      const auto& ls = stats.layers[l];
      if (ls.op == "input") continue;
      by_signature[ls.signature].push_back(l);
    }
    for (const auto& [signature, layers] : by_signature) {
      const auto& first = stats.layers[layers.front()];
      for (const bool forward : {true, false}) {
        Measurement m;
        m.op = forward ? "layer_forward" : "layer_backward";
        m.backend = "torch";
        m.shape = signature;
        m.flops = (forward ? first.forward_flops : first.backward_flops()).value();
        for (int i = 0; i < o.iters; ++i) {
          double sum = 0;
          for (auto l : layers) sum += (forward ? fwd : bwd)[l][static_cast<std::size_t>(i)];
          m.samples_s.push_back(sum / static_cast<double>(layers.size()));
          double host = 0;
          for (auto l : layers) {
            host += (forward ? fwd_host : bwd_host)[l][static_cast<std::size_t>(i)];
          }
          m.host_samples_s.push_back(host / static_cast<double>(layers.size()));
        }
        // The host's times where they were measured (CUDA events): all positive or none.
        if (std::any_of(m.host_samples_s.begin(), m.host_samples_s.end(),
                        [](double x) { return !(x > 0); })) {
          m.host_samples_s.clear();
        }
        m.params["batch"] = std::to_string(batch);
        m.params["threads"] = std::to_string(o.threads);
        m.params["device"] = o.device;
        m.params["precision"] = o.precision;
        m.params["model"] = graph.name();
        m.params["layer"] = first.name;
        m.params["op_kind"] = first.op;
        m.params["instances"] = std::to_string(layers.size());
        out.add(m);
        ++written;
      }
    }
    Measurement u;
    u.op = "optimizer_update";
    u.backend = "torch";
    std::int64_t elements = 0;
    for (const auto& g : stats.gradients) elements += g.elements;
    u.bytes = 4.0 * static_cast<double>(elements);
    u.shape = fmt::format("sgd momentum elements={} tensors={}", elements, stats.gradients.size());
    u.samples_s = update_s;
    u.params["batch"] = std::to_string(batch);
    u.params["threads"] = std::to_string(o.threads);
    u.params["device"] = o.device;
    u.params["precision"] = o.precision;
    u.params["model"] = graph.name();
    u.params["elements"] = std::to_string(elements);
    u.params["tensors"] = std::to_string(stats.gradients.size());
    out.add(u);
    ++written;
    if (log) {
      double f = 0, b = 0;
      for (std::size_t l = 0; l < fwd.size(); ++l) {
        for (double x : fwd[l]) f += x;
        for (double x : bwd[l]) b += x;
      }
      double up = 0;
      for (double x : update_s) up += x;
      *log << fmt::format(
          "dlcalibrate: {} batch {}: forward {:.1f} ms, backward {:.1f} ms, update {:.1f} ms per "
          "step ({}; mean of {} steps)\n",
          graph.name(), batch, 1e3 * f / o.iters, 1e3 * b / o.iters, 1e3 * up / o.iters,
          step->device(), o.iters);
    }
  }
  Provenance end;
  end.load_after = load_average();
  out.finish(end);
  return written;
}

}  // namespace dlsim::calibrate
