#include "simulator/model_commands.hpp"
#include "common/json_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sstream>

#include "common/cli.hpp"
#include "common/output.hpp"
#include "common/version.hpp"
#include "model/analysis.hpp"
#include "model/loader.hpp"

namespace dlsim::cli {
namespace {

struct ShowOptions {
  std::string model;
  std::int64_t batch = 1;
  std::string precision = "fp32";
  std::string format = "table";
  std::string output;
  std::vector<std::string> sets;
};

std::string shape_text(const model::Shape& s) { return fmt::format("{}", fmt::join(s, "x")); }

std::string render_table(const model::ModelStats& s, const model::LayerGraph& g) {
  std::ostringstream o;
  o << fmt::format("model {}  batch {}  precision {}\n", s.name, s.batch, to_string(s.precision));
  if (!g.source.empty()) o << fmt::format("source: {}\n", g.source);
  o << fmt::format("{:<36} {:<22} {:>18} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "layer", "op",
                   "output", "params", "fwd GMAC", "fwd GFLOP", "bwd GFLOP", "act MiB");
  constexpr double kG = 1e9;
  constexpr double kMi = 1024.0 * 1024.0;
  for (const auto& l : s.layers) {
    o << fmt::format("{:<36} {:<22} {:>18} {:>12} {:>12.4f} {:>12.4f} {:>12.4f} {:>12.3f}\n",
                     l.name, l.op, shape_text(l.output_shape), l.params, l.forward_macs / kG,
                     l.forward_flops.value() / kG, l.backward_flops().value() / kG,
                     l.activation_bytes.value() / kMi);
  }
  o << fmt::format("{:<36} {:<22} {:>18} {:>12} {:>12.4f} {:>12.4f} {:>12.4f} {:>12.3f}\n", "total",
                   fmt::format("{} layers", s.layers.size()), "", s.params, s.forward_macs / kG,
                   s.forward_flops.value() / kG, s.backward_flops().value() / kG,
                   s.activation_bytes.value() / kMi);
  o << fmt::format(
      "weights {} ({} parameters); activations kept for backward {}; "
      "{} gradient tensors\n",
      format_bytes(s.weight_bytes), s.params, format_bytes(s.activation_bytes), s.gradients.size());
  return o.str();
}

std::string render_csv(const model::ModelStats& s) {
  std::ostringstream o;
  o << "name,op,output_shape,params,forward_macs,forward_flops,backward_input_flops,"
       "backward_weight_flops,weight_bytes,activation_bytes\n";
  for (const auto& l : s.layers) {
    o << fmt::format("{},{},{},{},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f},{:.0f}\n", l.name, l.op,
                     shape_text(l.output_shape), l.params, l.forward_macs, l.forward_flops.value(),
                     l.backward_input_flops.value(), l.backward_weight_flops.value(),
                     l.weight_bytes.value(), l.activation_bytes.value());
  }
  return o.str();
}

void run_show(const ShowOptions& opt) {
  const auto precision = parse_precision(opt.precision);
  if (!precision) {
    fail_at({}, "--precision",
            fmt::format("unknown precision '{}' (fp32, fp16, bf16)", opt.precision));
  }
  const auto graph = model::load_model(opt.model, parse_model_sets(opt.sets));
  const auto stats = model::analyze(graph, opt.batch, *precision);
  std::string text;
  if (opt.format == "json") {
    auto j = model::to_json(stats, graph);
    j["context"] = {{"dlsim_version", kVersion},
                    {"command", "model show"},
                    {"inputs",
                     {{"model", opt.model},
                      {"batch", opt.batch},
                      {"precision", opt.precision},
                      {"set", opt.sets}}}};
    text = json_text(j, 2) + "\n";
  } else if (opt.format == "csv") {
    text = render_csv(stats);
  } else {
    text = render_table(stats, graph);
  }
  write_output(opt.output, text, file_references({opt.model}));
}

void run_list() {
  std::ostringstream o;
  o << fmt::format("{:<14} {:>14} {:>12}  {:<16} {}\n", "model", "params", "fwd GMAC", "input",
                   "description");
  for (const auto& name : model::zoo_names()) {
    const auto g = model::load_model(name);
    const auto s = model::analyze(g, 1, Precision::kFp32);
    std::string input;
    for (auto v : g.order()) {
      if (g.layer(v).op->kind() == "input") {
        input += (input.empty() ? "" : ",") + shape_text(g.layer(v).output.shape);
      }
    }
    // The description up to its first colon, cut to fit one line.
    std::string summary = g.description.substr(0, g.description.find(':'));
    if (summary.size() > 72) summary = summary.substr(0, 69) + "...";
    o << fmt::format("{:<14} {:>14} {:>12.3f}  {:<16} {}\n", name, s.params, s.forward_macs / 1e9,
                     input, summary);
  }
  write_output("", o.str());
}

void run_ops() {
  std::ostringstream o;
  const auto& r = model::op_registry();
  for (const auto& name : r.names()) {
    o << fmt::format("{:<24} {}\n", name, r.find(name)->summary);
  }
  write_output("", o.str());
}

}  // namespace

void add_model_commands(CLI::App& app) {
  auto* model = app.add_subcommand("model", "List and inspect models (layer graphs)");
  model->require_subcommand(1);

  model->add_subcommand("list", "The built-in zoo: parameters and forward GMACs at batch 1")
      ->callback(run_list);
  model->add_subcommand("ops", "The layer operators a model file may use")->callback(run_ops);

  auto opt = std::make_shared<ShowOptions>();
  auto* show = model->add_subcommand("show", "Per-layer shapes, parameters, FLOPs and memory");
  show->add_option("model", opt->model, "Zoo name, or a .yaml or .onnx file")->required();
  show->add_option("--batch,-b", opt->batch, "Samples per GPU (positive integer)")
      ->capture_default_str();
  show->add_option("--precision", opt->precision, "fp32, fp16 or bf16")->capture_default_str();
  show->add_option("--format", opt->format, "table, json or csv")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  show->add_option("--set", opt->sets, "Model parameter NAME=VALUE (e.g. seq_len=512)");
  show->add_option("--output,-o", opt->output, "Write to this file instead of standard output");
  show->callback([opt] { run_show(*opt); });
}

}  // namespace dlsim::cli
