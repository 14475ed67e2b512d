// dlcalibrate: measures a cluster (kernels, memory, links, collectives) and fits the model's
// parameters (docs/calibrate.md). This version imports the results sites already have
// (nccl-tests, OSU micro-benchmarks) into dlcalibrate results files and fits them.

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calibrate/fit.hpp"
#include "calibrate/import.hpp"
#include "calibrate/profile.hpp"
#include "calibrate/results.hpp"
#include "calibrate/run_commands.hpp"
#include "calibrate/slurm_commands.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/output.hpp"
#include "common/units.hpp"
#include "common/version.hpp"
#include "hardware/loader.hpp"

namespace {

namespace cal = dlsim::calibrate;

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

void add_import(CLI::App& app, const std::string& command) {
  auto* imp = app.add_subcommand(
      "import", "Turn nccl-tests or OSU output into results, or an NCCL topology dump into a node");
  imp->require_subcommand(1);
  struct Opt {
    std::string file, out = "-";
    cal::ImportOptions import;
  };
  auto opt = std::make_shared<Opt>();
  using Importer = cal::Results (*)(const std::string&, const cal::ImportOptions&);
  auto add = [&](const char* name, const char* help, Importer fn, bool op) {
    auto* c = imp->add_subcommand(name, help);
    c->add_option("FILE", opt->file, "The benchmark's output, as the job wrote it")->required();
    c->add_option("-o,--output", opt->out, "Results file to write (JSON Lines; - for stdout)");
    if (op) {
      c->add_option("--op", opt->import.op,
                    "The collective, where the log does not say: allreduce, allgather, "
                    "reducescatter, broadcast, reduce, alltoall");
      c->add_option("--transport", opt->import.transport,
                    "How NCCL connected the GPUs, where the log has no NCCL_DEBUG=INFO channel "
                    "lines: shm (through host memory, e.g. NCCL_P2P_DISABLE=1 or GeForce "
                    "GPUs), p2p, net")
          ->check(CLI::IsMember({"shm", "p2p", "net"}, CLI::ignore_case));
    }
    c->add_option("--ranks", opt->import.ranks, "Ranks of the run, where the log does not say")
        ->check(CLI::Range(1, dlsim::kMaxRanks));
    c->add_option("--nodes", opt->import.nodes, "Nodes of the run, where the log does not say")
        ->check(CLI::Range(1, dlsim::kMaxRanks));
    c->callback([opt, fn, command] {
      auto r = fn(opt->file, opt->import);
      // The importer keeps a command line found in the log as the measured command.
      if (!r.provenance.command.empty()) {
        r.provenance.notes.push_back("command in the log: " + r.provenance.command);
      }
      r.provenance.command = command;
      dlsim::write_output(opt->out, cal::to_jsonl(r), {opt->file});
    });
  };
  add("nccl-tests", "nccl-tests text output (any version, as a job wrote it) or its -J JSON",
      cal::import_nccl_tests, true);
  add("osu", "OSU micro-benchmarks output (latency, bandwidth, message rate, collectives)",
      cal::import_osu, false);

  auto* topo = imp->add_subcommand(
      "nccl-topo", "NCCL topology dump (NCCL_TOPO_DUMP_FILE XML) into a node profile dlsim reads");
  auto topt = std::make_shared<cal::NcclTopoOptions>();
  auto file = std::make_shared<std::string>();
  topo->add_option("FILE", *file, "The XML NCCL wrote to NCCL_TOPO_DUMP_FILE")->required();
  topo->add_option("--gpu", topt->gpu, "GPU preset or file (default: inferred from the dump's sm)");
  topo->add_option("--base-node", topt->base_node,
                   "Node preset or file the profile extends (host figures, link latencies)")
      ->capture_default_str();
  topo->add_option("-o,--output", topt->output, "Node profile to write (NAME.yaml)")->required();
  topo->callback([topt, file] {
    auto inputs = dlsim::file_references({topt->gpu, topt->base_node});
    inputs.push_back(*file);
    dlsim::refuse_output_over_input(topt->output, inputs);
    dlsim::write_output(topt->output, cal::import_nccl_topo(*file, *topt));
    std::cout << "wrote " << topt->output << " (dlsim hardware show " << topt->output
              << " --kind node)\n";
  });
}

std::string show_table(const std::vector<cal::Results>& all, const std::vector<std::string>& files,
                       double min_bytes, cal::Statistic statistic) {
  std::ostringstream o;
  std::vector<cal::Measurement> ms;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& r = all[i];
    o << fmt::format("# {}: {} ({} records){}\n", files[i], r.provenance.tool,
                     r.measurements.size(),
                     r.provenance.source.empty() ? "" : ", from " + r.provenance.source);
    ms.insert(ms.end(), r.measurements.begin(), r.measurements.end());
  }
  std::vector<cal::UnfittedSeries> unfitted;
  for (const auto& f : cal::fit_series(ms, min_bytes, statistic, &unfitted)) {
    const auto& s = f.series;
    o << fmt::format("\n{} {} ranks={} nodes={}{}\n", s.op, s.backend, s.ranks, s.nodes,
                     s.variant.empty() ? "" : " " + s.variant);
    for (const auto& g : f.fit.regimes) {
      o << fmt::format(
          "  fit {} .. {}: intercept {:.3f} us, bandwidth {:.3f} GB/s, R^2 {:.5f}, worst error "
          "{:.2f} % at {}\n",
          dlsim::format_bytes(dlsim::Bytes(g.min_bytes)),
          dlsim::format_bytes(dlsim::Bytes(g.max_bytes)), g.alpha * 1e6, g.bandwidth() / 1e9, g.r2,
          g.worst_relative_error * 100, dlsim::format_bytes(dlsim::Bytes(g.worst_at_bytes)));
    }
    o << fmt::format("  latency {:.3f} us (alpha >= 0 over {} .. {})\n", f.latency.alpha * 1e6,
                     dlsim::format_bytes(dlsim::Bytes(f.latency.min_bytes)),
                     dlsim::format_bytes(dlsim::Bytes(f.latency.max_bytes)));
    o << fmt::format("  {:>14} {:>12} {:>12} {:>12} {:>9}\n", "size_bytes", "time_us", "fit_us",
                     "busbw_GBps", "error_%");
    const double factor = cal::bus_factor(s.op, s.ranks);
    for (std::size_t i = 0; i < s.bytes.size(); ++i) {
      o << fmt::format("  {:>14.0f} {:>12.3f} {:>12.3f} {:>12.3f} {:>+9.2f}\n", s.bytes[i],
                       s.seconds[i] * 1e6, f.fit.time(s.bytes[i]) * 1e6,
                       s.bytes[i] / s.seconds[i] * factor / 1e9, f.relative_errors[i] * 100);
    }
    if (f.fit.worst_relative_error() > 0.1) {
      o << fmt::format("  warning: the fit misses a measurement by {:.1f} % (over 10 %)\n",
                       f.fit.worst_relative_error() * 100);
    }
  }
  // A series of transfers with fewer than two sizes to fit is named, not left out in silence.
  for (const auto& [s, sizes] : unfitted) {
    o << fmt::format(
        "\n{} {} ranks={} nodes={}{}: no fit, {} of its {} size(s) at or above --min-bytes {} "
        "(a fit needs two)\n",
        s.op, s.backend, s.ranks, s.nodes, s.variant.empty() ? "" : " " + s.variant, s.bytes.size(),
        sizes, dlsim::format_bytes(dlsim::Bytes(min_bytes)));
  }
  o << cal::cpu_cost_report(ms, statistic);
  o << cal::layer_table_report(ms, statistic);
  for (const auto& r : all) {
    if (cal::was_busy(r.provenance)) {
      o << fmt::format(
          "warning: load average {:.2f} before, {:.2f} after the run on {} cores: the machine "
          "was busy\n",
          r.provenance.load_before.value_or(0.0), r.provenance.load_after.value_or(0.0),
          cal::recorded_cores(r.provenance));
    }
  }
  return o.str();
}

void add_show(CLI::App& app) {
  auto* c = app.add_subcommand(
      "show", "Measurements per series and their alpha-beta fits (time, fit, busbw, error)");
  struct Opt {
    std::vector<std::string> files;
    std::string min_bytes = "0B";
    std::string statistic = "median";
    std::string out = "-";
  };
  auto opt = std::make_shared<Opt>();
  c->add_option("RESULTS", opt->files, "Results files (JSON Lines)")->required();
  c->add_option("--min-bytes", opt->min_bytes, "Leave smaller sizes out of the fits (e.g. 64KiB)");
  c->add_option("--statistic", opt->statistic,
                "The sample that stands for a point: median, or min (least disturbed by other "
                "work on a shared machine)")
      ->capture_default_str();
  c->add_option("-o,--output", opt->out, "Write the report to this file (- for stdout)");
  c->callback([opt] {
    const double min_bytes =
        dlsim::parse_flag(opt->min_bytes, "--min-bytes", dlsim::parse_bytes).value();
    std::vector<cal::Results> all;
    for (const auto& f : opt->files) all.push_back(cal::read_results(f));
    dlsim::write_output(
        opt->out,
        show_table(all, opt->files, min_bytes, cal::parse_statistic("--statistic", opt->statistic)),
        opt->files);
  });
}

void add_fit(CLI::App& app, const std::string& command) {
  auto* c = app.add_subcommand(
      "fit", "Fit results into a hardware profile (a cluster file dlsim --cluster reads)");
  struct Opt {
    std::vector<std::string> files;
    std::string base = "default";
    std::string min_bytes = "64KiB";
    std::string statistic = "median";
    std::string out;
  };
  auto opt = std::make_shared<Opt>();
  c->add_option("RESULTS", opt->files, "Results files (JSON Lines)")->required();
  c->add_option("--base", opt->base,
                "Cluster preset or file the profile extends (what was not measured)")
      ->capture_default_str();
  c->add_option("--min-bytes", opt->min_bytes, "Leave smaller transfers out of bandwidth fits")
      ->capture_default_str();
  c->add_option("--statistic", opt->statistic, "The sample that stands for a point: median or min")
      ->capture_default_str();
  c->add_option("-o,--output", opt->out, "Profile to write (NAME.yaml; NAME becomes its name)")
      ->required();
  c->callback([opt, command] {
    dlsim::refuse_output_over_input(opt->out, opt->files);
    dlsim::refuse_repeated_inputs(opt->files, "RESULTS",
                                  "its measurements would count twice in the fits");
    cal::ProfileOptions po;
    try {
      dlsim::hardware::load_cluster(opt->base);  // checked here, so the error names the flag
    } catch (const dlsim::InputError& e) {
      dlsim::fail_at({}, "--base", e.what());
    }
    po.base = opt->base;
    po.min_bytes = dlsim::parse_flag(opt->min_bytes, "--min-bytes", dlsim::parse_bytes).value();
    po.statistic = cal::parse_statistic("--statistic", opt->statistic);
    po.results_files = opt->files;
    po.command = command;
    const std::filesystem::path out(opt->out);
    if (out.extension() != ".yaml" && out.extension() != ".yml") {
      dlsim::fail_at({opt->out}, "--output", "the profile must be a .yaml file");
    }
    po.name = out.stem().string();
    std::vector<cal::Results> all;
    for (const auto& f : opt->files) all.push_back(cal::read_results(f));
    const auto fitted = cal::fit_profile(all, po);
    // The layer table the profile names, beside it, put in place first: a profile never names
    // a file that is not there, and neither appears if the other cannot be written.
    std::vector<std::pair<std::string, std::string>> files;
    if (!fitted.layers_json.empty()) {
      files.emplace_back((out.parent_path() / fitted.layers_file).string(), fitted.layers_json);
    }
    files.emplace_back(opt->out, fitted.yaml);
    auto inputs = opt->files;
    for (const auto& base : dlsim::file_references({opt->base})) inputs.push_back(base);
    dlsim::write_outputs(files, inputs);
    for (const auto& w : fitted.warnings) std::cerr << "dlcalibrate: warning: " << w << "\n";
    for (const auto& r : fitted.report) std::cout << r << "\n";
    if (!fitted.layers_json.empty()) {
      std::cout << "wrote " << (out.parent_path() / fitted.layers_file).string()
                << " (its layer table)\n";
    }
    std::cout << "wrote " << opt->out << " (dlsim predict --cluster " << opt->out << " ...)\n";
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dlcalibrate: measure a GPU cluster and fit the hardware profile dlsim reads"};
  app.set_version_flag("--version", std::string("dlcalibrate ") + dlsim::kVersion);
  app.require_subcommand(1);
  const std::string command = command_line(argc, argv);
  add_import(app, command);
  add_show(app);
  add_fit(app, command);
  cal::add_run_commands(app, command);
  cal::add_slurm_commands(app, command);
  return dlsim::run_cli(app, argc, argv, "dlcalibrate");
}
