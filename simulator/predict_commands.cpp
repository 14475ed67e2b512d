#include "simulator/predict_commands.hpp"
#include "common/json_text.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/output.hpp"
#include "simulator/compare.hpp"
#include "simulator/framework_flags.hpp"
#include "simulator/plot.hpp"
#include "simulator/predict.hpp"
#include "simulator/trace.hpp"

namespace dlsim::cli {
namespace {

using simulator::Prediction;
using simulator::PredictOptions;

// The flags predict, scale and compare share: typed where CLI11 can type them, text where a
// unit or a word needs parsing (resolve()).
struct CommonFlags {
  PredictOptions base;
  simulator::FrameworkFlags fw;
  std::string batch, precision = "fp32", optimizer = "momentum", engine = "des";
  std::vector<std::string> sets, gpu_speeds;
  std::optional<double> anchor;
  std::string format = "table", output;
};

// The files a prediction may read (names of presets are not files and are passed over).
std::vector<std::string> input_files(const CommonFlags& f) {
  return file_references(
      {f.base.model, f.base.cluster, f.base.library.value_or(""), f.base.network.value_or("")});
}

PredictOptions resolve(const CommonFlags& f) {
  PredictOptions o = f.base;
  o.framework_options = simulator::parse_framework_flags(f.fw);
  o.model_params = parse_model_sets(f.sets);
  if (!f.batch.empty() && !simulator::set_batch(o, f.batch)) {
    fail_at({}, "--batch",
            fmt::format("must be a positive integer (at most {}) or 'max', got '{}'",
                        simulator::kMaxBatch, f.batch));
  }
  if (auto p = simulator::parse_training_precision(f.precision)) {
    o.precision = *p;
  } else {
    fail_at({}, "--precision",
            fmt::format("unknown precision '{}' ({})", f.precision,
                        simulator::training_precision_names()));
  }
  if (auto p = simulator::parse_optimizer(f.optimizer)) {
    o.optimizer = *p;
  } else {
    fail_at({}, "--optimizer",
            fmt::format("unknown optimizer '{}' (sgd, momentum, adam)", f.optimizer));
  }
  if (auto e = simulator::parse_engine(f.engine)) {
    o.engine = *e;
  } else {
    fail_at({}, "--engine", fmt::format("unknown engine '{}' (des, analytic)", f.engine));
  }
  // "--gpu-speed RANK=SPEED": a GPU known to run at SPEED of its profile's (predict() checks
  // the rank against the job and the speed's range).
  for (const auto& item : f.gpu_speeds) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      fail_at({}, "--gpu-speed", fmt::format("expected RANK=SPEED (e.g. 3=0.6), got '{}'", item));
    }
    const auto rank =
        static_cast<int>(parse_int_flag(item.substr(0, eq), "--gpu-speed", 0, kMaxRanks - 1));
    const auto text = item.substr(eq + 1);
    const auto speed = parse_number(text);
    if (!speed) {
      fail_at({}, "--gpu-speed",
              fmt::format("rank {}'s speed must be a number (e.g. 0.6), got '{}'", rank, text));
    }
    if (!o.gpu_speed.emplace(rank, *speed).second) {
      fail_at({}, "--gpu-speed", fmt::format("rank {} is given twice", rank));
    }
  }
  if (f.anchor) {
    if (!(*f.anchor > 0) || !std::isfinite(*f.anchor)) {
      fail_at({}, "--anchor-throughput",
              fmt::format("must be positive samples/s, got {}", *f.anchor));
    }
    o.anchor_throughput = *f.anchor;
  }
  return o;
}

void check_format(const std::string& format) {
  if (format != "table" && format != "json" && format != "csv") {
    fail_at({}, "--format", fmt::format("unknown format '{}' (table, json, csv)", format));
  }
}

void add_common(CLI::App* c, CommonFlags& f, bool single_gpus, bool single_strategy) {
  c->add_option("--model", f.base.model, "Zoo model, YAML or ONNX file")->required();
  if (single_gpus) {
    c->add_option("--gpus", f.base.gpus, "GPUs (one rank each)")
        ->required()
        ->check(CLI::Range(1, kMaxRanks));
    c->add_option("--gpu-speed", f.gpu_speeds,
                  "RANK=SPEED: that rank's GPU runs at SPEED of its profile's (e.g. 3=0.6 for a "
                  "GPU dlcalibrate fit named 40 % slow); repeatable")
        ->type_name("RANK=SPEED");
  }
  c->add_option("--gpus-per-node", f.base.gpus_per_node, "GPUs used per node (default: all)")
      ->check(CLI::Range(1, kMaxGpusPerNode));
  c->add_option("--nodelist", f.base.nodelist, "Slurm host list of the nodes to use");
  c->add_option("--batch", f.batch, "Per-GPU batch, or 'max' (default 32)")->type_name("INT|max");
  c->add_option("--set", f.sets, "Model parameter NAME=VALUE (e.g. seq_len=64), as model show");
  c->add_option("--cluster", f.base.cluster, "Cluster preset or YAML file")->capture_default_str();
  c->add_option("--library", f.base.library,
                "Collective library preset or YAML file instead of the cluster's (nccl, "
                "nccl-2.3, nccl-1, mpi)");
  c->add_option("--network", f.base.network,
                "Network preset or YAML file instead of the cluster's (e.g. 1gbe, 10gbe, ib-edr)");
  c->add_option("--rails", f.base.rails,
                "NICs per node the job uses, the first ones (as NCCL_IB_HCA; default: all)")
      ->check(CLI::Range(1, kMaxGpusPerNode));
  c->add_option("--framework", f.base.framework,
                "horovod, keras, pytorch-ddp, tf-ps, tf-replicated, mxnet-kvstore, byteps")
      ->capture_default_str();
  if (single_strategy) {
    c->add_option("--strategy", f.base.strategy,
                  "auto (the library's choice), ring, tree, nvls, hd, hierarchical or ps");
  }
  add_framework_flags(c, f.fw);
  add_runtime_flags(c, f.fw);
  c->add_option("--precision", f.precision, "fp32, tf32, fp16, amp or bf16 (docs/simulator.md)")
      ->capture_default_str();
  c->add_option("--optimizer", f.optimizer, "sgd, momentum or adam")->capture_default_str();
  c->add_option("--iterations", f.base.iterations, "Steps simulated (DES)")
      ->capture_default_str()
      ->check(CLI::Range(1, simulator::kMaxIterations));
  c->add_option("--seed", f.base.seed, "Seed of the straggler draws")
      ->capture_default_str()
      ->check(kSeed);
  c->add_flag_callback(
      "--no-overlap", [&f] { f.base.overlap = false; },
      "Communication starts only after the whole backward pass (bulk-synchronous), not as each "
      "gradient is ready");
  c->add_option("--engine", f.engine, "des or analytic")->capture_default_str();
  c->add_option("--anchor-throughput", f.anchor,
                "Measured single-GPU samples/s at this batch: compute is scaled to match");
  c->add_option("--input-rate", f.base.input_rate,
                "Samples/s each node's input pipeline delivers (its data loaders alone, all its "
                "GPUs'): no step is shorter than its samples over this (default: keeps up)");
  c->add_option("--format", f.format, "table, json or csv")->capture_default_str();
  c->add_option("-o,--output", f.output, "Write to this file");
}

void run_predict(const CommonFlags& f, const std::string& trace_path) {
  check_format(f.format);
  for (const auto& out : {f.output, trace_path}) refuse_output_over_input(out, input_files(f));
  const auto o = resolve(f);
  simulator::TraceWriter trace;
  const auto inputs = simulator::load_inputs(o);
  Prediction p = simulator::predict(o, inputs, trace_path.empty() ? nullptr : &trace);
  // The parameter-server flags shape parameter-server exchanges only; a job without them would
  // ignore them (compare, which runs several strategies, takes them for those that have).
  if (p.strategy != "ps") {
    const auto& fo = o.framework_options;
    for (const auto& [given, flag] : {std::pair{fo.ps_servers.has_value(), "--ps-servers"},
                                      std::pair{fo.ps_colocated.has_value(), "--ps-placement"},
                                      std::pair{fo.ps_on_gpu.has_value(), "--ps-device"}}) {
      if (given) {
        fail_at({}, flag,
                fmt::format("applies to parameter servers, and {} with strategy '{}' has none "
                            "(use a parameter-server framework or --strategy ps)",
                            o.framework, p.strategy));
      }
    }
  }
  if (p.nodes > 1) {
    for (auto& line : simulator::faster_alternatives(o, inputs)) p.why.push_back(line);
  }
  std::string out;
  if (f.format == "json") {
    out = json_text(simulator::to_json(p), 2) + "\n";
  } else if (f.format == "csv") {
    out = simulator::csv_header() + simulator::to_csv_row(p);
  } else {
    out = simulator::to_table(p);
  }
  // Both files are complete before either appears, and neither does if the other cannot.
  std::vector<std::pair<std::string, std::string>> files;
  if (!trace_path.empty()) files.emplace_back(trace_path, trace.str());
  files.emplace_back(f.output, std::move(out));
  write_outputs(files);
}

std::string csv_rows(const std::vector<Prediction>& rows) {
  std::string out = simulator::csv_header();
  for (const auto& p : rows) out += simulator::to_csv_row(p);
  return out;
}

// "1,2,4,8", or ranges as collective's --bytes takes them: "1:64" (1, 2, 4, ..., 64: each count
// doubled) and "3:96:x2"; items mix ("1,2,4:64").
std::vector<int> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  if (text.empty() || text.front() == ',' || text.back() == ',' ||
      text.find(",,") != std::string::npos) {
    fail_at({}, "--gpus", fmt::format("an empty item in '{}'", text));
  }
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      out.push_back(static_cast<int>(parse_int_flag(item, "--gpus", 1, kMaxRanks)));
      continue;
    }
    const auto second = item.find(':', colon + 1);
    const auto lo = parse_int_flag(item.substr(0, colon), "--gpus", 1, kMaxRanks);
    const auto hi =
        parse_int_flag(item.substr(colon + 1, second == std::string::npos ? std::string::npos
                                                                          : second - colon - 1),
                       "--gpus", 1, kMaxRanks);
    long long factor = 2;
    if (second != std::string::npos) {
      const auto f = item.substr(second + 1);
      if (f.size() < 2 || f[0] != 'x') {
        fail_at({}, "--gpus", fmt::format("expected MIN:MAX or MIN:MAX:xF, got '{}'", item));
      }
      factor = parse_int_flag(f.substr(1), "--gpus", 1, kMaxRanks);
      if (factor < 2) {
        fail_at({}, "--gpus", fmt::format("step '{}' must be xF with F >= 2 (e.g. x2)", f));
      }
    }
    if (lo > hi) fail_at({}, "--gpus", fmt::format("range '{}' runs backwards", item));
    for (long long g = lo; g <= hi; g *= factor) out.push_back(static_cast<int>(g));
  }
  if (out.empty()) fail_at({}, "--gpus", "expected a list such as 1,2,4,8 or a range such as 1:64");
  for (std::size_t i = 1; i < out.size(); ++i) {
    if (std::find(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(i), out[i]) !=
        out.begin() + static_cast<std::ptrdiff_t>(i)) {
      fail_at({}, "--gpus", fmt::format("{} GPUs appear twice in '{}'", out[i], text));
    }
  }
  return out;
}

void run_scale(const CommonFlags& f, const std::string& gpus, const std::string& plot_path) {
  check_format(f.format);
  for (const auto& out : {f.output, plot_path}) refuse_output_over_input(out, input_files(f));
  const auto counts = parse_gpu_list(gpus);
  std::vector<Prediction> rows;
  for (int g : counts) {
    auto o = resolve(f);
    o.gpus = g;
    rows.push_back(simulator::predict(o));
  }
  // Ideal: N x the single-GPU throughput at the same per-GPU batch.
  auto ideal = [](const Prediction& p) {
    return static_cast<double>(p.batch_per_gpu) * p.gpus / p.single_gpu_step_s;
  };
  std::string out;
  if (f.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& p : rows) j.push_back(simulator::to_json(p));
    out = json_text(j, 2) + "\n";
  } else if (f.format == "csv") {
    out = csv_rows(rows);
  } else {
    const auto& p0 = rows.front();
    out = fmt::format(
        "{} on {}, {} / {}, batch {} per GPU, {}, {} engine{}\n", p0.model, p0.cluster,
        p0.framework, p0.strategy, p0.batch_per_gpu, p0.precision, p0.engine,
        f.base.input_rate
            ? fmt::format(", input pipeline {:g} samples/s per node", *f.base.input_rate)
            : "");
    out += fmt::format("{:>6} {:>6} {:>14} {:>18} {:>18} {:>11} {:>14}\n", "gpus", "nodes",
                       "step (ms)", "samples/s", "ideal samples/s", "efficiency", "exposed (ms)");
    for (const auto& p : rows) {
      out += fmt::format("{:>6} {:>6} {:>14.3f} {:>18.1f} {:>18.1f} {:>10.1f}% {:>14.3f}\n", p.gpus,
                         p.nodes, p.step_time_s * 1e3, p.throughput, ideal(p),
                         p.scaling_efficiency * 100, p.exposed_communication_s * 1e3);
    }
  }
  std::string svg;
  if (!plot_path.empty()) {
    simulator::PlotSpec spec;
    const auto& p0 = rows.front();
    spec.title = fmt::format("{} on {} ({} / {}, batch {} per GPU)", p0.model, p0.cluster,
                             p0.framework, p0.strategy, p0.batch_per_gpu);
    spec.x_label = "GPUs";
    spec.y_label = "throughput (samples/s)";
    spec.log2_x = std::all_of(rows.begin(), rows.end(),
                              [](const Prediction& p) { return (p.gpus & (p.gpus - 1)) == 0; });
    simulator::PlotSeries predicted, perfect;
    predicted.label = "predicted";
    perfect.label = "ideal (N x 1 GPU)";
    perfect.dashed = true;
    perfect.markers = false;
    for (const auto& p : rows) {
      predicted.x.push_back(p.gpus);
      predicted.y.push_back(p.throughput);
      predicted.point_labels.push_back(fmt::format("{:.0f}%", p.scaling_efficiency * 100));
      perfect.x.push_back(p.gpus);
      perfect.y.push_back(ideal(p));
    }
    spec.series = {perfect, predicted};
    svg = simulator::render_svg(spec);
  }
  std::vector<std::pair<std::string, std::string>> files;
  if (!plot_path.empty()) files.emplace_back(plot_path, std::move(svg));
  files.emplace_back(f.output, std::move(out));
  write_outputs(files);
}

void run_compare(const CommonFlags& f, const std::string& strategies, bool crossover,
                 bool default_strategies) {
  check_format(f.format);
  refuse_output_over_input(f.output, input_files(f));
  simulator::CompareOptions o;
  o.base = resolve(f);
  o.crossover = crossover;
  o.skip_unavailable = default_strategies;
  // Every comma-separated name, empty ones too ("ring," names two, the second empty).
  for (std::size_t start = 0;;) {
    const auto comma = strategies.find(',', start);
    const auto item = strategies.substr(start, comma - start);
    if (item.empty()) {
      fail_at({}, "--strategy",
              fmt::format("an empty name in '{}' (a list such as ring,ps)", strategies));
    }
    o.schemes.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const auto c = simulator::compare(o);
  std::string out;
  if (f.format == "json") {
    out = json_text(simulator::to_json(c), 2) + "\n";
  } else if (f.format == "csv") {
    std::vector<Prediction> rows;
    for (const auto& r : c.results) rows.push_back(r.prediction);
    out = csv_rows(rows);
  } else {
    out = simulator::to_table(c);
  }
  write_output(f.output, out);
}

}  // namespace

void add_predict_commands(CLI::App& app) {
  auto pf = std::make_shared<CommonFlags>();
  auto trace = std::make_shared<std::string>();
  auto* p = app.add_subcommand("predict", "Predict one training step on N GPUs, and explain it");
  add_common(p, *pf, true, true);
  p->add_option("--trace", *trace, "Write a Chrome trace (Perfetto, chrome://tracing)");
  // The collective library names the algorithm it runs; in a training job it is the --strategy.
  p->callback([pf, trace] {
    naming_flags({{"algorithm", "--strategy"}}, [&] { run_predict(*pf, *trace); });
  });

  auto sf = std::make_shared<CommonFlags>();
  auto gpus = std::make_shared<std::string>();
  auto plot = std::make_shared<std::string>();
  auto* s = app.add_subcommand("scale", "Throughput and efficiency against GPU count");
  add_common(s, *sf, false, true);
  s->add_option("--gpus", *gpus, "GPU counts, e.g. 1,2,4,8,16, or 1:64 (doubling), 3:96:x2")
      ->required();
  s->add_option("--plot", *plot, "Write an SVG plot with the ideal line");
  s->callback([sf, gpus, plot] {
    naming_flags({{"algorithm", "--strategy"}}, [&] { run_scale(*sf, *gpus, *plot); });
  });

  auto cf = std::make_shared<CommonFlags>();
  auto strategies = std::make_shared<std::string>("ring,tree,byteps");
  auto crossover = std::make_shared<bool>(true);
  auto* c = app.add_subcommand(
      "compare", "Schemes side by side: the winner, its margin, what bounds each, where it flips");
  add_common(c, *cf, true, false);
  c->add_option("--strategy", *strategies,
                "Schemes: collective algorithms run by --framework (ring, tree, auto, ps, ...) "
                "or frameworks with their defaults (byteps, tf-ps, horovod, ...)")
      ->capture_default_str();
  c->add_flag_callback(
      "--no-crossover", [crossover] { *crossover = false; },
      "Skip the search over GPU counts and networks for a change of winner");
  c->callback([cf, strategies, crossover, c] {
    naming_flags({{"algorithm", "--strategy"}},
                 [&] { run_compare(*cf, *strategies, *crossover, c->count("--strategy") == 0); });
  });
}

}  // namespace dlsim::cli
