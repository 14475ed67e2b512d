// dlvalidate: dlsim's predictions against measurements (docs/validate.md): published runs
// (`published`), real training steps run here (`replay`), and the logs and timelines users have
// (`import`, `timeline`).

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/output.hpp"
#include "common/version.hpp"
#include "validate/collective_commands.hpp"
#include "validate/import_commands.hpp"
#include "validate/launch_commands.hpp"
#include "validate/published.hpp"
#include "validate/replay_commands.hpp"
#include "validate/report_plots.hpp"
#include "validate/report_text.hpp"

namespace {

namespace val = dlsim::validate;

std::string command_line(int argc, char** argv) {
  std::string s = "dlvalidate";
  for (int i = 1; i < argc; ++i) s += " " + std::string(argv[i]);
  return s;
}

int gate_failures = 0;

void add_published(CLI::App& app, const std::string& command) {
  auto* c = app.add_subcommand(
      "published", "Published runs (CSV) against predictions, per a cases file; the error report");
  struct Opt {
    std::vector<std::string> data, cases;
    std::string out = "-", json, svg_dir, html;
    std::optional<double> max_median, max_p90;
  };
  auto o = std::make_shared<Opt>();
  c->add_option("--data", o->data,
                "CSV of measurements (throughput.csv / scaling_claims.csv columns)")
      ->required();
  c->add_option("--cases", o->cases, "Cases files (YAML) mapping rows to dlsim configurations")
      ->required();
  c->add_option("-o,--output", o->out, "The Markdown report (- for stdout)");
  c->add_option("--json", o->json, "Also write the JSON summary and comparisons here");
  c->add_option("--svg-dir", o->svg_dir,
                "Also write one SVG per figure (scaling curves) and parity.svg into this folder");
  c->add_option("--html", o->html,
                "Also write one self-contained HTML page (tables and the figures inlined)");
  c->add_option("--max-median-error", o->max_median,
                "Exit 1 when a data set's median |error| is above this, in %")
      ->check(dlsim::finite_in(0, 1e6));
  c->add_option("--max-p90-error", o->max_p90,
                "Exit 1 when a data set's P90 |error| is above this, in %")
      ->check(dlsim::finite_in(0, 1e6));
  c->callback([o, command] {
    // Everything is read and predicted before any file is written.
    std::vector<val::Table> tables;
    for (const auto& d : o->data) {
      tables.push_back(val::read_table(d));
      // Cases name their table by its file's stem: two files of one name would leave one unread.
      for (std::size_t i = 0; i + 1 < tables.size(); ++i) {
        if (tables[i].name == tables.back().name) {
          dlsim::fail_at({d}, "--data",
                         fmt::format("a second table named '{}' (the first: {}); cases name "
                                     "their table by its file name",
                                     tables.back().name, tables[i].path));
        }
      }
    }
    dlsim::refuse_repeated_inputs(o->cases, "--cases", "its rows would count twice");
    std::vector<val::CaseFile> files;
    std::vector<val::Comparison> all;
    std::vector<val::Curve> curves;
    for (const auto& f : o->cases) {
      files.push_back(val::read_cases(f));
      const auto cs = val::compare(tables, files.back());
      const auto lines = val::predicted_curves(files.back(), cs);
      all.insert(all.end(), cs.begin(), cs.end());
      curves.insert(curves.end(), lines.begin(), lines.end());
    }
    const auto summary = val::summarize(all);
    const auto figures = val::render_figures(all, curves);
    val::ReportContext context{command, dlsim::kVersion, ""};
    if (!o->svg_dir.empty() && o->out != "-") {
      namespace fs = std::filesystem;
      const auto report_dir = fs::absolute(o->out).parent_path();
      context.image_dir = fs::absolute(o->svg_dir)
                              .lexically_normal()
                              .lexically_relative(report_dir)
                              .generic_string();
    }
    const auto md = val::report_markdown(all, summary, files, figures, context);
    const auto html =
        o->html.empty() ? std::string() : val::report_html(all, summary, files, figures, context);
    // Every file of the report is written before any is put in place: a failure on one leaves
    // none of them behind.
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!o->json.empty()) {
      outputs.emplace_back(o->json, val::report_json(all, summary, curves, context));
    }
    if (!o->svg_dir.empty()) {
      std::error_code ec;
      // The folder itself may be new, its parent not (as -o and --html into a missing folder).
      auto folder = std::filesystem::absolute(o->svg_dir).lexically_normal();
      if (!folder.has_filename()) folder = folder.parent_path();  // "dir/"
      const auto parent = folder.parent_path();
      if (!std::filesystem::is_directory(parent)) {
        dlsim::fail_at({o->svg_dir}, "--svg-dir",
                       fmt::format("its parent folder {} does not exist", parent.string()));
      }
      std::filesystem::create_directory(o->svg_dir, ec);
      if (ec)
        dlsim::fail_at({o->svg_dir}, "--svg-dir", "cannot create the folder: " + ec.message());
      for (const auto& f : figures) {
        outputs.emplace_back((std::filesystem::path(o->svg_dir) / f.file).string(), f.svg);
      }
    }
    if (!o->html.empty()) outputs.emplace_back(o->html, html);
    outputs.emplace_back(o->out, md);
    auto inputs = o->data;
    inputs.insert(inputs.end(), o->cases.begin(), o->cases.end());
    dlsim::write_outputs(outputs, inputs);
    for (const auto& s : summary) {
      std::cerr << fmt::format(
          "dlvalidate: {}: {} comparisons, median |error| {:.1f} %, P90 "
          "{:.1f} %, worst {:.1f} % ({})\n",
          s.data_set, s.count, s.median_abs * 100, s.p90_abs * 100, s.worst_abs * 100,
          s.worst_case);
    }
    // The gate holds the rows of the cases in it (a case's `not_gated` names why it is not).
    if (!o->max_median && !o->max_p90) return;
    for (const auto& s : val::summarize(all, true)) {
      // The figures of a set some of whose cases are out: its rows in the gate.
      const auto whole = std::find_if(summary.begin(), summary.end(),
                                      [&](const auto& w) { return w.data_set == s.data_set; });
      if (whole != summary.end() && s.count < whole->count) {
        std::cerr << fmt::format(
            "dlvalidate: gate: {}: {} gated comparisons, median |error| {:.1f} %, P90 {:.1f} %\n",
            s.data_set, s.count, s.median_abs * 100, s.p90_abs * 100);
      }
      if (o->max_median && s.median_abs * 100 > *o->max_median) {
        std::cerr << fmt::format("dlvalidate: gate: {} median {:.1f} % is above {} %\n", s.data_set,
                                 s.median_abs * 100, *o->max_median);
        ++gate_failures;
      }
      if (o->max_p90 && s.p90_abs * 100 > *o->max_p90) {
        std::cerr << fmt::format("dlvalidate: gate: {} P90 {:.1f} % is above {} %\n", s.data_set,
                                 s.p90_abs * 100, *o->max_p90);
        ++gate_failures;
      }
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlvalidate: dlsim's predictions against measured training runs"};
  app.set_version_flag("--version", std::string("dlvalidate ") + dlsim::kVersion);
  app.require_subcommand(1);
  add_published(app, command_line(argc, argv));
  dlsim::validate::add_replay_command(app, command_line(argc, argv));
  dlsim::validate::add_import_commands(app);
  dlsim::validate::add_collective_command(app);
  dlsim::validate::add_launch_command(app, command_line(argc, argv));
  const int rc = dlsim::run_cli(app, argc, argv, "dlvalidate");
  return rc == 0 && gate_failures > 0 ? 1 : rc;
}
