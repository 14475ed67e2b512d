#include "calibrate/slurm.hpp"

#include "calibrate/driver.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/hostlist.hpp"

extern char** environ;

namespace dlsim::calibrate {
namespace {

namespace fs = std::filesystem;

bool all_of_chars(std::string_view text, std::string_view extra) {
  return std::all_of(text.begin(), text.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           extra.find(c) != std::string_view::npos;
  });
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    if (auto t = trim(line); !t.empty()) out.push_back(t);
  }
  return out;
}

// A program's complaint as one line: "sbatch: error: " prefixes dropped, lines joined by "; ".
std::string one_line(std::string_view text) {
  std::string out;
  for (auto line : lines_of(text)) {
    for (const char* prefix : {"sbatch: error: ", "squeue: error: ", "sacct: error: ",
                               "scontrol: error: ", "slurm_load_jobs error: "}) {
      if (line.rfind(prefix, 0) == 0) line.erase(0, std::strlen(prefix));
    }
    out += (out.empty() ? "" : "; ") + line;
  }
  return out;
}

std::string this_program() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("dlcalibrate") : p.string();
}

std::string join_words(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

std::string bash_array(const char* name, const std::vector<std::string>& words) {
  std::string out = fmt::format("{}=(", name);
  for (std::size_t i = 0; i < words.size(); ++i) out += (i ? " " : "") + shell_quote(words[i]);
  return out + ")\n";
}

// "KEY=VALUE" lines (nccl-env.txt, job.env); others are left out.
std::map<std::string, std::string> read_env_file(const fs::path& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos && eq > 0) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace

bool is_slurm_time(std::string_view text) {
  static const std::regex re(R"(^(\d+-)?\d+(:\d+){0,2}$)");
  const std::string s(text);
  if (s == "UNLIMITED" || s == "INFINITE") return true;
  if (!std::regex_match(s, re)) return false;
  // Minutes and seconds after the first field stay below 60.
  const auto dash = s.find('-');
  const std::string clock = dash == std::string::npos ? s : s.substr(dash + 1);
  std::istringstream in(clock);
  std::string field;
  for (int i = 0; std::getline(in, field, ':'); ++i) {
    if (i > 0 && (field.size() > 2 || std::stoi(field) >= 60)) return false;
    if (field.size() > 9) return false;
  }
  return true;
}

std::string comment_safe(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

void check_sbatch_value(const char* field, const std::string& value, std::string_view extra,
                        const char* what) {
  if (value.empty()) fail_at({}, field, "must not be empty");
  if (!all_of_chars(value, extra)) {
    fail_at({}, field,
            fmt::format("'{}' is not a valid {}: use letters, digits and {}", comment_safe(value),
                        what, extra));
  }
}

// sbatch --array: comma-separated indices "N", ranges "N-M" and stepped ranges "N-M:S", then an
// optional "%K" (at most K tasks at once). A range that counts down or a step of 0 is empty or
// endless for Slurm, and an error here.
void check_array(const std::string& spec) {
  check_sbatch_value("array", spec, ",-:%", "job array range");
  static const std::regex item(R"(^(\d{1,9})(?:-(\d{1,9})(?::(\d{1,9}))?)?$)");
  const auto percent = spec.find('%');
  const std::string ranges = spec.substr(0, percent);
  if (percent != std::string::npos &&
      !std::regex_match(spec.substr(percent + 1), std::regex(R"(^[1-9]\d{0,8}$)"))) {
    fail_at({}, "array", fmt::format("'{}': the limit after % must be a positive count", spec));
  }
  std::istringstream in(ranges);
  for (std::string part; std::getline(in, part, ',');) {
    std::smatch m;
    if (!std::regex_match(part, m, item)) {
      fail_at({}, "array",
              fmt::format("'{}' is not a valid job array range (N, N-M or N-M:S, comma-separated, "
                          "then %K)",
                          comment_safe(spec)));
    }
    if (m[2].matched && std::stol(m[2].str()) < std::stol(m[1].str())) {
      fail_at({}, "array", fmt::format("'{}': the range {} counts down", spec, part));
    }
    if (m[3].matched && std::stol(m[3].str()) < 1) {
      fail_at({}, "array", fmt::format("'{}': the step of {} must be at least 1", spec, part));
    }
  }
  if (ranges.empty() || ranges.back() == ',') {
    fail_at({}, "array", fmt::format("'{}' is not a valid job array range", comment_safe(spec)));
  }
}

void validate_slurm_options(const SlurmOptions& o) {
  if (o.nodes < 1 || o.nodes > kMaxRanks) {
    fail_at({}, "nodes", fmt::format("must be in 1..{} (got {})", kMaxRanks, o.nodes));
  }
  if (o.gpus_per_node < 0 || o.gpus_per_node > kMaxGpusPerNode) {
    fail_at({}, "gpus_per_node",
            fmt::format("must be in 0..{} (got {})", kMaxGpusPerNode, o.gpus_per_node));
  }
  if (!is_slurm_time(o.time)) {
    fail_at({}, "time",
            fmt::format("'{}' is not a Slurm time limit (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S, "
                        "e.g. 00:30:00)",
                        comment_safe(o.time)));
  }
  if (!o.partition.empty()) {
    check_sbatch_value("partition", o.partition, "_.-,", "partition name (or list)");
  }
  if (!o.account.empty()) check_sbatch_value("account", o.account, "_.-", "account name");
  if (!o.constraint.empty()) {
    check_sbatch_value("constraint", o.constraint, "_.-,&|!*()[]:", "feature expression");
  }
  if (!o.array.empty()) check_array(o.array);
  check_sbatch_value("job_name", o.job_name, "_.-", "job name");
  // The directory goes into "#SBATCH --output=": one word, and no % (sbatch's file patterns).
  check_sbatch_value("output_dir", o.output_dir, "_.-/+=@~,", "directory for #SBATCH --output");
  if (!o.cpu && !o.mpi && !o.gpu) {
    fail_at({}, "no_cpu", "leaves nothing to run: add --mpi or --gpu");
  }
  if (o.gpu && o.gpus_per_node < 1) fail_at({}, "gpu", "needs --gpus-per-node");
  if (!o.cpu && !o.cpu_args.empty()) fail_at({}, "cpu_args", "given with --no-cpu");
  if (!o.resume_job.empty()) {
    if (!std::all_of(o.resume_job.begin(), o.resume_job.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '_'; })) {
      fail_at({}, "resume", fmt::format("'{}' is not a Slurm job id", comment_safe(o.resume_job)));
    }
    if (o.resume_nodes.empty()) fail_at({}, "resume", "the job's nodes are not known");
    for (const auto& n : o.resume_nodes) check_sbatch_value("resume", n, "_.-", "node name");
    if (static_cast<int>(o.resume_nodes.size()) != o.nodes) {
      fail_at({}, "nodes",
              fmt::format("job {} ran on {} nodes; resume it with --nodes {}", o.resume_job,
                          o.resume_nodes.size(), o.resume_nodes.size()));
    }
    if (!o.array.empty()) fail_at({}, "array", "cannot resume a job as an array");
  }
  if (!o.mpi && !o.mpi_args.empty()) fail_at({}, "mpi_args", "needs --mpi");
  if (!o.gpu && !o.gpu_args.empty()) fail_at({}, "gpu_args", "needs --gpu");
}

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string sbatch_script(const SlurmOptions& o) {
  validate_slurm_options(o);
  const std::string out_dir = fs::absolute(o.output_dir).lexically_normal().string();
  std::string binary = o.dlcalibrate.empty() ? this_program() : o.dlcalibrate;
  // A bare name is looked up on the nodes' PATH; a path is made absolute here, since the job
  // may start in another directory.
  if (binary.find('/') != std::string::npos) {
    binary = fs::absolute(binary).lexically_normal().string();
  }
  const int ranks_per_node = std::max(o.gpus_per_node, 1);

  std::string s = "#!/bin/bash\n";
  s += "# dlcalibrate on Slurm: measures every node of the allocation (docs/slurm-local.md).\n";
  if (!o.command_line.empty()) s += "# Generated by: " + comment_safe(o.command_line) + "\n";
  s += fmt::format("#SBATCH --job-name={}\n", o.job_name);
  s += fmt::format("#SBATCH --nodes={}\n", o.nodes);
  s += fmt::format("#SBATCH --ntasks-per-node={}\n", ranks_per_node);
  if (o.gpus_per_node > 0) s += fmt::format("#SBATCH --gpus-per-node={}\n", o.gpus_per_node);
  if (!o.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", o.partition);
  if (!o.account.empty()) s += fmt::format("#SBATCH --account={}\n", o.account);
  s += fmt::format("#SBATCH --time={}\n", o.time);
  if (!o.constraint.empty()) s += fmt::format("#SBATCH --constraint={}\n", o.constraint);
  if (!o.array.empty()) s += fmt::format("#SBATCH --array={}\n", o.array);
  if (!o.resume_job.empty()) {
    std::string list;
    for (const auto& n : o.resume_nodes) list += (list.empty() ? "" : ",") + n;
    s += fmt::format("#SBATCH --nodelist={}\n", list);
  }
  if (o.exclusive) s += "#SBATCH --exclusive\n";
  s += fmt::format("#SBATCH --output={}/slurm-%j.out\n", out_dir);
  s += "set -euo pipefail\n\n";

  s += "# Every value from the command line is single-quoted: the shell takes it literally.\n";
  s += "DLCALIBRATE=" + shell_quote(binary) + "\n";
  s += "OUT=" + shell_quote(out_dir) + "\n";
  // A resumed job's steps skip the points its results files already hold.
  auto with_resume = [&](std::vector<std::string> args) {
    if (!o.resume_job.empty()) args.push_back("--resume");
    return args;
  };
  if (o.cpu) s += bash_array("CPU_ARGS", with_resume(o.cpu_args));
  if (o.mpi) s += bash_array("MPI_ARGS", with_resume(o.mpi_args));
  if (o.gpu) s += bash_array("GPU_ARGS", with_resume(o.gpu_args));
  if (o.resume_job.empty()) {
    s += "\n# Results are named by the job id: one directory per job (per task of an array).\n";
    s += "RUN=\"$OUT/$SLURM_JOB_ID\"\n";
  } else {
    s += fmt::format("\n# Finishes job {}: its directory, its nodes, its results files.\n",
                     o.resume_job);
    s += fmt::format("RUN=\"$OUT/{}\"\n", o.resume_job);
  }
  s += "mkdir -p \"$RUN\"\n\n";

  s += "# The allocation's nodes, one a line: the topology of the measured cluster.\n";
  s += "scontrol show hostnames \"$SLURM_JOB_NODELIST\" > \"$RUN/nodes.txt\"\n";
  s += "# The NCCL_* settings the collectives run with change their results: keep them.\n";
  s += "{ env | grep '^NCCL_' | sort || true; } > \"$RUN/nccl-env.txt\"\n";
  if (o.resume_job.empty()) {
    s += "{\n";
    s += "  echo \"SLURM_JOB_ID=$SLURM_JOB_ID\"\n";
    s += "  echo \"SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST\"\n";
    s += "  echo \"SLURM_JOB_PARTITION=${SLURM_JOB_PARTITION:-}\"\n";
    s += "  echo \"SLURM_CLUSTER_NAME=${SLURM_CLUSTER_NAME:-}\"\n";
    s += "} > \"$RUN/job.env\"\n";
  } else {
    s += "echo \"RESUMED_BY_JOB=$SLURM_JOB_ID\" >> \"$RUN/job.env\"\n";
  }

  if (o.cpu) {
    s += "\n# CPU memory and GEMM rates: one task per node, each writing cpu-<node>.jsonl. The\n";
    s += "# inner script is fixed text; the values reach it as arguments.\n";
    s += fmt::format("srun --nodes={0} --ntasks={0} --ntasks-per-node=1 \\\n", o.nodes);
    s += "  /bin/sh -c 'bin=$1 run=$2; shift 2; "
         "exec \"$bin\" run cpu -o \"$run/cpu-$SLURMD_NODENAME.jsonl\" \"$@\"' \\\n";
    s += "  sh \"$DLCALIBRATE\" \"$RUN\" \"${CPU_ARGS[@]}\"\n";
    // srun can return 0 for a step that never launched: the files are the proof.
    s += "for node in $(cat \"$RUN/nodes.txt\"); do\n";
    s += "  [ -s \"$RUN/cpu-$node.jsonl\" ] || "
         "{ echo \"dlcalibrate: no CPU results from $node\" >&2; exit 1; }\n";
    s += "done\n";
  }
  if (o.mpi) {
    s += "\n# Collectives over MPI (and NCCL): one rank per GPU (per node without GPUs), started\n";
    s += "# by Slurm's PMIx plugin. Needs a dlcalibrate built with MPI.\n";
    s += fmt::format("srun --mpi=pmix --nodes={} --ntasks-per-node={} \\\n", o.nodes,
                     ranks_per_node);
    s += "  \"$DLCALIBRATE\" run mpi -o \"$RUN/mpi.jsonl\" \"${MPI_ARGS[@]}\"\n";
    s += "[ -s \"$RUN/mpi.jsonl\" ] || "
         "{ echo \"dlcalibrate: the MPI step wrote no results\" >&2; exit 1; }\n";
  }
  if (o.gpu) {
    s +=
        "\n# Every GPU on its own, one task each, at the same time: its GEMM rates, whose spread\n";
    s += "# over the GPUs `fit` makes the GPUs' speed_spread (docs/calibrate.md). Needs a\n";
    s += "# dlcalibrate built with CUDA.\n";
    s += fmt::format("srun --nodes={} --ntasks-per-node={} --gpus-per-task=1 \\\n", o.nodes,
                     o.gpus_per_node);
    s += "  /bin/sh -c 'bin=$1 run=$2; shift 2; "
         "exec \"$bin\" run gpu -o \"$run/gpu-$SLURMD_NODENAME-$SLURM_LOCALID.jsonl\" \"$@\"' "
         "\\\n";
    s += "  sh \"$DLCALIBRATE\" \"$RUN\" \"${GPU_ARGS[@]}\"\n";
    s += "for node in $(cat \"$RUN/nodes.txt\"); do\n";
    s += fmt::format("  for i in $(seq 0 {}); do\n", o.gpus_per_node - 1);
    s += "    [ -s \"$RUN/gpu-$node-$i.jsonl\" ] || "
         "{ echo \"dlcalibrate: no results from GPU $i of $node\" >&2; exit 1; }\n";
    s += "  done\n";
    s += "done\n";
  }
  s += "\necho \"dlcalibrate: job $SLURM_JOB_ID done; results in $RUN\"\n";
  return s;
}

std::vector<std::string> nodes_of_job(const std::string& output_dir, const std::string& job_id) {
  if (job_id.empty() || !std::all_of(job_id.begin(), job_id.end(),
                                     [](char c) { return (c >= '0' && c <= '9') || c == '_'; })) {
    fail_at({}, "resume", fmt::format("'{}' is not a Slurm job id", comment_safe(job_id)));
  }
  const fs::path file = fs::path(output_dir) / job_id / "nodes.txt";
  std::ifstream in(file);
  if (!in) {
    fail_at({}, "resume",
            fmt::format("no {} (is --output-dir the one job {} wrote to?)", file.string(),
                        comment_safe(job_id)));
  }
  std::vector<std::string> nodes;
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (!line.empty()) nodes.push_back(line);
  }
  return nodes;
}

std::string parse_sbatch_job_id(std::string_view parsable_output) {
  const auto lines = lines_of(parsable_output);
  // sbatch may print warnings before the id; the id is the last line.
  const std::string last = lines.empty() ? std::string() : lines.back();
  const std::string id = last.substr(0, last.find(';'));
  if (id.empty() ||
      !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw InputError(fmt::format("sbatch did not print a job id (it printed '{}')",
                                 comment_safe(trim(parsable_output))));
  }
  return id;
}

ProcessResult run_process(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::logic_error("run_process: no program");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw InputError(fmt::format("cannot run {}: {}{}", argv[0], strerror(rc),
                                 rc == ENOENT ? " (is Slurm installed and on PATH?)" : ""));
  }
  // Both streams are read together: a program that fills one pipe while we block on the other
  // would never finish.
  ProcessResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string submit_sbatch(const std::string& script_path,
                          const std::vector<std::string>& extra_args) {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  argv.push_back(script_path);
  const auto r = run_process(argv);
  if (r.exit_code != 0) {
    const std::string why = one_line(r.err.empty() ? r.out : r.err);
    throw InputError(fmt::format("sbatch refused the job (exit code {}): {}", r.exit_code,
                                 why.empty() ? "no message" : why));
  }
  return parse_sbatch_job_id(r.out);
}

bool is_final_job_state(std::string_view state) {
  return state == "COMPLETED" || is_failed_job_state(state);
}

bool is_failed_job_state(std::string_view state) {
  for (const char* s : {"FAILED", "NODE_FAIL", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "BOOT_FAIL",
                        "DEADLINE", "PREEMPTED", "REVOKED"}) {
    if (state == s) return true;
  }
  return false;
}

namespace {

// The first word of each line ("CANCELLED by 0" -> "CANCELLED").
std::vector<std::string> state_words(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& line : lines_of(text)) out.push_back(line.substr(0, line.find_first_of(" +")));
  return out;
}

// The one state that stands for all: the first failed one, else the first.
std::string worst_state(const std::vector<std::string>& states) {
  for (const auto& s : states) {
    if (is_failed_job_state(s)) return s;
  }
  return states.empty() ? std::string() : states.front();
}

// The final state once the job has left squeue: sacct, or scontrol where accounting is off.
std::string ended_state(const std::string& job_id) {
  const auto acct = run_process({"sacct", "-j", job_id, "-n", "-X", "-o", "State", "-P"});
  if (acct.exit_code == 0) {
    const auto states = state_words(acct.out);
    if (!states.empty()) return worst_state(states);
  }
  const auto ctl = run_process({"scontrol", "show", "job", "-o", job_id});
  if (ctl.exit_code == 0) {
    std::vector<std::string> states;
    static const std::regex re(R"(JobState=([A-Z_]+))");
    for (const auto& line : lines_of(ctl.out)) {
      std::smatch m;
      if (std::regex_search(line, m, re)) states.push_back(m[1]);
    }
    if (!states.empty()) return worst_state(states);
  }
  throw InputError(fmt::format(
      "job {} has left the queue but its final state is unknown (sacct: {}; scontrol: {})", job_id,
      one_line(acct.err).empty() ? "no record" : one_line(acct.err),
      one_line(ctl.err).empty() ? "no record" : one_line(ctl.err)));
}

}  // namespace

std::string wait_for_job(const std::string& job_id, double poll_s, std::ostream* log,
                         std::string_view program) {
  // Pending reasons that no waiting will clear (the request exceeds what the partition allows).
  static const std::set<std::string> hopeless = {
      "PartitionNodeLimit", "PartitionTimeLimit", "PartitionConfig",      "BadConstraints",
      "InvalidAccount",     "InvalidQOS",         "QOSMaxNodePerJobLimit"};
  std::string last;
  for (;;) {
    const auto q = run_process({"squeue", "-h", "-j", job_id, "-o", "%T %r"});
    const auto lines = q.exit_code == 0 ? lines_of(q.out) : std::vector<std::string>{};
    std::string now;
    for (const auto& line : lines) {
      const std::string state = line.substr(0, line.find(' '));
      if (!is_final_job_state(state)) {
        now = line;
        break;
      }
    }
    if (now.empty()) return ended_state(job_id);
    const auto space = now.find(' ');
    const std::string state = now.substr(0, space);
    const std::string reason = space == std::string::npos ? "" : trim(now.substr(space + 1));
    if (state == "PENDING" && hopeless.count(reason)) {
      throw InputError(fmt::format(
          "job {} cannot start: Slurm keeps it pending with reason {} (more nodes, time or "
          "features than the partition has?); cancel it with: scancel {}",
          job_id, reason, job_id));
    }
    if (log && now != last) {
      *log << fmt::format("{}: job {} is {}{}\n", program, job_id, state,
                          reason.empty() || reason == "None" ? "" : " (" + reason + ")")
           << std::flush;
    }
    last = now;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

CollectedJob collect_job(const std::string& job_id, const std::string& dir,
                         const std::string& command_line, const std::string& skip_path) {
  if (job_id.empty() || !std::all_of(job_id.begin(), job_id.end(),
                                     [](char c) { return (c >= '0' && c <= '9') || c == '_'; })) {
    fail_at({}, "JOBID", fmt::format("'{}' is not a Slurm job id", comment_safe(job_id)));
  }
  const fs::path run = fs::path(dir) / job_id;
  std::error_code ec;
  if (!fs::is_directory(run, ec)) {
    fail_at(
        {}, "dir",
        fmt::format("no results of job {} under '{}' (looked for {}/)", job_id, dir, run.string()));
  }
  const fs::path skip = skip_path.empty() || skip_path == "-"
                            ? fs::path()
                            : fs::weakly_canonical(fs::absolute(skip_path), ec);
  CollectedJob c;
  for (const auto& e : fs::directory_iterator(run)) {
    const auto& p = e.path();
    if (!e.is_regular_file() || p.extension() != ".jsonl" || p.filename() == "merged.jsonl") {
      continue;
    }
    if (!skip.empty() && fs::weakly_canonical(p, ec) == skip) {
      // The output of an earlier collect is replaced; a node's own results never are.
      if (read_results(p.string()).provenance.source != "slurm job " + job_id) {
        fail_at({skip_path}, "--output",
                "is a node's results file of the job, an input of this collect; name another "
                "output");
      }
      continue;
    }
    c.files.push_back(p.string());
  }
  std::sort(c.files.begin(), c.files.end());
  if (c.files.empty()) {
    fail_at({run.string()}, "",
            "no results files (*.jsonl) in the job's directory: did its steps start? see " +
                (fs::path(dir) / fmt::format("slurm-{}.out", job_id)).string());
  }

  auto& p = c.merged.provenance;
  p.command = command_line;
  p.date = utc_now();
  p.source = "slurm job " + job_id;
  std::set<std::string> cpu_nodes;
  for (const auto& file : c.files) {
    const Results r = read_results(file);
    const auto& q = r.provenance;
    const std::string stem = fs::path(file).stem().string();
    const std::string node = stem.rfind("cpu-", 0) == 0 ? stem.substr(4) : std::string();
    if (!node.empty()) cpu_nodes.insert(node);
    if (p.tool.empty()) p.tool = q.tool;
    for (const auto& h : q.hosts) {
      if (std::find(p.hosts.begin(), p.hosts.end(), h) == p.hosts.end()) p.hosts.push_back(h);
    }
    auto join = [&](std::map<std::string, std::string>& into,
                    const std::map<std::string, std::string>& from, const char* what) {
      for (const auto& [k, v] : from) {
        auto [it, added] = into.emplace(k, v);
        if (!added && it->second != v) {
          c.warnings.push_back(fmt::format("{} {} differs between files: '{}' here, '{}' in {}",
                                           what, k, it->second, v, file));
        }
      }
    };
    join(p.versions, q.versions, "version of");
    join(p.environment, q.environment, "environment variable");
    // A GPU's own identity differs from file to file (one `run gpu` per GPU): it goes with
    // the file's records instead.
    auto devices = q.devices;
    const auto bus = devices.find("gpu_pci_bus_id");
    const std::string gpu_bus = bus != devices.end() ? bus->second : std::string();
    devices.erase("gpu_pci_bus_id");
    devices.erase("gpu_index");
    join(p.devices, devices, "device");
    auto worst = [](std::optional<double>& into, const std::optional<double>& v) {
      if (v && (!into || *v > *into)) into = v;
    };
    worst(p.load_before, q.load_before);
    worst(p.load_after, q.load_after);
    for (const auto& n : q.notes) {
      if (std::find(p.notes.begin(), p.notes.end(), n) == p.notes.end()) p.notes.push_back(n);
    }
    const std::string host = q.hosts.empty() ? node : q.hosts.front();
    for (auto m : r.measurements) {
      if (!host.empty()) m.params["host"] = host;
      if (!node.empty()) m.params["slurm_node"] = node;
      if (!gpu_bus.empty()) m.params["gpu_pci_bus_id"] = gpu_bus;
      m.params["slurm_job"] = job_id;
      c.merged.measurements.push_back(std::move(m));
    }
  }
  for (const auto& [k, v] : read_env_file(run / "nccl-env.txt")) p.environment.emplace(k, v);

  // Every node of the allocation should have measured: nodes.txt (scontrol), else the job's
  // compressed node list expanded here.
  std::vector<std::string> nodes;
  {
    std::ifstream in(run / "nodes.txt");
    for (std::string line; std::getline(in, line);) {
      if (auto t = trim(line); !t.empty()) nodes.push_back(t);
    }
  }
  if (nodes.empty()) {
    const auto env = read_env_file(run / "job.env");
    if (auto it = env.find("SLURM_JOB_NODELIST"); it != env.end()) {
      try {
        nodes = expand_hostlist(it->second);
      } catch (const std::invalid_argument& e) {
        c.warnings.push_back(fmt::format("job.env: SLURM_JOB_NODELIST: {}", e.what()));
      }
    }
  }
  if (!cpu_nodes.empty()) {
    for (const auto& n : nodes) {
      if (!cpu_nodes.count(n)) {
        c.warnings.push_back(
            fmt::format("node {} has no CPU results (cpu-{}.jsonl): did its step fail?", n, n));
      }
    }
  }
  p.notes.push_back(fmt::format("merged by dlcalibrate collect from {} files of Slurm job {}{}",
                                c.files.size(), job_id,
                                nodes.empty() ? "" : " on " + join_words(nodes, ",")));
  return c;
}

}  // namespace dlsim::calibrate
