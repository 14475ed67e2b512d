#pragma once
// dlcalibrate on a Slurm cluster (docs/slurm-local.md): an sbatch script that runs the
// benchmarks on every node of one allocation, its submission and the wait for it, and the
// collection of the job's results files into one.
//
// A job writes everything under <output dir>/<SLURM_JOB_ID>/:
//   cpu-<node>.jsonl   `dlcalibrate run cpu` on each node (one task per node)
//   mpi.jsonl          `dlcalibrate run mpi` (one rank per GPU, or per node), only with --mpi
//   gpu-<node>-<i>.jsonl `dlcalibrate run gpu` on GPU i of each node (one task per GPU), only
//                      with --gpu: the GPUs' own speeds (docs/calibrate.md, "The profile")
//   nodes.txt          the allocation's nodes, one a line (scontrol show hostnames): topology
//   nccl-env.txt       the NCCL_* variables the job ran with (the results depend on them)
//   job.env            SLURM_JOB_ID, SLURM_JOB_NODELIST, partition and cluster
// Safety: values from the command line reach the script's shell lines only single-quoted
// (shell_quote); values that go into #SBATCH lines, which sbatch itself parses, must be of
// safe characters (validate_slurm_options). Programs are started with argument vectors.

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/results.hpp"

namespace dlsim::calibrate {

struct SlurmOptions {
  int nodes = 1;
  int gpus_per_node = 0;  // 0: no GPUs asked; the MPI step then runs one rank per node
  std::string partition, account, constraint, array;
  std::string time = "00:30:00";  // Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S
  std::string job_name = "dlcalibrate";
  std::string output_dir = "dlcalibrate-results";  // made absolute by sbatch_script
  std::string dlcalibrate;  // the binary the nodes run; "" = this program (/proc/self/exe)
  bool exclusive = true;    // measurements want the nodes to themselves
  bool cpu = true;          // `dlcalibrate run cpu` on each node
  bool mpi = false;         // `dlcalibrate run mpi` under srun --mpi=pmix
  bool gpu = false;         // `dlcalibrate run gpu` on every GPU, one task each
  std::vector<std::string> cpu_args, mpi_args, gpu_args;  // passed on to the run subcommands
  std::string command_line;  // written into the script's header comment
  // Finishes an earlier job (one killed on a node, or out of time) instead of starting afresh:
  // the job writes into <output dir>/<resume_job>/, on the nodes it had (resume_nodes, from
  // its nodes.txt, become #SBATCH --nodelist), and the run steps get --resume, so the points
  // already on disk are not measured again.
  std::string resume_job;
  std::vector<std::string> resume_nodes;
};

// The nodes an earlier job ran on: <output_dir>/<job>/nodes.txt. InputError naming --resume when
// the job's directory or its nodes.txt is missing.
std::vector<std::string> nodes_of_job(const std::string& output_dir, const std::string& job_id);

// A value that goes into an #SBATCH line: sbatch reads those lines itself (no shell), so it
// must be one non-empty word of letters, digits and `extra`; otherwise an InputError naming
// `field` (the option, e.g. job_name) and calling the value a `what`.
void check_sbatch_value(const char* field, const std::string& value, std::string_view extra,
                        const char* what);

// `text` with every control character written as '?': safe in a script's comment or an error
// line.
std::string comment_safe(std::string_view text);

// Throws InputError naming the flag ("--nodes: ...") for the first bad value.
void validate_slurm_options(const SlurmOptions& options);

// Slurm time limit syntax (sbatch --time): M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, digits only.
bool is_slurm_time(std::string_view text);

// `text` in single quotes, each ' written as '\'' : the shell takes it as one literal word.
std::string shell_quote(std::string_view text);

// The sbatch script for `options` (validated first). Paths are made absolute.
std::string sbatch_script(const SlurmOptions& options);

// The job id in sbatch --parsable output: "12345" or "12345;cluster" (an array job's id too).
// InputError when it is not a number.
std::string parse_sbatch_job_id(std::string_view parsable_output);

// A finished program: exit status (128 + signal when killed) and what it wrote.
struct ProcessResult {
  int exit_code = 0;
  std::string out, err;
};

// Runs argv[0] (looked up on PATH) with `argv`, without a shell, and collects both streams.
// A program that cannot be started is an InputError naming it.
ProcessResult run_process(const std::vector<std::string>& argv);

// Submits `script_path` with sbatch --parsable (plus `extra_args` before the script) and returns
// the job id. sbatch's refusal is one InputError line with sbatch's own message.
std::string submit_sbatch(const std::string& script_path,
                          const std::vector<std::string>& extra_args = {});

// Slurm job states after which a job will not run again, and those that mean it went wrong.
bool is_final_job_state(std::string_view state);
bool is_failed_job_state(std::string_view state);

// Polls squeue, then sacct (or scontrol where accounting is off) every `poll_s` seconds until
// the job (every task of an array) has ended, and returns its final state ("COMPLETED",
// "FAILED", ...; the worst of an array's tasks). `log` gets one line per state change, each
// starting with `program`.
std::string wait_for_job(const std::string& job_id, double poll_s, std::ostream* log,
                         std::string_view program = "dlcalibrate");

// A job's results merged into one.
struct CollectedJob {
  Results merged;
  std::vector<std::string> files;     // the results files read
  std::vector<std::string> warnings;  // nodes without results, unreadable side files, ...
};

// Reads every results file of job `job_id` under `dir` (<dir>/<job_id>/*.jsonl, leaving out
// `skip_path`), checks each with read_results, and merges them: hosts, versions, environment
// (with nccl-env.txt) and notes are joined; each record gets params "host" and "slurm_job".
// No results file at all is an InputError.
CollectedJob collect_job(const std::string& job_id, const std::string& dir,
                         const std::string& command_line, const std::string& skip_path = "");

}  // namespace dlsim::calibrate
