#pragma once
// `dlvalidate launch` (docs/launch.md): one description of a training run (framework, script or
// built-in benchmark, nodes, GPUs, batch, and the framework knobs dlsim models) as the sbatch
// script an HPC site writes for that framework; after the job, what its log measured as a
// throughput.csv row beside dlsim's prediction of the same run.
//
// A sweep (frameworks x nodes x batches) is one job per Slurm allocation shape: points that ask
// for the same nodes and tasks share one job array, each array task running one point. The job
// writes each point's output to <output dir>/<job name>-<job id>_<task>.out; the manifest
// (<output dir>/<job id>.launch.json) says which point each task ran.
//
// Safety: every value that reaches a shell line is single-quoted (shell_quote) or checked to be
// a number; values of #SBATCH lines and of environment variables that hold names (interfaces,
// HCAs, partitions) must be of safe characters. Host names come from Slurm's own node list.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "simulator/framework.hpp"
#include "validate/published.hpp"

namespace dlsim::validate {

// How a site runs each framework under Slurm (docs/launch.md).
enum class LaunchFramework {
  kPytorchDdp,         // torch.distributed, env:// rendezvous, srun or torchrun
  kHorovodPytorch,     // horovod.torch under srun --mpi=pmix
  kHorovodTensorflow,  // tf_cnn_benchmarks --variable_update=horovod under srun --mpi=pmix
  kHorovodKeras,       // horovod.tensorflow.keras under srun --mpi=pmix
  kTfPs,               // tf_cnn_benchmarks with ps and worker tasks (TF_CONFIG and flags)
  kKerasMwms,          // tf.distribute.MultiWorkerMirroredStrategy (TF_CONFIG, workers only)
  kMxnetPs,            // MXNet kvstore dist_sync on ps-lite (DMLC_* roles)
};
std::optional<LaunchFramework> parse_launch_framework(std::string_view text);
std::string_view to_string(LaunchFramework f);
const std::vector<std::string>& launch_framework_names();

// Everything a launch takes, typed; the command line fills it, validate_launch checks it.
struct LaunchOptions {
  std::vector<LaunchFramework> frameworks;
  std::vector<int> nodes;                // worker nodes, one job (or array task) each
  std::vector<std::int64_t> batches;     // per GPU; per rank on CPUs
  std::string model = "resnet50";        // a dlsim zoo name; the benchmark's spelling is derived
  int gpus_per_node = 0;                 // 0: a CPU job (ranks_per_node ranks per node)
  int ranks_per_node = 1;                // CPU ranks per node (ignored with GPUs: one per GPU)
  int threads_per_rank = 0;              // intra-op threads (OMP_NUM_THREADS); 0: the default
  std::string script;                    // the training script; "" = the framework's benchmark
  std::vector<std::string> script_args;  // replace the benchmark's arguments when given
  std::string python = "python3";
  int steps = 10, warmup_steps = 3;
  std::string torch_backend;            // nccl, gloo, mpi; "" = nccl with GPUs, gloo without
  std::string torch_launcher = "srun";  // srun (one task per rank) or torchrun (one per node)
  simulator::FrameworkOptions knobs;    // fusion threshold, cycle time, bucket, servers, mode
  std::string nccl_algo;                // NCCL_ALGO (Ring, Tree, ...); "" = NCCL's choice
  std::string nccl_socket_ifname, nccl_ib_hca, gloo_socket_ifname;
  std::string partition, account, constraint;
  std::string time = "00:30:00";
  std::string job_name = "dlsim-run";
  std::string output_dir = "dlsim-runs";  // shared by the nodes; made absolute
  bool exclusive = true;
  int master_port = 29500;
  std::string command_line;  // written into the scripts' header comment
};

// Throws InputError naming the flag ("--nodes: ...") for the first bad value.
void validate_launch(const LaunchOptions& o);

// One run of a sweep.
struct LaunchPoint {
  LaunchFramework framework = LaunchFramework::kPytorchDdp;
  int nodes = 1;           // worker nodes
  std::int64_t batch = 0;  // per GPU (per rank on CPUs)
  int alloc_nodes = 1;     // nodes the job asks for (workers plus dedicated servers)
  int tasks_per_node = 1;  // tasks Slurm starts per node (0: each step says)
  int ranks_per_node = 1;  // training ranks per node (GPUs, or CPU ranks)
  int ranks() const;       // training ranks (GPUs, or CPU ranks)
};

// One sbatch script: the points of one allocation shape, as a job array when several.
struct LaunchJob {
  std::vector<LaunchPoint> points;
  std::string script;
};

// The sweep in order (frameworks, then nodes, then batches), grouped into jobs; validates first.
std::vector<LaunchJob> plan_launch(const LaunchOptions& o);

// The benchmark's name for a zoo model ("resnet50" -> "ResNet50" for tf.keras); an InputError
// naming --model when the framework's benchmark has no such model.
std::string benchmark_model_name(LaunchFramework f, const std::string& zoo_model);

// dlsim's prediction options for a point: the policy that models the framework and the knobs.
simulator::PredictOptions predict_options(const LaunchOptions& o, const LaunchPoint& p,
                                          const std::string& cluster);

// The manifest of a submitted job: the options that matter for collection and the points by
// array task.
nlohmann::json launch_manifest(const LaunchOptions& o, const LaunchJob& job,
                               const std::string& job_id, const std::string& script_path);

// What one finished point measured: samples/s of the whole job from its log.
struct LaunchResult {
  std::string job_id;  // "<job>" or "<job>_<task>"
  LaunchPoint point;
  std::string log;
  double samples_per_s = 0;
  std::string format;  // the log's format (pytorch-ddp-step, horovod, tf_cnn_benchmarks, mxnet)
};

// Reads a point's log: ddp_step.py's JSON line, a Horovod synthetic benchmark's totals,
// tf_cnn_benchmarks' totals, or MXNet's Speedometer lines (of `workers` workers, the first
// `warmup_steps` of each left out). A log without its throughput line, or of a job Slurm
// cancelled (time limit, scancel), is an InputError naming the file.
double read_launched_throughput(const std::string& log_path, int workers, int warmup_steps,
                                std::string* format);

// A measured point as a throughput.csv row (source_id `source_id`, provenance in locator/notes).
Row launch_row(const LaunchOptions& o, const LaunchResult& r, const std::string& source_id);

// The cases file that maps those rows, in the data set `data_set` (the results CSV's stem), to
// dlsim's prediction on `cluster` (no anchor: the prediction comes from the cluster's profile
// alone).
std::string launch_cases_yaml(const LaunchOptions& o, const std::vector<LaunchResult>& results,
                              const std::string& source_id, const std::string& data_set,
                              const std::string& cluster);

}  // namespace dlsim::validate
