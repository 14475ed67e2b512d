#include "calibrate/slurm_commands.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "calibrate/slurm.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/output.hpp"

namespace dlsim::calibrate {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

void add_slurm(CLI::App& app, const std::string& command_line) {
  auto* c = app.add_subcommand(
      "slurm", "Write the sbatch script that calibrates every node of a Slurm job; submit it");
  struct Opt {
    SlurmOptions s;
    std::string cpu_args, mpi_args, gpu_args, script;
    bool dry_run = false, submit = false, wait = false, no_cpu = false, shared = false;
    double poll_s = 5;
  };
  auto opt = std::make_shared<Opt>();
  opt->s.command_line = command_line;
  c->add_option("--nodes", opt->s.nodes, "Nodes to measure (at least 1)");
  c->add_option("--gpus-per-node", opt->s.gpus_per_node,
                "GPUs per node (gres); the MPI step runs one rank per GPU");
  c->add_option("--partition", opt->s.partition, "Slurm partition (letters, digits, _ . - ,)");
  c->add_option("--account", opt->s.account, "Slurm account");
  c->add_option("--time", opt->s.time, "Time limit: M, M:S, H:M:S, D-H, D-H:M or D-H:M:S");
  c->add_option("--constraint", opt->s.constraint, "Node features (sbatch --constraint)");
  c->add_option("--array", opt->s.array, "Job array range (sbatch --array), e.g. 0-3");
  c->add_option("--job-name", opt->s.job_name, "Job name");
  c->add_option("--output-dir", opt->s.output_dir,
                "Where the job writes <job id>/ and slurm-<job id>.out (shared by the nodes)");
  c->add_option("--dlcalibrate", opt->s.dlcalibrate,
                "The dlcalibrate the nodes run (default: this one)");
  c->add_option("--cpu-args", opt->cpu_args,
                "Arguments for `dlcalibrate run cpu`, split at spaces (each is quoted)");
  c->add_option("--mpi-args", opt->mpi_args, "Arguments for `dlcalibrate run mpi` (with --mpi)");
  c->add_flag("--no-cpu", opt->no_cpu, "Leave out the CPU step");
  c->add_flag("--mpi", opt->s.mpi, "Add the srun --mpi=pmix step `dlcalibrate run mpi`");
  c->add_flag("--gpu", opt->s.gpu,
              "Add the step `dlcalibrate run gpu` on every GPU, one task each (the GPUs' speeds)");
  c->add_option("--gpu-args", opt->gpu_args, "Arguments for `dlcalibrate run gpu` (with --gpu)");
  c->add_flag("--shared", opt->shared, "Do not ask for the nodes exclusively");
  c->add_option("--resume", opt->s.resume_job,
                "Finish job JOBID (killed on a node, or out of time): same nodes and results "
                "directory; points already measured are skipped");
  c->add_option("--script", opt->script,
                "Write the script here (default: stdout with --dry-run, "
                "<output dir>/<job id>/job.sbatch with --submit)");
  auto* dry = c->add_flag("--dry-run", opt->dry_run, "Write the script, do not submit (default)");
  auto* submit = c->add_flag("--submit", opt->submit, "Submit with sbatch; print the job id");
  dry->excludes(submit);
  c->add_flag("--wait", opt->wait, "With --submit: wait for the job and report its final state")
      ->needs(submit);
  c->add_option("--poll", opt->poll_s, "Seconds between squeue polls with --wait")
      ->check(dlsim::finite_in(0.01, 86400));
  c->callback([opt] {
    auto& s = opt->s;
    s.cpu = !opt->no_cpu;
    s.exclusive = !opt->shared;
    s.cpu_args = split_words(opt->cpu_args);
    s.mpi_args = split_words(opt->mpi_args);
    s.gpu_args = split_words(opt->gpu_args);
    if (!s.resume_job.empty()) s.resume_nodes = nodes_of_job(s.output_dir, s.resume_job);
    const std::string script = sbatch_script(s);  // validates first: nothing is written before
    if (!opt->submit) {
      dlsim::write_output(opt->script.empty() ? "-" : opt->script, script);
      return;
    }
    std::error_code ec;
    fs::create_directories(s.output_dir, ec);
    if (ec)
      fail_at({}, "--output-dir",
              fmt::format("cannot create '{}': {}", s.output_dir, ec.message()));
    const std::string path =
        opt->script.empty() ? (fs::path(s.output_dir) /
                               fmt::format(".dlcalibrate-{}-{}.sbatch", timestamp(), ::getpid()))
                                  .string()
                            : opt->script;
    dlsim::write_output(path, script);
    const std::string id = submit_sbatch(path);
    const std::string out_dir = fs::absolute(s.output_dir).lexically_normal().string();
    std::string kept = path;
    if (opt->script.empty()) {
      // The script goes with the job's results (the job makes the same directory); a resumed
      // job's script beside the first one's.
      const auto run = fs::path(out_dir) / (s.resume_job.empty() ? id : s.resume_job);
      const auto name =
          s.resume_job.empty() ? std::string("job.sbatch") : fmt::format("resume-{}.sbatch", id);
      fs::create_directories(run, ec);
      if (!ec) fs::rename(path, run / name, ec);
      if (!ec) kept = (run / name).string();
    }
    std::cout << id << "\n" << std::flush;
    std::cerr << fmt::format(
        "dlcalibrate: submitted job {} (script {}); results go to {}/{}/; merge them with: "
        "dlcalibrate collect {} --dir {}\n",
        id, kept, out_dir, s.resume_job.empty() ? id : s.resume_job,
        s.resume_job.empty() ? id : s.resume_job, out_dir);
    if (!opt->wait) return;
    const std::string state = wait_for_job(id, opt->poll_s, &std::cerr);
    if (is_failed_job_state(state)) {
      throw InputError(fmt::format(
          "job {} ended {}; its log is {}/slurm-{}.out; measurements already written stay in "
          "{}/{}/ (dlcalibrate collect {} --dir {} merges them)",
          id, state, out_dir, id, out_dir, id, id, out_dir));
    }
    std::cerr << fmt::format("dlcalibrate: job {} ended {}\n", id, state);
  });
}

// One line per host and op: points measured and the best rate among them.
std::string collect_summary(const CollectedJob& c, const std::string& path) {
  std::string o;
  for (const auto& f : c.files) o += fmt::format("# read {}\n", f);
  struct Row {
    int points = 0;
    double best_bw = 0, best_flops = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  for (const auto& m : c.merged.measurements) {
    const auto host = m.params.count("host") ? m.params.at("host") : std::string("?");
    auto& r = rows[{host, m.op + " " + m.backend}];
    ++r.points;
    r.best_bw = std::max(r.best_bw, m.algbw());
    r.best_flops = std::max(r.best_flops, m.flop_rate());
  }
  o += fmt::format("{:<20} {:<22} {:>7} {:>14}\n", "host", "op", "points", "best");
  for (const auto& [key, r] : rows) {
    const std::string best = r.best_flops > 0 ? fmt::format("{:.2f} GFLOP/s", r.best_flops / 1e9)
                                              : fmt::format("{:.2f} GB/s", r.best_bw / 1e9);
    o += fmt::format("{:<20} {:<22} {:>7} {:>14}\n", key.first, key.second, r.points, best);
  }
  for (const auto& w : c.warnings) o += "warning: " + w + "\n";
  std::string hosts;
  for (const auto& h : c.merged.provenance.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
  o += fmt::format("merged {} records from {} files (hosts: {}) into {}\n",
                   c.merged.measurements.size(), c.files.size(), hosts, path);
  return o;
}

void add_collect(CLI::App& app, const std::string& command_line) {
  auto* c = app.add_subcommand("collect",
                               "Merge the results files of one Slurm job into one results file");
  struct Opt {
    std::string job_id, dir = "dlcalibrate-results", out;
    bool path_only = false;
  };
  auto opt = std::make_shared<Opt>();
  c->add_option("JOBID", opt->job_id, "The job id sbatch printed")->required();
  c->add_option("--dir", opt->dir, "The job's --output-dir (holds <JOBID>/)");
  c->add_option("-o,--output", opt->out,
                "Merged results file (default: <dir>/<JOBID>/merged.jsonl)");
  c->add_flag("--path-only", opt->path_only, "Print only the merged file's path");
  c->callback([opt, command_line] {
    const std::string out =
        opt->out.empty() ? (fs::path(opt->dir) / opt->job_id / "merged.jsonl").string() : opt->out;
    const auto job = collect_job(opt->job_id, opt->dir, command_line, out);
    dlsim::write_output(out, to_jsonl(job.merged));
    if (out == "-") {
      for (const auto& w : job.warnings) std::cerr << "dlcalibrate: warning: " << w << "\n";
      return;
    }
    if (opt->path_only) {
      for (const auto& w : job.warnings) std::cerr << "dlcalibrate: warning: " << w << "\n";
      std::cout << out << "\n";
      return;
    }
    std::cout << collect_summary(job, out);
  });
}

}  // namespace

void add_slurm_commands(CLI::App& app, const std::string& command_line) {
  add_slurm(app, command_line);
  add_collect(app, command_line);
}

}  // namespace dlsim::calibrate
