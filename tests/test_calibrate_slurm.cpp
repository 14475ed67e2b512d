// dlcalibrate on Slurm: the sbatch script (what it runs, and that no value from the command line
// reaches the shell unquoted), option validation naming the flag, sbatch --parsable output, and
// collecting a job's results files into one.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "calibrate/slurm.hpp"
#include "common/error.hpp"

namespace cal = dlsim::calibrate;
namespace fs = std::filesystem;

namespace {

const char* const kHostile = "a'b; rm -rf / $(touch /tmp/dlsim_pwned) `id` \"q\" \\";

cal::SlurmOptions two_nodes() {
  cal::SlurmOptions o;
  o.nodes = 2;
  o.partition = "debug";
  o.time = "00:05:00";
  o.output_dir = "/scratch/calib";
  o.dlcalibrate = "/opt/dlsim/bin/dlcalibrate";
  return o;
}

std::string error_of(const cal::SlurmOptions& o) {
  try {
    cal::sbatch_script(o);
  } catch (const dlsim::InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What bash makes of `script_prefix` followed by printing each word of `words`, one a line.
std::string bash_words(const std::string& script_prefix, const std::string& words) {
  const auto r =
      cal::run_process({"bash", "-c", script_prefix + "\nprintf '%s\\n' " + words + "\n"});
  REQUIRE(r.exit_code == 0);
  return r.out;
}

}  // namespace

TEST_CASE("sbatch_script_runs_each_step_under_srun_and_names_results_by_job_id") {
  const auto s = cal::sbatch_script(two_nodes());
  CHECK(s.rfind("#!/bin/bash\n", 0) == 0);
  CHECK(contains(s, "#SBATCH --nodes=2\n"));
  CHECK(contains(s, "#SBATCH --partition=debug\n"));
  CHECK(contains(s, "#SBATCH --time=00:05:00\n"));
  CHECK(contains(s, "#SBATCH --exclusive\n"));
  CHECK(contains(s, "#SBATCH --output=/scratch/calib/slurm-%j.out\n"));
  CHECK(contains(s, "RUN=\"$OUT/$SLURM_JOB_ID\""));
  CHECK(contains(s, "scontrol show hostnames \"$SLURM_JOB_NODELIST\" > \"$RUN/nodes.txt\""));
  CHECK(contains(s, "grep '^NCCL_'"));
  CHECK(contains(s, "\"$RUN/nccl-env.txt\""));
  CHECK(contains(s, "srun --nodes=2 --ntasks=2 --ntasks-per-node=1"));
  CHECK(contains(s, "run cpu -o \"$run/cpu-$SLURMD_NODENAME.jsonl\""));
  CHECK_FALSE(contains(s, "--mpi=pmix"));
  CHECK_FALSE(contains(s, "--gpus-per-node"));
}

TEST_CASE("sbatch_script_adds_one_pmix_rank_per_gpu_only_with_mpi") {
  auto o = two_nodes();
  o.mpi = true;
  o.gpus_per_node = 4;
  o.account = "proj-01";
  o.constraint = "a100&ib";
  o.array = "0-3%2";
  const auto s = cal::sbatch_script(o);
  CHECK(contains(s, "#SBATCH --gpus-per-node=4\n"));
  CHECK(contains(s, "#SBATCH --ntasks-per-node=4\n"));
  CHECK(contains(s, "#SBATCH --account=proj-01\n"));
  CHECK(contains(s, "#SBATCH --constraint=a100&ib\n"));
  CHECK(contains(s, "#SBATCH --array=0-3%2\n"));
  CHECK(contains(s, "srun --mpi=pmix --nodes=2 --ntasks-per-node=4"));
  CHECK(contains(s, "run mpi -o \"$RUN/mpi.jsonl\""));

  o.gpus_per_node = 0;
  CHECK(contains(cal::sbatch_script(o), "srun --mpi=pmix --nodes=2 --ntasks-per-node=1"));
}

TEST_CASE("sbatch_script_runs_run_gpu_on_every_gpu_only_with_gpu") {
  // One task per GPU, each given its own GPU, files named by node and local task id; the job
  // fails when a GPU wrote nothing (srun can return 0 for a step that never launched).
  auto o = two_nodes();
  o.gpus_per_node = 4;
  CHECK_FALSE(contains(cal::sbatch_script(o), "run gpu"));
  o.gpu = true;
  o.gpu_args = {"--ops", "gemm", "-n", "30"};
  const auto s = cal::sbatch_script(o);
  CHECK(contains(s, "srun --nodes=2 --ntasks-per-node=4 --gpus-per-task=1"));
  CHECK(contains(s, "run gpu -o \"$run/gpu-$SLURMD_NODENAME-$SLURM_LOCALID.jsonl\""));
  CHECK(contains(s, "GPU_ARGS=('--ops' 'gemm' '-n' '30')"));
  CHECK(contains(s, "for i in $(seq 0 3); do"));
  CHECK(contains(s, "no results from GPU $i of $node"));
  o.gpu_args = {kHostile};
  const auto r = cal::run_process({"bash", "-n", "-c", cal::sbatch_script(o)});
  CHECK_MESSAGE(r.exit_code == 0, r.err);
  o.gpus_per_node = 0;
  CHECK(contains(error_of(o), "gpu: needs --gpus-per-node"));
  o.gpu = false;
  o.gpus_per_node = 4;
  CHECK(contains(error_of(o), "gpu_args: needs --gpu"));
}

TEST_CASE("sbatch_script_is_valid_bash") {
  auto o = two_nodes();
  o.mpi = true;
  o.cpu_args = {kHostile, "--to", "1MiB"};
  const auto r = cal::run_process({"bash", "-n", "-c", cal::sbatch_script(o)});
  CHECK_MESSAGE(r.exit_code == 0, r.err);
}

TEST_CASE("shell_quote_gives_the_shell_back_exactly_the_value") {
  CHECK(cal::shell_quote("plain") == "'plain'");
  CHECK(cal::shell_quote("a'b") == "'a'\\''b'");
  CHECK(cal::shell_quote("") == "''");
  for (const std::string& v : {std::string(kHostile), std::string("new\nline"), std::string("'"),
                               std::string("$HOME ${x} *")}) {
    CHECK(bash_words("", cal::shell_quote(v)) == v + "\n");
  }
}

TEST_CASE("hostile_values_reach_the_script_only_quoted") {
  auto o = two_nodes();
  o.dlcalibrate = std::string("/opt/my dir/") + kHostile;
  o.cpu_args = {kHostile, "--ops", "copy"};
  o.command_line = "dlcalibrate slurm --cpu-args 'x\nrm -rf /'";
  const auto s = cal::sbatch_script(o);
  // The header comment cannot be ended by a newline in the command line.
  CHECK(contains(s, "# Generated by: dlcalibrate slurm --cpu-args 'x?rm -rf /'\n"));
  // Evaluating the script's assignments gives back the exact values, and runs nothing.
  const auto prefix = s.substr(0, s.find("RUN="));
  fs::remove("/tmp/dlsim_pwned");
  CHECK(bash_words(prefix, "\"$DLCALIBRATE\" \"${CPU_ARGS[@]}\"") ==
        o.dlcalibrate + "\n" + kHostile + "\n--ops\ncopy\n");
  CHECK_FALSE(fs::exists("/tmp/dlsim_pwned"));
}

TEST_CASE("hostile_sbatch_line_values_are_refused_naming_the_flag") {
  auto o = two_nodes();
  o.partition = "a'b; rm -rf /";
  CHECK(error_of(o).rfind("partition: 'a'b; rm -rf /' is not a valid partition name", 0) == 0);
  o = two_nodes();
  o.partition = "debug\n#SBATCH --uid=0";
  CHECK(error_of(o).rfind("partition: ", 0) == 0);
  o = two_nodes();
  o.account = "x y";
  CHECK(error_of(o).rfind("account: ", 0) == 0);
  o = two_nodes();
  o.constraint = "a100;reboot";
  CHECK(error_of(o).rfind("constraint: ", 0) == 0);
  o = two_nodes();
  o.array = "0-3 --uid=0";
  CHECK(error_of(o).rfind("array: ", 0) == 0);
  o = two_nodes();
  o.output_dir = "/scratch/my results";
  CHECK(error_of(o).rfind("output_dir: ", 0) == 0);
  o = two_nodes();
  o.output_dir = "/scratch/%u";
  CHECK(error_of(o).rfind("output_dir: ", 0) == 0);
  o = two_nodes();
  o.job_name = "";
  CHECK(error_of(o) == "job_name: must not be empty");
}

TEST_CASE("options_are_validated_with_one_line_naming_the_flag") {
  auto o = two_nodes();
  o.nodes = 1;
  CHECK(error_of(o).empty());
  o.nodes = 0;
  CHECK(error_of(o) == "nodes: must be in 1..1048576 (got 0)");
  o = two_nodes();
  o.gpus_per_node = -1;
  CHECK(error_of(o) == "gpus_per_node: must be in 0..1024 (got -1)");
  o = two_nodes();
  o.array = "0-15:2%4";
  CHECK(error_of(o).empty());
  o.array = "3-0";
  CHECK(error_of(o) == "array: '3-0': the range 3-0 counts down");
  o.array = "1,,2";
  CHECK(error_of(o).starts_with("array: '1,,2' is not a valid job array range"));
  o = two_nodes();
  o.cpu = false;
  CHECK(error_of(o) == "no_cpu: leaves nothing to run: add --mpi or --gpu");
  o = two_nodes();
  o.mpi_args = {"--ops", "allreduce"};
  CHECK(error_of(o) == "mpi_args: needs --mpi");
  o = two_nodes();
  o.time = "5 minutes";
  const auto e = error_of(o);
  CHECK(e.rfind("time: '5 minutes' is not a Slurm time limit", 0) == 0);
  CHECK(e.find('\n') == std::string::npos);
}

TEST_CASE("slurm_time_limits_in_every_sbatch_format") {
  for (const char* t : {"30", "30:00", "00:05:00", "1-0", "1-12", "1-12:30", "2-00:00:00",
                        "UNLIMITED", "59:59", "100:00:00"}) {
    CHECK_MESSAGE(cal::is_slurm_time(t), t);
  }
  for (const char* t : {"", "5m", "1:2:3:4", "-1", "1-", "00:60:00", "00:05:60", "1:5 ", "1-2-3",
                        "00:005:00", ":30"}) {
    CHECK_MESSAGE(!cal::is_slurm_time(t), t);
  }
}

TEST_CASE("sbatch_parsable_output_gives_the_job_id") {
  CHECK(cal::parse_sbatch_job_id("12345") == "12345");
  CHECK(cal::parse_sbatch_job_id("12345\n") == "12345");
  CHECK(cal::parse_sbatch_job_id("12345;cluster") == "12345");
  CHECK(cal::parse_sbatch_job_id("12345;cluster\n") == "12345");
  CHECK(cal::parse_sbatch_job_id("sbatch: warning: x\n678\n") == "678");
  CHECK_THROWS_AS(cal::parse_sbatch_job_id(""), dlsim::InputError);
  CHECK_THROWS_AS(cal::parse_sbatch_job_id("Submitted batch job 12"), dlsim::InputError);
  CHECK_THROWS_AS(cal::parse_sbatch_job_id(";cluster"), dlsim::InputError);
}

TEST_CASE("job_states_that_end_a_job_and_those_that_fail_it") {
  for (const char* s : {"FAILED", "NODE_FAIL", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY"}) {
    CHECK(cal::is_failed_job_state(s));
    CHECK(cal::is_final_job_state(s));
  }
  CHECK(cal::is_final_job_state("COMPLETED"));
  CHECK_FALSE(cal::is_failed_job_state("COMPLETED"));
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"}) {
    CHECK_FALSE(cal::is_final_job_state(s));
  }
}

TEST_CASE("run_process_starts_no_shell_and_reports_a_missing_program") {
  const auto r = cal::run_process({"printf", "%s|%s", "a b", "$(id)"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "a b|$(id)");
  CHECK(cal::run_process({"sh", "-c", "echo oops >&2; exit 3"}).exit_code == 3);
  CHECK(cal::run_process({"sh", "-c", "echo oops >&2; exit 3"}).err == "oops\n");
  CHECK_THROWS_AS(cal::run_process({"dlsim-no-such-program"}), dlsim::InputError);
}

namespace {

void write_results(const fs::path& p, const std::string& host, double seconds) {
  cal::Results r;
  r.provenance.tool = "dlcalibrate 0.1.0";
  r.provenance.date = "2024-01-01T00:00:00Z";
  r.provenance.hosts = {host};
  r.provenance.source = "measured";
  r.provenance.notes = {"first-touch note"};
  cal::Measurement m;
  m.op = "copy";
  m.backend = "cpu";
  m.bytes = 65536;
  m.samples_s = {seconds};
  r.measurements = {m, m};
  std::ofstream(p) << cal::to_jsonl(r);
}

}  // namespace

TEST_CASE("collect_merges_every_node_of_a_job_and_names_the_missing_ones") {
  const auto dir = fs::temp_directory_path() / "dlsim_test_slurm_collect";
  fs::remove_all(dir);
  fs::create_directories(dir / "77");
  write_results(dir / "77" / "cpu-node1.jsonl", "host-a", 1e-5);
  write_results(dir / "77" / "cpu-node2.jsonl", "host-b", 2e-5);
  std::ofstream(dir / "77" / "merged.jsonl") << "left out\n";
  std::ofstream(dir / "77" / "nccl-env.txt") << "NCCL_IB_DISABLE=1\n";
  std::ofstream(dir / "77" / "job.env") << "SLURM_JOB_NODELIST=node[1-3]\n";

  const auto c = cal::collect_job("77", dir.string(), "dlcalibrate collect 77");
  CHECK(c.files.size() == 2);
  CHECK(c.merged.measurements.size() == 4);
  CHECK(c.merged.provenance.hosts == std::vector<std::string>{"host-a", "host-b"});
  CHECK(c.merged.provenance.environment.at("NCCL_IB_DISABLE") == "1");
  CHECK(c.merged.provenance.source == "slurm job 77");
  CHECK(c.merged.measurements[3].params.at("host") == "host-b");
  CHECK(c.merged.measurements[3].params.at("slurm_node") == "node2");
  CHECK(c.merged.measurements[3].params.at("slurm_job") == "77");
  // job.env's compressed node list is expanded (common/hostlist.hpp): node3 measured nothing.
  REQUIRE(c.warnings.size() == 1);
  CHECK(contains(c.warnings[0], "node node3 has no CPU results"));

  // The merged file reads back as a results file.
  const auto merged = dir / "77" / "merged.jsonl";
  std::ofstream(merged) << cal::to_jsonl(c.merged);
  CHECK(cal::read_results(merged.string()).measurements.size() == 4);

  std::ofstream(dir / "77" / "cpu-node3.jsonl") << "not json\n";
  CHECK_THROWS_AS(cal::collect_job("77", dir.string(), ""), dlsim::InputError);
  CHECK_THROWS_WITH_AS(cal::collect_job("78", dir.string(), ""),
                       doctest::Contains("dir: no results of job 78"), dlsim::InputError);
  CHECK_THROWS_WITH_AS(cal::collect_job("7;rm", dir.string(), ""),
                       doctest::Contains("JOBID: '7;rm' is not a Slurm job id"), dlsim::InputError);
  fs::remove_all(dir);
}
