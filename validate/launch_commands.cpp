#include "validate/launch_commands.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "calibrate/slurm.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/json_text.hpp"
#include "common/output.hpp"
#include "common/units.hpp"
#include "validate/launch.hpp"
#include "validate/readers.hpp"

namespace dlsim::validate {
namespace {

namespace fs = std::filesystem;
using calibrate::comment_safe;

template <class T, class Parse>
std::vector<T> parse_list(const std::string& text, const char* flag, Parse parse) {
  std::vector<T> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) fail_at({}, flag, fmt::format("empty item in '{}'", text));
    out.push_back(parse(item));
  }
  if (out.empty()) fail_at({}, flag, "must not be empty");
  return out;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

nlohmann::json read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail_at({path, 0, 0}, "--collect", "cannot read the launch manifest");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail_at({path, 0, 0}, "--collect", fmt::format("not JSON: {}", json_problem(e)));
  }
  if (!j.is_object() || j.value("kind", "") != "dlsim-launch" || !j.contains("points")) {
    fail_at({path, 0, 0}, "kind", "not a dlvalidate launch manifest");
  }
  return j;
}

// A whole number of a manifest in [lo, hi]: a fraction, a string or a value out of range is an
// error naming the field (a manifest is written by launch; an edited one may not be).
long long whole_at(const nlohmann::json& parent, const std::string& key, const std::string& path,
                   const std::string& field, long long lo, long long hi) {
  const auto& v = parent.at(key);
  if (!v.is_number_integer()) {
    fail_at({path, 0, 0}, field, fmt::format("must be a whole number, got {}", v.dump()));
  }
  const auto n = v.get<long long>();
  if (n < lo || n > hi)
    fail_at({path, 0, 0}, field, fmt::format("must be in {}..{}, got {}", lo, hi, n));
  return n;
}

// A non-negative finite quantity of a manifest's knobs.
double amount_at(const nlohmann::json& k, const std::string& key, const std::string& path) {
  const auto& v = k.at(key);
  if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>())) {
    fail_at({path, 0, 0}, "knobs." + key,
            fmt::format("must be a non-negative number, got {}", v.dump()));
  }
  return v.get<double>();
}

// The options a manifest records, for the rows and the prediction of its points.
LaunchOptions options_of(const nlohmann::json& m, const std::string& path) {
  LaunchOptions o;
  o.model = m.at("model").get<std::string>();
  auto whole = [&](const std::string& key, long long lo, long long hi) {
    return static_cast<int>(whole_at(m, key, path, key, lo, hi));
  };
  o.gpus_per_node = whole("gpus_per_node", 0, dlsim::kMaxGpusPerNode);
  o.ranks_per_node = whole("ranks_per_node", 1, dlsim::kMaxGpusPerNode);
  o.threads_per_rank = whole("threads_per_rank", 1, 4096);
  o.steps = whole("steps", 1, 1 << 30);
  o.warmup_steps = whole("warmup_steps", 0, 1 << 30);
  o.job_name = m.at("job_name").get<std::string>();
  o.output_dir = m.at("output_dir").get<std::string>();
  o.command_line = m.at("command_line").get<std::string>();
  const auto& k = m.at("knobs");
  if (k.contains("fusion_threshold_bytes"))
    o.knobs.fusion_threshold = Bytes{amount_at(k, "fusion_threshold_bytes", path)};
  if (k.contains("cycle_time_s")) o.knobs.cycle_time = Seconds{amount_at(k, "cycle_time_s", path)};
  if (k.contains("bucket_cap_bytes"))
    o.knobs.bucket_cap = Bytes{amount_at(k, "bucket_cap_bytes", path)};
  if (k.contains("ps_servers")) {
    o.knobs.ps_servers =
        static_cast<int>(whole_at(k, "ps_servers", path, "knobs.ps_servers", 1, dlsim::kMaxRanks));
  }
  if (k.contains("ps_placement")) {
    const auto placement = k["ps_placement"].get<std::string>();
    if (placement != "colocated" && placement != "dedicated") {
      fail_at({path, 0, 0}, "knobs.ps_placement",
              fmt::format("'{}' is not colocated or dedicated", comment_safe(placement)));
    }
    o.knobs.ps_colocated = placement == "colocated";
  }
  if (k.contains("mode")) {
    o.knobs.mode = k["mode"].get<std::string>();
    if (*o.knobs.mode != "parameter_server" && *o.knobs.mode != "distributed_replicated") {
      fail_at({path, 0, 0}, "knobs.mode",
              fmt::format("'{}' is not parameter_server or distributed_replicated",
                          comment_safe(*o.knobs.mode)));
    }
  }
  if (k.contains("compression")) {
    const auto text = k["compression"].get<std::string>();
    o.knobs.compression = simulator::parse_gradient_compression(text);
    if (!o.knobs.compression) {
      fail_at({path, 0, 0}, "knobs.compression",
              fmt::format("unknown compression '{}' (none, fp16)", comment_safe(text)));
    }
  }
  return o;
}

struct Collected {
  LaunchOptions options;  // of the last manifest (one sweep shares them)
  std::vector<LaunchResult> results;
  std::vector<std::string> failures;  // one line each
};

Collected collect(const std::vector<std::string>& manifests,
                  const std::map<std::string, std::string>& states) {
  Collected c;
  for (const auto& path : manifests) {
    const auto m = read_manifest(path);
    try {
      c.options = options_of(m, path);
    } catch (const nlohmann::json::exception& e) {
      fail_at({path, 0, 0}, "", fmt::format("incomplete launch manifest: {}", e.what()));
    }
    if (!m.at("points").is_array()) fail_at({path, 0, 0}, "points", "must be a list of runs");
    if (m.contains("job_id") && !m.at("job_id").is_string()) {
      fail_at({path, 0, 0}, "job_id", "must be a string (Slurm's job id)");
    }
    const std::string job = m.value("job_id", "");
    for (const auto& p : m.at("points")) {
      if (!p.is_object()) fail_at({path, 0, 0}, "points", "each run must be an object");
      LaunchResult r;
      std::string framework;
      try {
        r.job_id = p.at("job_id").get<std::string>();
        r.log = p.at("log").get<std::string>();
        framework = p.at("framework").get<std::string>();
        r.point.nodes =
            static_cast<int>(whole_at(p, "nodes", path, "points.nodes", 1, dlsim::kMaxRanks));
        r.point.batch = whole_at(p, "batch_per_gpu", path, "points.batch_per_gpu", 1, 1 << 24);
        r.point.alloc_nodes = static_cast<int>(
            whole_at(p, "alloc_nodes", path, "points.alloc_nodes", 1, 2 * dlsim::kMaxRanks));
        r.point.tasks_per_node = static_cast<int>(whole_at(
            p, "tasks_per_node", path, "points.tasks_per_node", 1, dlsim::kMaxGpusPerNode));
      } catch (const nlohmann::json::exception& e) {
        fail_at({path, 0, 0}, "points", fmt::format("malformed launch manifest: {}", e.what()));
      }
      const auto f = parse_launch_framework(framework);
      if (!f) fail_at({path, 0, 0}, "framework", "unknown framework in the manifest");
      r.point.framework = *f;
      r.point.ranks_per_node =
          c.options.gpus_per_node > 0 ? c.options.gpus_per_node : c.options.ranks_per_node;
      try {
        r.samples_per_s =
            read_launched_throughput(r.log, r.point.nodes, c.options.warmup_steps, &r.format);
        c.results.push_back(r);
      } catch (const InputError& e) {
        const auto s = states.find(job);
        c.failures.push_back(
            fmt::format("job {}{}: {}", r.job_id,
                        s == states.end() ? "" : fmt::format(" (Slurm: {})", s->second), e.what()));
      }
    }
  }
  return c;
}

// The runs that measured nothing: one line each, the last as the InputError that exits 2.
void fail_on_failures(const Collected& c) {
  if (c.failures.empty()) return;
  for (std::size_t i = 0; i + 1 < c.failures.size(); ++i) {
    std::cerr << "dlvalidate: error: " << c.failures[i] << "\n";
  }
  throw InputError(c.failures.back());
}

// Collected runs compared with their predictions; the results table and the cases file are
// written, both or neither, only once everything was read and predicted, and the table is
// printed after that, so an error leaves no partial file and no partial table.
void report(const Collected& c, const std::string& results_path, const std::string& cluster,
            const std::string& cases_out, const std::string& source_id,
            const std::vector<std::string>& manifests) {
  if (c.results.empty()) return;
  std::vector<Row> rows;
  for (const auto& r : c.results) rows.push_back(launch_row(c.options, r, source_id));
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!results_path.empty()) {
    // The new rows are appended to the table (made with the header when missing).
    std::vector<Row> all;
    if (fs::exists(results_path)) {
      const auto t = read_table(results_path);
      if (t.columns != throughput_columns()) {
        fail_at({results_path, 1, 0}, "--results", "not a throughput.csv (its columns differ)");
      }
      all = t.rows;
    }
    all.insert(all.end(), rows.begin(), rows.end());
    outputs.emplace_back(results_path, write_csv(throughput_columns(), all));
  }
  // The comparison goes through the same cases reader and compare() as `published`.
  std::vector<Comparison> comparisons;
  const std::string table_name =
      results_path.empty() ? source_id : fs::path(results_path).stem().string();
  if (!cluster.empty()) {
    // A cluster file by its absolute path: the cases file may be written to another folder,
    // and a relative cluster in it is read from that folder.
    std::error_code ec;
    const std::string cluster_ref = fs::is_regular_file(cluster, ec)
                                        ? fs::absolute(cluster).lexically_normal().string()
                                        : cluster;
    const auto yaml = launch_cases_yaml(c.options, c.results, source_id, table_name, cluster_ref);
    Table t;
    t.name = table_name;
    t.path = results_path.empty() ? "(launched runs)" : results_path;
    t.columns = throughput_columns();
    t.rows = rows;
    for (std::size_t i = 0; i < rows.size(); ++i) t.lines.push_back(static_cast<int>(i) + 2);
    comparisons = compare(
        {t}, parse_cases(yaml, cases_out.empty() ? "(the launched runs' cases)" : cases_out));
    if (!cases_out.empty()) outputs.emplace_back(cases_out, yaml);
  }
  dlsim::write_outputs(outputs, manifests);
  std::cout << fmt::format("# {:<20} {:>5} {:>6} {:>6} {:>14} {:>14} {:>8}\n", "framework", "nodes",
                           "ranks", "batch", "measured", "predicted", "error");
  std::cout << fmt::format("# {:<20} {:>5} {:>6} {:>6} {:>14} {:>14} {:>8}\n", "", "", "", "",
                           "(samples/s)", "(samples/s)", "(%)");
  for (std::size_t i = 0; i < c.results.size(); ++i) {
    const auto& r = c.results[i];
    std::string predicted = "-", error = "-";
    for (const auto& cmp : comparisons) {
      if (cmp.line == static_cast<int>(i) + 2) {
        predicted = fmt::format("{:.1f}", cmp.predicted);
        error = fmt::format("{:+.1f}", 100 * cmp.error);
      }
    }
    std::cout << fmt::format("  {:<20} {:>5} {:>6} {:>6} {:>14.1f} {:>14} {:>8}\n",
                             to_string(r.point.framework), r.point.nodes, r.point.ranks(),
                             r.point.batch, r.samples_per_s, predicted, error);
  }
  if (!comparisons.empty()) {
    const auto s = summarize(comparisons);
    std::cout << fmt::format("# median |error| {:.1f} %, worst {:.1f} % over {} run(s)\n",
                             100 * s.back().median_abs, 100 * s.back().worst_abs, s.back().count);
  }
}

// A flag given on the command line that no run of the sweep would read is an error naming it:
// the jobs would run without it and the results would not say so. (Knobs that several
// frameworks share are checked by validate_launch, for manifests too.)
void refuse_unread_flags(const CLI::App& c, const LaunchOptions& o, bool predicts) {
  std::vector<std::string> names;
  for (auto f : o.frameworks) names.emplace_back(to_string(f));
  const std::string sweep = fmt::format("{}", fmt::join(names, ", "));
  auto needs = [&](const char* flag, std::initializer_list<LaunchFramework> readers,
                   const char* who) {
    if (c.count(flag) == 0) return;
    for (auto f : o.frameworks) {
      if (std::find(readers.begin(), readers.end(), f) != readers.end()) return;
    }
    fail_at({}, flag,
            fmt::format("is read by {} only; no framework of the sweep ({}) takes it", who, sweep));
  };
  const auto ps = {LaunchFramework::kTfPs, LaunchFramework::kMxnetPs};
  needs("--ps-servers", ps, "the parameter-server frameworks (tf-ps, mxnet-ps)");
  needs("--ps-placement", ps, "the parameter-server frameworks (tf-ps, mxnet-ps)");
  needs("--ps-device", {LaunchFramework::kTfPs}, "tf-ps");
  needs("--mode", {LaunchFramework::kTfPs}, "tf-ps");
  const auto ddp = {LaunchFramework::kPytorchDdp};
  needs("--backend", ddp, "pytorch-ddp");
  needs("--torch-launcher", ddp, "pytorch-ddp");
  needs("--master-port", ddp, "pytorch-ddp");
  if (c.count("--ranks-per-node") > 0 && o.gpus_per_node > 0) {
    fail_at({}, "--ranks-per-node",
            fmt::format("applies to CPU ranks (--gpus-per-node 0); with {} GPUs per node each "
                        "node runs a rank per GPU",
                        o.gpus_per_node));
  }
  if (c.count("--cluster") > 0 && !predicts) {
    fail_at({}, "--cluster", "is read by --predict and --wait (the comparison) only");
  }
  auto once = [](const char* flag, const auto& values) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (values[i] == values[j]) {
          fail_at({}, flag, fmt::format("{} is given twice (a run would repeat)", values[i]));
        }
      }
    }
  };
  once("--nodes", o.nodes);
  once("--batch", o.batches);
  once("--framework", names);
}

void add_launch(CLI::App& app, const std::string& command_line) {
  auto* c = app.add_subcommand(
      "launch",
      "Write the sbatch script of a training run (or a sweep) as sites run each framework; "
      "submit it, wait, and compare what it measured with dlsim's prediction");
  struct Opt {
    LaunchOptions o;
    std::string frameworks = "pytorch-ddp", nodes = "1", batches = "32", script_args;
    std::string fusion, cycle, bucket, placement, ps_device, cluster, results, cases_out,
        compression;
    std::string report_dir, source_id, script_out;
    std::optional<int> ps_servers;
    std::vector<std::string> collect_manifests;
    bool dry_run = false, submit = false, wait = false, parsable = false, predict = false;
    bool shared = false;
    double poll_s = 5;
  };
  auto opt = std::make_shared<Opt>();
  auto& o = opt->o;
  o.command_line = command_line;
  c->add_option(
      "--framework", opt->frameworks, "Frameworks, comma-separated: " + [] {
        std::string s;
        for (const auto& n : launch_framework_names()) s += (s.empty() ? "" : ", ") + n;
        return s;
      }());
  c->add_option("--model", o.model, "Model (a dlsim zoo name)");
  c->add_option("--nodes", opt->nodes, "Worker node counts, comma-separated (a sweep)");
  c->add_option("--batch", opt->batches, "Batches per GPU (per rank on CPUs), comma-separated");
  c->add_option("--gpus-per-node", o.gpus_per_node, "GPUs per node (0: CPU ranks)");
  c->add_option("--ranks-per-node", o.ranks_per_node, "CPU ranks per node (without GPUs)");
  c->add_option("--threads", o.threads_per_rank,
                "Intra-op threads per rank (OMP_NUM_THREADS, --cpus-per-task); 0: default");
  c->add_option("--script", o.script,
                "The training script (default: the framework's benchmark, docs/launch.md)");
  c->add_option("--script-args", opt->script_args,
                "The script's arguments, split at spaces (each is quoted)");
  c->add_option("--python", o.python, "The Python the nodes run");
  c->add_option("--steps", o.steps, "Timed steps");
  c->add_option("--warmup", o.warmup_steps, "Warm-up steps");
  c->add_option("--backend", o.torch_backend,
                "pytorch-ddp: nccl, gloo or mpi (default nccl with GPUs, gloo without)");
  c->add_option("--torch-launcher", o.torch_launcher,
                "pytorch-ddp: srun (a task per rank) or torchrun (a task per node)");
  c->add_option("--fusion-threshold", opt->fusion, "Horovod fusion buffer (e.g. 64MiB)");
  c->add_option("--cycle-time", opt->cycle, "Horovod cycle time (e.g. 5ms)");
  c->add_option("--bucket-cap", opt->bucket, "pytorch-ddp bucket size (e.g. 25MiB)");
  c->add_option("--compression", opt->compression,
                "none or fp16: DDP's fp16_compress_hook (pytorch-ddp), Horovod's "
                "Compression.fp16 (horovod-pytorch, horovod-keras)");
  c->add_option("--ps-servers", opt->ps_servers, "Parameter servers (tf-ps, mxnet-ps)");
  c->add_option("--ps-placement", opt->placement, "colocated (on worker nodes) or dedicated");
  c->add_option("--ps-device", opt->ps_device, "tf-ps: variables on the cpu or a gpu");
  c->add_option("--mode", o.knobs.mode, "tf-ps: parameter_server or distributed_replicated");
  c->add_option("--nccl-algo", o.nccl_algo, "NCCL_ALGO (e.g. Ring, Tree)");
  c->add_option("--socket-ifname", o.gloo_socket_ifname,
                "Interface for gloo and ps-lite (GLOO_SOCKET_IFNAME, DMLC_INTERFACE)");
  c->add_option("--nccl-socket-ifname", o.nccl_socket_ifname, "NCCL_SOCKET_IFNAME");
  c->add_option("--ib-hca", o.nccl_ib_hca, "NCCL_IB_HCA (e.g. mlx5_0,mlx5_1)");
  c->add_option("--master-port", o.master_port, "pytorch-ddp rendezvous port");
  c->add_option("--partition", o.partition, "Slurm partition");
  c->add_option("--account", o.account, "Slurm account");
  c->add_option("--constraint", o.constraint, "Node features (sbatch --constraint)");
  c->add_option("--time", o.time, "Time limit of each job: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S");
  c->add_option("--job-name", o.job_name, "Job name");
  c->add_option("--output-dir", o.output_dir,
                "Where jobs write their logs, scripts and manifests (shared by the nodes)");
  c->add_flag("--shared", opt->shared, "Do not ask for the nodes exclusively");
  c->add_option("--script-out", opt->script_out,
                "With --dry-run: write the script(s) here instead of stdout");
  auto* dry = c->add_flag("--dry-run", opt->dry_run, "Print the scripts, submit nothing (default)");
  auto* submit = c->add_flag("--submit", opt->submit, "Submit with sbatch");
  auto* collect_opt = c->add_option("--collect", opt->collect_manifests,
                                    "Collect finished jobs from their manifests "
                                    "(<output dir>/<job id>.launch.json) instead of submitting");
  dry->excludes(submit);
  collect_opt->excludes(submit)->excludes(dry);
  c->add_flag("--wait", opt->wait, "With --submit: wait for the jobs, then collect them")
      ->needs(submit);
  c->add_flag("--parsable", opt->parsable, "With --submit: print only the job ids")->needs(submit);
  c->add_option("--poll", opt->poll_s, "Seconds between squeue polls with --wait")
      ->check(dlsim::finite_in(0.01, 86400));
  c->add_flag("--predict", opt->predict,
              "Print dlsim's prediction of each run first (needs --cluster)");
  c->add_option("--cluster", opt->cluster,
                "The cluster (preset or calibrated profile) that predicts the runs");
  c->add_option("--results", opt->results,
                "Append the measured rows to this throughput.csv (columns of "
                "../shared/validation)");
  c->add_option("--cases-out", opt->cases_out,
                "Write the cases file that maps the rows to predictions (for dlvalidate "
                "published)");
  c->add_option("--source-id", opt->source_id, "The rows' source_id (default: launch-<job id>)");
  c->callback([c, opt, &o] {
    o.frameworks =
        parse_list<LaunchFramework>(opt->frameworks, "--framework", [](const std::string& s) {
          const auto f = parse_launch_framework(s);
          if (!f) {
            fail_at({}, "--framework",
                    fmt::format("unknown framework '{}'{}", comment_safe(s),
                                did_you_mean(s, launch_framework_names())));
          }
          return *f;
        });
    o.nodes = parse_list<int>(opt->nodes, "--nodes", [](const std::string& s) {
      return static_cast<int>(dlsim::parse_int_flag(s, "--nodes", 1, dlsim::kMaxRanks));
    });
    o.batches = parse_list<std::int64_t>(opt->batches, "--batch", [](const std::string& s) {
      return static_cast<std::int64_t>(dlsim::parse_int_flag(s, "--batch", 1, 1 << 24));
    });
    o.script_args = split_words(opt->script_args);
    o.exclusive = !opt->shared;
    if (!opt->fusion.empty()) {
      o.knobs.fusion_threshold = parse_flag(opt->fusion, "--fusion-threshold", parse_whole_bytes);
    }
    if (!opt->cycle.empty())
      o.knobs.cycle_time = parse_flag(opt->cycle, "--cycle-time", parse_seconds);
    if (!opt->bucket.empty())
      o.knobs.bucket_cap = parse_flag(opt->bucket, "--bucket-cap", parse_whole_bytes);
    if (opt->ps_servers) o.knobs.ps_servers = *opt->ps_servers;
    if (!opt->compression.empty()) {
      o.knobs.compression = simulator::parse_gradient_compression(opt->compression);
      if (!o.knobs.compression) {
        fail_at(
            {}, "--compression",
            fmt::format("unknown compression '{}' (none, fp16)", comment_safe(opt->compression)));
      }
    }
    if (!opt->placement.empty()) {
      if (opt->placement != "colocated" && opt->placement != "dedicated") {
        fail_at({}, "--ps-placement",
                fmt::format("'{}' is not colocated or dedicated", comment_safe(opt->placement)));
      }
      o.knobs.ps_colocated = opt->placement == "colocated";
    }
    if (!opt->ps_device.empty()) {
      if (opt->ps_device != "cpu" && opt->ps_device != "gpu") {
        fail_at({}, "--ps-device",
                fmt::format("'{}' is not cpu or gpu", comment_safe(opt->ps_device)));
      }
      o.knobs.ps_on_gpu = opt->ps_device == "gpu";
    }
    if (opt->predict && opt->cluster.empty()) fail_at({}, "--predict", "needs --cluster");
    // Checked before anything is submitted, not when the jobs have run.
    if (!opt->results.empty() && !opt->cases_out.empty() &&
        fs::weakly_canonical(opt->results) == fs::weakly_canonical(opt->cases_out)) {
      fail_at({opt->cases_out}, "--cases-out", "is the --results file too; name another file");
    }
    for (const auto& out : {opt->results, opt->cases_out})
      dlsim::refuse_output_over_input(out, opt->collect_manifests);

    if (!opt->collect_manifests.empty()) {
      const auto got = collect(opt->collect_manifests, {});
      report(got, opt->results, opt->cluster, opt->cases_out,
             opt->source_id.empty() ? "launch" : opt->source_id, opt->collect_manifests);
      fail_on_failures(got);
      return;
    }

    refuse_unread_flags(*c, o, opt->predict || opt->wait);
    const auto jobs = plan_launch(o);  // validates: nothing is written or submitted before
    if (opt->predict) {
      for (const auto& j : jobs) {
        for (const auto& p : j.points) {
          const auto pred = simulator::predict(predict_options(o, p, opt->cluster));
          std::cout << fmt::format(
              "# predicted: {} {} batch {} on {} node(s), {} rank(s): {:.1f} samples/s, step "
              "{:.1f} ms, scaling efficiency {:.1f} %\n",
              to_string(p.framework), o.model, p.batch, p.nodes, p.ranks(), pred.throughput,
              pred.step_time_s * 1e3, pred.scaling_efficiency * 100);
        }
      }
    }
    if (!opt->submit) {
      std::string all;
      for (const auto& j : jobs) all += j.script + (jobs.size() > 1 ? "\n" : "");
      dlsim::write_output(opt->script_out.empty() ? "-" : opt->script_out, all);
      return;
    }
    if (!o.script.empty() && !fs::exists(o.script)) {
      fail_at({}, "--script", fmt::format("'{}' does not exist", comment_safe(o.script)));
    }
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    if (ec) {
      fail_at({}, "--output-dir",
              fmt::format("cannot create '{}': {}", comment_safe(o.output_dir), ec.message()));
    }
    std::vector<std::string> manifests, ids;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const auto tmp = fs::path(o.output_dir) / fmt::format(".launch-{}-{}.sbatch", ::getpid(), i);
      dlsim::write_output(tmp.string(), jobs[i].script);
      const std::string id = calibrate::submit_sbatch(tmp.string());
      const auto script = fs::path(o.output_dir) / (id + ".sbatch");
      fs::rename(tmp, script, ec);
      const auto manifest = fs::path(o.output_dir) / (id + ".launch.json");
      dlsim::write_output(
          manifest.string(),
          launch_manifest(o, jobs[i], id, fs::absolute(script).string()).dump(2) + "\n");
      manifests.push_back(manifest.string());
      ids.push_back(id);
      std::cout << id << "\n" << std::flush;
      if (!opt->parsable) {
        std::cerr << fmt::format("dlvalidate: submitted job {} ({} run(s)); manifest {}\n", id,
                                 jobs[i].points.size(), manifest.string());
      }
    }
    if (!opt->wait) return;
    std::map<std::string, std::string> states;
    for (const auto& id : ids) {
      states[id] = calibrate::wait_for_job(id, opt->poll_s, opt->parsable ? nullptr : &std::cerr,
                                           "dlvalidate");
    }
    const auto got = collect(manifests, states);
    report(got, opt->results, opt->cluster, opt->cases_out,
           opt->source_id.empty() ? "launch-" + ids.front() : opt->source_id, manifests);
    fail_on_failures(got);
  });
}

}  // namespace

void add_launch_command(CLI::App& app, const std::string& command_line) {
  add_launch(app, command_line);
}

}  // namespace dlsim::validate
