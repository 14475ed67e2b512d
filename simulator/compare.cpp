#include "simulator/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/error.hpp"
#include "hardware/loader.hpp"
#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

bool is_framework(const std::string& name) { return framework_policies().find(name) != nullptr; }

bool is_ps_framework(const std::string& name) {
  return name == "byteps" || name == "tf-ps" || name == "mxnet-kvstore";
}

// Frameworks that only allreduce: their users who ask for parameter servers run BytePS, which
// keeps their training script (Horovod's API for PyTorch, TensorFlow, Keras and MXNet).
bool is_allreduce_framework(const std::string& name) {
  return name == "horovod" || name == "keras" || name == "pytorch-ddp";
}

// A framework scheme on the base job: the framework with its own defaults, taking from the base
// only the parameter-server settings it understands.
PredictOptions framework_scheme(const PredictOptions& base, const std::string& scheme) {
  PredictOptions o = base;
  o.strategy.reset();
  if (scheme == base.framework) return o;
  o.framework = scheme;
  const auto& b = base.framework_options;
  FrameworkOptions f;
  if (is_ps_framework(scheme)) {
    f.ps_servers = b.ps_servers;
    f.ps_colocated = b.ps_colocated;
    if (scheme != "byteps") f.ps_on_gpu = b.ps_on_gpu;
  }
  if (scheme == "byteps") f.partition_bytes = b.partition_bytes;
  // TensorFlow's XLA stays for the schemes that run under the same TensorFlow script, and fp16
  // compression for every scheme that offers it (BytePS takes Horovod's Compression API, DDP
  // its fp16 hook).
  if (scheme == "horovod" || scheme == "keras" || scheme == "byteps") f.xla = b.xla;
  if (scheme == "horovod" || scheme == "keras" || scheme == "byteps" || scheme == "pytorch-ddp") {
    f.compression = b.compression;
  }
  o.framework_options = f;
  return o;
}

// A scheme name ending in "+fp16" is the same scheme with fp16 gradient compression.
constexpr std::string_view kFp16Suffix = "+fp16";
bool with_fp16(const std::string& scheme) {
  return scheme.size() > kFp16Suffix.size() &&
         scheme.compare(scheme.size() - kFp16Suffix.size(), kFp16Suffix.size(), kFp16Suffix) == 0;
}

// The frameworks that offer fp16 gradient compression (docs/simulator.md, "Gradient
// compression").
bool offers_compression(const std::string& framework) {
  return framework == "horovod" || framework == "keras" || framework == "byteps" ||
         framework == "pytorch-ddp";
}

// The prediction options of one scheme on the base job: a framework as above; an algorithm
// under the base framework with every base setting, except `ps` under a framework without
// parameter servers, which runs as BytePS; "+fp16" adds fp16 compression.
PredictOptions scheme_options(const PredictOptions& base, const std::string& scheme) {
  if (with_fp16(scheme)) {
    const std::string plain = scheme.substr(0, scheme.size() - kFp16Suffix.size());
    if (with_fp16(plain)) {
      fail_at({}, "strategy", fmt::format("'{}': '+fp16' is given twice", scheme));
    }
    auto o = scheme_options(base, plain);
    if (!offers_compression(o.framework)) {
      fail_at({}, "strategy",
              fmt::format("'{}': {} has no fp16 gradient compression (horovod, keras, byteps and "
                          "pytorch-ddp have)",
                          scheme, o.framework));
    }
    o.framework_options.compression = GradientCompression::kFp16;
    return o;
  }
  if (is_framework(scheme)) return framework_scheme(base, scheme);
  if (scheme == "ps" && is_allreduce_framework(base.framework)) {
    return framework_scheme(base, "byteps");
  }
  PredictOptions o = base;
  o.strategy = scheme;
  return o;
}

// One scheme's prediction. `ps` run as BytePS puts its servers on hosts of their own; where the
// workers leave too few free nodes for them and no placement was asked for, it runs them beside
// the workers instead (BytePS's colocated mode), as a user of a full cluster would. `inputs` are
// the base job's model and cluster: a scheme changes neither.
Prediction predict_scheme(const PredictOptions& base, const std::string& scheme,
                          const PredictInputs& inputs) {
  auto o = scheme_options(base, scheme);
  const bool byteps_ps =
      (scheme == "ps" || scheme == "ps+fp16") && is_allreduce_framework(base.framework);
  if (!byteps_ps || base.framework_options.ps_colocated.has_value()) return predict(o, inputs);
  try {
    return predict(o, inputs);
  } catch (const InputError& dedicated) {
    o.framework_options.ps_colocated = true;
    try {
      return predict(o, inputs);
    } catch (const InputError&) {
      throw dedicated;
    }
  }
}

// Index of the best throughput, and of the runner-up (the best of the rest); -1 where absent.
std::pair<int, int> best_two(const std::vector<double>& throughput) {
  int best = -1, second = -1;
  for (int i = 0; i < static_cast<int>(throughput.size()); ++i) {
    const double t = throughput[static_cast<std::size_t>(i)];
    if (!(t > 0)) continue;
    if (best < 0 || t > throughput[static_cast<std::size_t>(best)]) {
      second = best;
      best = i;
    } else if (second < 0 || t > throughput[static_cast<std::size_t>(second)]) {
      second = i;
    }
  }
  return {best, second};
}

std::string verdict_why(const Prediction& w, const std::string& wname, const Prediction& r,
                        const std::string& rname) {
  const std::vector<std::pair<std::string, double>> diff = {
      {"exposed bandwidth time", r.loss.exposed_bandwidth - w.loss.exposed_bandwidth},
      {"latency and small messages",
       r.loss.latency_and_small_messages - w.loss.latency_and_small_messages},
      {"fusion or bucket waiting",
       r.loss.fusion_or_bucket_waiting - w.loss.fusion_or_bucket_waiting},
      {"the parameter-server bottleneck",
       r.loss.parameter_server_bottleneck - w.loss.parameter_server_bottleneck},
      {"communication work on compute",
       r.loss.communication_on_compute - w.loss.communication_on_compute},
      {"stragglers", r.loss.stragglers - w.loss.stragglers}};
  const auto top = *std::max_element(
      diff.begin(), diff.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  // Where the input pipeline bounds the steps, the schemes' own differences hide behind it.
  const double w_wait = w.input_wait_s.value_or(0), r_wait = r.input_wait_s.value_or(0);
  if (w_wait > 0 && r_wait > 0) {
    // Both end when their batches arrive: the pipeline, not the scheme, sets the step.
    return fmt::format(
        "{} wins: {:.1f} samples/s, {:.1f}% more than {}; both steps are held by the input "
        "pipeline ({} waits {:.3f} ms a step, {} {:.3f} ms): the schemes differ only with a "
        "faster pipeline",
        wname, w.throughput, (w.throughput / r.throughput - 1) * 100, rname, wname, w_wait * 1e3,
        rname, r_wait * 1e3);
  }
  const std::string input =
      w_wait > 0 || r_wait > 0
          ? fmt::format("; steps wait for the input pipeline: {} {:.3f} ms, {} {:.3f} ms", wname,
                        w_wait * 1e3, rname, r_wait * 1e3)
          : "";
  return fmt::format(
      "{} wins: {:.1f} samples/s, {:.1f}% more than {}; the step is {:.3f} ms shorter, most of "
      "it {} ({:.3f} ms per step){}",
      wname, w.throughput, (w.throughput / r.throughput - 1) * 100, rname,
      (r.step_time_s - w.step_time_s) * 1e3, top.first, top.second * 1e3, input);
}

// The same job: one framework, strategy and settings (a scheme's name only picks them).
bool same_job(const Prediction& a, const Prediction& b) {
  return a.framework == b.framework && a.strategy == b.strategy &&
         a.policy_settings == b.policy_settings;
}

// The winner at one point of a search, each contender predicted by the first of its schemes; a
// contender that cannot run there (too few nodes for its servers, a GPU count the cluster lacks)
// is listed with the reason.
CrossoverPoint search_point(const PredictOptions& base, const std::vector<std::string>& schemes,
                            const std::vector<std::string>& names, const PredictInputs& inputs,
                            std::string value) {
  CrossoverPoint pt;
  pt.value = std::move(value);
  std::vector<double> throughput;
  for (std::size_t i = 0; i < schemes.size(); ++i) {
    try {
      throughput.push_back(predict_scheme(base, schemes[i], inputs).throughput);
    } catch (const InputError& e) {
      throughput.push_back(0);
      pt.unavailable.push_back(fmt::format("{}: {}", names[i], e.what()));
    }
  }
  const auto [best, second] = best_two(throughput);
  if (best >= 0) {
    pt.winner = names[static_cast<std::size_t>(best)];
    pt.alone = second < 0;
    if (second >= 0) {
      pt.margin = throughput[static_cast<std::size_t>(best)] /
                      throughput[static_cast<std::size_t>(second)] -
                  1;
    }
  }
  return pt;
}

// Margins below this are a tie: closer than the model's own error.
constexpr double kTie = 0.05;

// "ring at 4-16 GPUs; byteps at 32-64 GPUs", or "ring wins at every point searched (4-64 GPUs)";
// a point whose margin is under 5 % is a tie.
std::string summarize(const Crossover& c, const std::string& unit) {
  std::vector<std::pair<std::string, std::vector<std::string>>> runs;  // winner -> values
  for (const auto& p : c.points) {
    if (p.winner.empty()) continue;
    const std::string w = p.alone           ? p.winner + " (alone)"
                          : p.margin < kTie ? "within 5 %"
                                            : p.winner;
    if (runs.empty() || runs.back().first != w) runs.push_back({w, {}});
    runs.back().second.push_back(p.value);
  }
  if (runs.empty()) return "no scheme could run at any point searched";
  auto span = [&](const std::vector<std::string>& v) {
    return v.size() == 1 ? v.front() + unit : fmt::format("{}-{}{}", v.front(), v.back(), unit);
  };
  if (runs.size() == 1) {
    return fmt::format(
        "{} at every point searched ({})",
        runs.front().first == "within 5 %" ? "no scheme wins by 5 %" : runs.front().first + " wins",
        span(runs.front().second));
  }
  std::vector<std::string> parts;
  for (const auto& [w, v] : runs) parts.push_back(fmt::format("{} at {}", w, span(v)));
  return fmt::format("the answer changes: {}", fmt::join(parts, "; "));
}

}  // namespace

namespace {
// How far the GPU-count search doubles past the job.
constexpr int kCrossoverReach = 8;
}  // namespace

// A setting that shapes only some frameworks (fusion threshold, bucket cap, servers, ...) stays
// with the schemes that run such a framework (scheme_options); given where no scheme of the list
// keeps it, it would change nothing: refused, as predict refuses it for its one framework.
void refuse_settings_no_scheme_keeps(const CompareOptions& options) {
  // Each setting's field and whether it is given, for the base job and for each scheme (the
  // framework settings, then the parameter servers', which every parameter-server framework
  // takes and predict refuses elsewhere).
  const auto given = [](const FrameworkOptions& f) {
    auto out = settings_given(f);
    out.emplace_back("ps_servers", f.ps_servers.has_value());
    out.emplace_back("ps_placement", f.ps_colocated.has_value());
    return out;
  };
  std::vector<std::vector<std::pair<std::string_view, bool>>> kept;
  for (const auto& s : options.schemes) {
    kept.push_back(given(scheme_options(options.base, s).framework_options));
  }
  const auto base = given(options.base.framework_options);
  for (std::size_t i = 0; i < base.size(); ++i) {
    if (!base[i].second) continue;
    if (std::any_of(kept.begin(), kept.end(), [&](const auto& k) { return k[i].second; })) {
      continue;
    }
    fail_at({}, base[i].first,
            fmt::format("applies to no scheme of the list ({})", fmt::join(options.schemes, ", ")));
  }
}

Comparison compare(const CompareOptions& options) {
  if (options.schemes.empty()) {
    fail_at({}, "strategy", "expected a list such as ring,tree,byteps");
  }
  std::set<std::string> seen;
  for (const auto& s : options.schemes) {
    if (s.empty()) fail_at({}, "strategy", "an empty name in the list");
    if (!seen.insert(s).second) fail_at({}, "strategy", fmt::format("'{}' given twice", s));
  }
  refuse_settings_no_scheme_keeps(options);
  // The model and the cluster are read once for every scheme and GPU count, and once per
  // network of the network search.
  const PredictInputs inputs = load_inputs(options.base);
  Comparison c;
  for (const auto& s : options.schemes) {
    if (!options.skip_unavailable) {
      c.results.push_back({s, predict_scheme(options.base, s, inputs)});
      continue;
    }
    try {
      c.results.push_back({s, predict_scheme(options.base, s, inputs)});
    } catch (const InputError& e) {
      c.skipped.push_back(fmt::format("{}: {}", s, e.what()));
    }
  }
  if (c.results.empty()) {
    fail_at({}, "strategy",
            fmt::format("none of the schemes can run here ({})", fmt::join(c.skipped, "; ")));
  }
  // One contender per distinct job: `first[k]` is contender k's first result (whose scheme
  // predicts it in the searches), `names[k]` its name.
  std::vector<std::size_t> first;
  std::vector<std::string> names;
  std::vector<std::size_t> group(c.results.size());
  for (std::size_t i = 0; i < c.results.size(); ++i) {
    std::size_t k = 0;
    while (k < first.size() && !same_job(c.results[first[k]].prediction, c.results[i].prediction)) {
      ++k;
    }
    if (k == first.size()) {
      first.push_back(i);
      names.push_back(c.results[i].scheme);
    } else {
      names[k] += "=" + c.results[i].scheme;
    }
    group[i] = k;
  }
  for (std::size_t i = 0; i < c.results.size(); ++i) c.contender.push_back(names[group[i]]);
  std::vector<double> throughput;
  for (std::size_t i : first) throughput.push_back(c.results[i].prediction.throughput);
  const auto [best, second] = best_two(throughput);
  c.winner = first[static_cast<std::size_t>(std::max(best, 0))];
  if (second >= 0) {
    const auto& w = c.results[c.winner];
    const auto& r = c.results[first[static_cast<std::size_t>(second)]];
    c.margin = w.prediction.throughput / r.prediction.throughput - 1;
    c.why = verdict_why(w.prediction, c.contender[c.winner], r.prediction,
                        names[static_cast<std::size_t>(second)]);
    if (c.margin < kTie) c.why = "no scheme is more than 5% faster; " + c.why;
  } else if (first.size() < c.results.size()) {
    c.why = fmt::format("{} are the same job here: nothing to compare", names.front());
  } else {
    c.why = c.results[c.winner].scheme + " is the only scheme given";
  }
  if (!options.crossover || first.size() < 2) return c;
  std::vector<std::string> schemes;
  for (std::size_t i : first) schemes.push_back(c.results[i].scheme);

  // The searches run the chosen engine for one step: tens of predictions.
  auto search = options.base;
  search.iterations = 1;
  // GPU counts: the job's, halved down to 2 and doubled while the cluster has them, up to
  // kCrossoverReach times the job (a job on a small part of a large cluster would otherwise
  // predict every scheme at the whole cluster's size: minutes and gigabytes for BytePS).
  std::vector<int> counts;
  for (int g = options.base.gpus; g >= 2; g /= 2) counts.insert(counts.begin(), g);
  const long long top = std::min<long long>(
      inputs.cluster.gpu_count(), static_cast<long long>(options.base.gpus) * kCrossoverReach);
  for (long long g = options.base.gpus * 2LL; g <= top; g *= 2) {
    counts.push_back(static_cast<int>(g));
  }
  Crossover by_gpus;
  by_gpus.dimension = "gpus";
  for (int g : counts) {
    auto o = search;
    o.gpus = g;
    by_gpus.points.push_back(search_point(o, schemes, names, inputs, std::to_string(g)));
  }
  by_gpus.summary = summarize(by_gpus, " GPUs");
  c.crossovers.push_back(std::move(by_gpus));

  // Networks: every network preset, slowest first.
  std::vector<std::pair<double, std::string>> nets;
  for (const auto& p : hardware::list_presets()) {
    if (p.kind != "network") continue;
    nets.emplace_back(hardware::load_network(p.name).port.bandwidth.value(), p.name);
  }
  std::sort(nets.begin(), nets.end());
  Crossover by_net;
  by_net.dimension = "network";
  for (const auto& [bw, name] : nets) {
    auto o = search;
    o.network = name;
    try {
      by_net.points.push_back(search_point(o, schemes, names, load_inputs(o), name));
    } catch (const InputError& e) {  // the cluster cannot take this network: no scheme runs
      CrossoverPoint pt;
      pt.value = name;
      for (const auto& n : names) {
        pt.unavailable.push_back(fmt::format("{}: {}", n, e.what()));
      }
      by_net.points.push_back(std::move(pt));
    }
  }
  by_net.summary = summarize(by_net, "");
  c.crossovers.push_back(std::move(by_net));
  return c;
}

nlohmann::json to_json(const Comparison& c) {
  nlohmann::json j;
  j["winner"] = c.contender[c.winner];
  j["margin_percent"] = c.margin * 100;
  j["why"] = c.why;
  if (!c.skipped.empty()) j["skipped"] = c.skipped;
  j["schemes"] = nlohmann::json::array();
  for (std::size_t i = 0; i < c.results.size(); ++i) {
    const auto& r = c.results[i];
    j["schemes"].push_back({{"scheme", r.scheme},
                            {"contender", c.contender[i]},
                            {"framework", r.prediction.framework},
                            {"strategy", r.prediction.strategy},
                            {"throughput_samples_per_s", r.prediction.throughput},
                            {"step_time_s", r.prediction.step_time_s},
                            {"bound_by", r.prediction.bottleneck}});
  }
  j["crossovers"] = nlohmann::json::array();
  for (const auto& x : c.crossovers) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& p : x.points) {
      pts.push_back(
          {{"value", p.value},
           {"winner", p.winner.empty() ? nlohmann::json() : nlohmann::json(p.winner)},
           {"margin_percent", p.alone ? nlohmann::json() : nlohmann::json(p.margin * 100)},
           {"unavailable", p.unavailable}});
    }
    j["crossovers"].push_back(
        {{"dimension", x.dimension}, {"summary", x.summary}, {"points", pts}});
  }
  j["predictions"] = nlohmann::json::array();
  for (const auto& r : c.results) j["predictions"].push_back(to_json(r.prediction));
  return j;
}

std::string to_table(const Comparison& c) {
  const auto& p0 = c.results.front().prediction;
  std::string out = fmt::format("{} on {} GPUs of {}, batch {} per GPU, {} engine\n", p0.model,
                                p0.gpus, p0.cluster, p0.batch_per_gpu, p0.engine);
  out += fmt::format("{:<28}", "");
  for (const auto& r : c.results) out += fmt::format("{:>16}", r.scheme);
  out += "\n";
  auto line = [&](const std::string& label, auto value) {
    out += fmt::format("{:<28}", label);
    for (const auto& r : c.results) out += fmt::format("{:>16}", value(r.prediction));
    out += "\n";
  };
  line("framework", [](const Prediction& p) { return p.framework; });
  line("strategy", [](const Prediction& p) { return p.strategy; });
  line("step (ms)", [](const Prediction& p) { return fmt::format("{:.3f}", p.step_time_s * 1e3); });
  line("samples/s", [](const Prediction& p) { return fmt::format("{:.1f}", p.throughput); });
  line("efficiency",
       [](const Prediction& p) { return fmt::format("{:.1f}%", p.scaling_efficiency * 100); });
  line("communication (ms)",
       [](const Prediction& p) { return fmt::format("{:.3f}", p.communication_s * 1e3); });
  line("exposed (ms)",
       [](const Prediction& p) { return fmt::format("{:.3f}", p.exposed_communication_s * 1e3); });
  out += c.why + "\n";
  for (const auto& s : c.skipped) out += "not compared: " + s + "\n";
  std::set<std::string> told;
  for (std::size_t i = 0; i < c.results.size(); ++i) {
    const auto& name = c.contender[i];
    if (!told.insert(name).second) continue;  // the same job, told already
    const auto& p = c.results[i].prediction;
    if (name.find('=') != std::string::npos) {
      out += fmt::format("  {} are the same job here ({} / {}); they count once\n", name,
                         p.framework, p.strategy);
    }
    if (!p.bottleneck.empty()) {
      out += fmt::format("  {} is bound by its largest exchange's {}\n", name, p.bottleneck);
    }
    const auto placement = p.policy_settings.find("ps_placement");
    if (placement != p.policy_settings.end() && placement->second == "dedicated") {
      out += fmt::format("  {} also uses {} server host(s) besides the {} worker nodes\n", name,
                         p.policy_settings.at("ps_servers"), p.nodes);
    } else if (placement != p.policy_settings.end() && p.framework == "byteps") {
      out += fmt::format("  {} runs its {} server(s) on the worker nodes\n", name,
                         p.policy_settings.at("ps_servers"));
    }
  }
  for (const auto& x : c.crossovers) {
    out += fmt::format("by {} ({} engine, one step each): {}\n",
                       x.dimension == "gpus" ? "GPU count" : "network", p0.engine, x.summary);
    for (const auto& p : x.points) {
      out += fmt::format("  {:<12} {}", p.value, p.winner.empty() ? "-" : p.winner);
      if (!p.winner.empty() && !p.alone) out += fmt::format(" by {:.1f}%", p.margin * 100);
      for (const auto& u : p.unavailable) out += fmt::format("; cannot run {}", u);
      out += "\n";
    }
  }
  return out;
}

namespace {

// The job as the quiet checks run it: the analytic engine, one step.
PredictOptions quick_options(const PredictOptions& options) {
  auto quick = options;
  quick.engine = Engine::kAnalytic;
  quick.iterations = 1;
  return quick;
}

std::optional<std::string> scheme_hint(const PredictOptions& quick, const Prediction& here,
                                       const PredictInputs& inputs) {
  for (const char* alt : {"horovod", "byteps"}) {
    if (quick.framework == alt) continue;
    Prediction other;
    try {
      other = predict(scheme_options(quick, alt), inputs);
    } catch (const InputError&) {
      continue;  // cannot run here (too few nodes for its servers, ...)
    }
    if (other.throughput > here.throughput * 1.05) {
      return fmt::format(
          "{} ({} / {}) would be {:.1f}% faster here: {:.1f} against {:.1f} samples/s by the "
          "analytic engine (dlsim compare shows both)",
          alt, other.framework, other.strategy, (other.throughput / here.throughput - 1) * 100,
          other.throughput, here.throughput);
    }
  }
  return std::nullopt;
}

// Whether --compression fp16 could change the job: a framework that offers it, not on yet,
// gradients wider than 2 bytes.
bool compression_applies(const PredictOptions& o) {
  return offers_compression(o.framework) &&
         o.framework_options.compression.value_or(GradientCompression::kNone) ==
             GradientCompression::kNone &&
         gradient_element(o.precision).value() > 2;
}

std::optional<std::string> compression_hint(PredictOptions quick, const Prediction& here,
                                            const PredictInputs& inputs) {
  quick.framework_options.compression = GradientCompression::kFp16;
  const Prediction cast = predict(quick, inputs);
  if (cast.throughput <= here.throughput * 1.05) return std::nullopt;
  return fmt::format(
      "--compression fp16 would be {:.1f}% faster here: {:.1f} against {:.1f} samples/s by the "
      "analytic engine ({} on the wire instead of {}, {} more communication work on the "
      "compute stream)",
      (cast.throughput / here.throughput - 1) * 100, cast.throughput, here.throughput,
      format_bytes(Bytes(cast.gradient_bytes)), format_bytes(Bytes(here.gradient_bytes)),
      format_seconds(
          Seconds(cast.loss.communication_on_compute - here.loss.communication_on_compute)));
}

// One hint on its own: the job predicted quickly (loading the model and cluster unless given),
// and `hint` asked where it runs on more than one node.
template <class Hint>
std::optional<std::string> one_hint(const PredictOptions& options, const PredictInputs* inputs,
                                    Hint hint) {
  // The variants differ in framework, strategy or settings only: one load serves them all.
  std::optional<PredictInputs> loaded;
  if (!inputs) inputs = &loaded.emplace(load_inputs(options));
  const auto quick = quick_options(options);
  const Prediction here = predict(quick, *inputs);
  if (here.nodes < 2) return std::nullopt;
  return hint(quick, here, *inputs);
}

}  // namespace

std::optional<std::string> faster_scheme(const PredictOptions& options,
                                         const PredictInputs* inputs) {
  return one_hint(options, inputs, scheme_hint);
}

std::optional<std::string> faster_with_compression(const PredictOptions& options,
                                                   const PredictInputs* inputs) {
  if (!compression_applies(options)) return std::nullopt;
  return one_hint(options, inputs, compression_hint);
}

std::vector<std::string> faster_alternatives(const PredictOptions& options,
                                             const PredictInputs& inputs) {
  const auto quick = quick_options(options);
  const Prediction here = predict(quick, inputs);
  std::vector<std::string> out;
  if (here.nodes < 2) return out;
  if (auto s = scheme_hint(quick, here, inputs)) out.push_back(*s);
  if (compression_applies(options)) {
    if (auto c = compression_hint(quick, here, inputs)) out.push_back(*c);
  }
  return out;
}

}  // namespace dlsim::simulator
