#include "validate/import_commands.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "common/cli.hpp"
#include "common/output.hpp"
#include "common/version.hpp"
#include "validate/readers.hpp"

namespace dlsim::validate {
namespace {

void add_import(CLI::App& app) {
  auto* c = app.add_subcommand(
      "import",
      "Benchmark logs (tf_cnn_benchmarks, Horovod synthetic benchmarks) to a CSV with the columns "
      "of throughput.csv, for `dlvalidate published --data`");
  struct Opt {
    std::vector<std::string> logs;
    LogOptions log;
    RowOptions row;
    std::string out = "-";
  };
  auto o = std::make_shared<Opt>();
  c->add_option("logs", o->logs, "Log files, one run each")->required();
  c->add_option("--format", o->log.format, "Which benchmark printed the logs")
      ->check(CLI::IsMember({"auto", "tf_cnn_benchmarks", "horovod"}))
      ->capture_default_str();
  c->add_option("-o,--output", o->out, "The CSV (- for stdout); written only when every log reads");
  c->add_option("--model", o->log.model, "The dlsim zoo model, instead of the printed one");
  c->add_option("--source-id", o->row.source_id, "source_id column");
  c->add_option("--gpu", o->row.gpu, "gpu column (e.g. V100-SXM2-16GB)");
  c->add_option("--precision", o->row.precision, "precision column (e.g. fp32, mixed(fp16))");
  c->add_option("--nodes", o->row.nodes, "num_nodes column")
      ->check(CLI::Range(1, dlsim::kMaxRanks));
  c->add_option("--gpus-per-node", o->row.gpus_per_node, "gpus_per_node column")
      ->check(CLI::Range(1, dlsim::kMaxGpusPerNode));
  c->add_option("--data", o->row.data, "data column (default: from the log)");
  c->add_option("--intra-node", o->row.intra_node, "intra_node column (e.g. NVLink(DGX-1))");
  c->add_option("--inter-node", o->row.inter_node, "inter_node column (e.g. 25GbE RoCE)");
  c->add_option("--comm", o->row.comm, "comm column (default: from the log)");
  c->add_option("--framework", o->row.framework, "framework column (default: from the log)");
  c->add_option("--task", o->row.task, "task column")->capture_default_str();
  c->add_option("--notes", o->row.notes, "Text put first in the notes column");
  c->callback([o] {
    // Every log is read before the CSV is written, so a bad log leaves no file.
    dlsim::refuse_repeated_inputs(o->logs, "logs", "one log is one run; its row would count twice");
    std::vector<Row> rows;
    std::vector<Measurement> ms;
    for (const auto& path : o->logs) {
      ms.push_back(read_log(path, o->log));
      rows.push_back(to_row(ms.back(), o->row));
    }
    dlsim::write_output(o->out, write_csv(throughput_columns(), rows), o->logs);
    for (std::size_t i = 0; i < ms.size(); ++i) {
      const auto& m = ms[i];
      std::cerr << fmt::format("dlvalidate: {}: {} ({}), {} GPU{} x {} per GPU: {} images/s{}\n",
                               m.path, m.model, m.format, m.gpus, m.gpus == 1 ? "" : "s",
                               m.batch_per_gpu, rows[i].at("value"),
                               m.spread > 0 ? fmt::format(" +/- {:.4g}", m.spread) : "");
    }
  });
}

void add_timeline(CLI::App& app) {
  auto* c = app.add_subcommand(
      "timeline", "A Horovod timeline (HOROVOD_TIMELINE): time per phase, in total and per step");
  struct Opt {
    std::string file, out = "-", json;
  };
  auto o = std::make_shared<Opt>();
  c->add_option("file", o->file, "The timeline JSON")->required();
  c->add_option("-o,--output", o->out, "The Markdown summary (- for stdout)");
  c->add_option("--json", o->json, "Also write the summary as JSON here");
  c->callback([o] {
    const auto s = read_timeline(o->file);
    const auto md = timeline_markdown(s);
    std::vector<std::pair<std::string, std::string>> files;
    if (!o->json.empty()) {
      files.emplace_back(o->json, timeline_json(s, std::string("dlvalidate ") + kVersion));
    }
    files.emplace_back(o->out, md);
    dlsim::write_outputs(files, {o->file});
  });
}

}  // namespace

void add_import_commands(CLI::App& app) {
  add_import(app);
  add_timeline(app);
}

}  // namespace dlsim::validate
