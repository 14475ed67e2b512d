#include "validate/launch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "calibrate/slurm.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "validate/readers.hpp"

namespace dlsim::validate {
namespace {

namespace fs = std::filesystem;
using calibrate::check_sbatch_value;
using calibrate::comment_safe;
using calibrate::shell_quote;

struct FrameworkName {
  LaunchFramework f;
  const char* name;
};
constexpr FrameworkName kFrameworks[] = {
    {LaunchFramework::kPytorchDdp, "pytorch-ddp"},
    {LaunchFramework::kHorovodPytorch, "horovod-pytorch"},
    {LaunchFramework::kHorovodTensorflow, "horovod-tensorflow"},
    {LaunchFramework::kHorovodKeras, "horovod-keras"},
    {LaunchFramework::kTfPs, "tf-ps"},
    {LaunchFramework::kKerasMwms, "keras-mwms"},
    {LaunchFramework::kMxnetPs, "mxnet-ps"},
};

bool is_horovod(LaunchFramework f) {
  return f == LaunchFramework::kHorovodPytorch || f == LaunchFramework::kHorovodTensorflow ||
         f == LaunchFramework::kHorovodKeras;
}
// The benchmarks that take fp16 gradient compression: ddp_step.py (--fp16-compress, DDP's
// fp16_compress_hook) and Horovod's PyTorch and Keras synthetic benchmarks (--fp16-allreduce,
// Compression.fp16). tf_cnn_benchmarks has no such flag for Horovod.
bool takes_compression(LaunchFramework f) {
  return f == LaunchFramework::kPytorchDdp || f == LaunchFramework::kHorovodPytorch ||
         f == LaunchFramework::kHorovodKeras;
}
bool compresses(const LaunchOptions& o, LaunchFramework f) {
  return takes_compression(f) &&
         o.knobs.compression.value_or(simulator::GradientCompression::kNone) ==
             simulator::GradientCompression::kFp16;
}
bool has_servers(LaunchFramework f) {
  return f == LaunchFramework::kTfPs || f == LaunchFramework::kMxnetPs;
}
// One process per node that drives all of the node's GPUs (TensorFlow's in-graph replicas,
// MXNet's --gpus, MultiWorkerMirroredStrategy's local replicas).
bool one_process_per_node(LaunchFramework f) {
  return has_servers(f) || f == LaunchFramework::kKerasMwms;
}

// ps-lite's scheduler port (docs/launch.md); TensorFlow's ports are in kTfTask below.
constexpr int kDmlcPort = 9000;

int ranks_per_node(const LaunchOptions& o) {
  return o.gpus_per_node > 0 ? o.gpus_per_node : o.ranks_per_node;
}
int servers(const LaunchOptions& o) { return o.knobs.ps_servers.value_or(1); }
bool dedicated(const LaunchOptions& o) { return !o.knobs.ps_colocated.value_or(true); }

std::string default_script(LaunchFramework f) {
  switch (f) {
    case LaunchFramework::kPytorchDdp:
      return DLSIM_DDP_STEP_SCRIPT;
    case LaunchFramework::kHorovodPytorch:
      return "pytorch_synthetic_benchmark.py";
    case LaunchFramework::kHorovodTensorflow:
    case LaunchFramework::kTfPs:
      return "tf_cnn_benchmarks.py";
    case LaunchFramework::kHorovodKeras:
      return "tensorflow2_keras_synthetic_benchmark.py";
    case LaunchFramework::kKerasMwms:
      return "";
    case LaunchFramework::kMxnetPs:
      return "train_imagenet.py";
  }
  return "";
}

std::string join(const std::vector<std::string>& words, std::string_view sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : std::string(sep)) + w;
  return out;
}

std::string quoted_words(const std::vector<std::string>& words) {
  std::vector<std::string> q;
  q.reserve(words.size());
  for (const auto& w : words) q.push_back(shell_quote(w));
  return join(q, " ");
}

// The benchmark's own arguments for a point (or the user's, when given).
std::vector<std::string> benchmark_args(const LaunchOptions& o, const LaunchPoint& p) {
  if (!o.script_args.empty() || !o.script.empty()) return o.script_args;
  const std::string model = benchmark_model_name(p.framework, o.model);
  const std::string batch = std::to_string(p.batch);
  const std::string steps = std::to_string(o.steps), warmup = std::to_string(o.warmup_steps);
  const bool gpu = o.gpus_per_node > 0;
  switch (p.framework) {
    case LaunchFramework::kPytorchDdp: {
      std::vector<std::string> a = {"--launched", "--model", model,     "--batch", batch,
                                    "--warmup",   warmup,    "--steps", steps};
      if (o.threads_per_rank > 0) {
        a.insert(a.end(), {"--threads", std::to_string(o.threads_per_rank)});
      }
      a.insert(a.end(), {"--device", gpu ? "cuda" : "cpu"});
      if (!o.torch_backend.empty()) a.insert(a.end(), {"--backend", o.torch_backend});
      if (o.knobs.bucket_cap) {
        a.insert(a.end(),
                 {"--bucket-cap-mb", fmt::format("{:g}", o.knobs.bucket_cap->value() / (1 << 20))});
      }
      if (compresses(o, p.framework)) a.push_back("--fp16-compress");
      return a;
    }
    case LaunchFramework::kHorovodPytorch:
    case LaunchFramework::kHorovodKeras: {
      std::vector<std::string> a = {
          "--model", model,         "--batch-size", batch, "--num-warmup-batches",
          warmup,    "--num-iters", steps};
      if (!gpu) a.push_back("--no-cuda");
      if (compresses(o, p.framework)) a.push_back("--fp16-allreduce");
      return a;
    }
    case LaunchFramework::kHorovodTensorflow:
    case LaunchFramework::kTfPs: {
      std::vector<std::string> a = {"--model=" + model, "--batch_size=" + batch,
                                    "--num_batches=" + steps, "--num_warmup_batches=" + warmup};
      if (p.framework == LaunchFramework::kHorovodTensorflow) {
        a.insert(a.end(), {"--num_gpus=1", "--variable_update=horovod"});
        a.push_back(gpu ? "--horovod_device=gpu" : "--horovod_device=cpu");
      } else {
        a.push_back("--num_gpus=" + std::to_string(std::max(o.gpus_per_node, 1)));
        a.push_back("--variable_update=" + o.knobs.mode.value_or("parameter_server"));
        a.push_back("--local_parameter_device=" +
                    std::string(o.knobs.ps_on_gpu.value_or(false) ? "gpu" : "cpu"));
        a.push_back("--server_protocol=grpc");
      }
      if (!gpu) a.insert(a.end(), {"--device=cpu", "--data_format=NHWC"});
      return a;
    }
    case LaunchFramework::kKerasMwms:
      return {};
    case LaunchFramework::kMxnetPs: {
      // train_imagenet.py --benchmark 1: synthetic data; the batch is the worker's (all GPUs).
      const auto per_worker = p.batch * std::max(o.gpus_per_node, 1);
      const auto examples = per_worker * (o.steps + o.warmup_steps) * p.nodes;
      std::vector<std::string> a = {"--benchmark",    "1",
                                    "--kv-store",     "dist_sync",
                                    "--batch-size",   std::to_string(per_worker),
                                    "--num-epochs",   "1",
                                    "--num-examples", std::to_string(examples),
                                    "--disp-batches", "1"};
      const auto split = model.find(':');
      if (split == std::string::npos) {
        a.insert(a.end(), {"--network", model});
      } else {
        a.insert(a.end(),
                 {"--network", model.substr(0, split), "--num-layers", model.substr(split + 1)});
      }
      if (gpu) {
        std::vector<std::string> ids;
        for (int g = 0; g < o.gpus_per_node; ++g) ids.push_back(std::to_string(g));
        a.insert(a.end(), {"--gpus", join(ids, ",")});
      }
      return a;
    }
  }
  return {};
}

// The script and its arguments, quoted; torchrun starts the script itself.
std::string script_words(const LaunchOptions& o, const LaunchPoint& p) {
  const std::string script = o.script.empty() ? default_script(p.framework) : o.script;
  const auto args = benchmark_args(o, p);
  return quoted_words({script}) + (args.empty() ? "" : " ") + quoted_words(args);
}

std::string command_words(const LaunchOptions& o, const LaunchPoint& p) {
  return quoted_words({o.python}) + " " + script_words(o, p);
}

// The environment every task of the point reads (values checked or numbers).
std::vector<std::string> environment(const LaunchOptions& o, const LaunchPoint& p) {
  std::vector<std::string> env;
  if (o.threads_per_rank > 0) {
    env.push_back(fmt::format("export OMP_NUM_THREADS={}", o.threads_per_rank));
  }
  if (!o.nccl_socket_ifname.empty()) {
    env.push_back("export NCCL_SOCKET_IFNAME=" + o.nccl_socket_ifname);
  }
  if (!o.nccl_ib_hca.empty()) env.push_back("export NCCL_IB_HCA=" + o.nccl_ib_hca);
  if (!o.nccl_algo.empty()) env.push_back("export NCCL_ALGO=" + o.nccl_algo);
  if (!o.gloo_socket_ifname.empty()) {
    env.push_back("export GLOO_SOCKET_IFNAME=" + o.gloo_socket_ifname);
  }
  if (is_horovod(p.framework)) {
    if (o.knobs.fusion_threshold) {
      env.push_back(
          fmt::format("export HOROVOD_FUSION_THRESHOLD={:.0f}", o.knobs.fusion_threshold->value()));
    }
    if (o.knobs.cycle_time) {
      env.push_back(
          fmt::format("export HOROVOD_CYCLE_TIME={:g}", o.knobs.cycle_time->value() * 1e3));
    }
  }
  if (p.framework == LaunchFramework::kMxnetPs) {
    env.push_back(
        fmt::format("export DMLC_PS_ROOT_URI=\"${{nodes[0]}}\" DMLC_PS_ROOT_PORT={}", kDmlcPort));
    env.push_back(fmt::format("export DMLC_NUM_SERVER={} DMLC_NUM_WORKER={}", servers(o), p.nodes));
    if (!o.gloo_socket_ifname.empty()) {
      env.push_back("export DMLC_INTERFACE=" + o.gloo_socket_ifname);
    }
  }
  return env;
}

// srun's options for a step of `tasks` tasks on `nodes` nodes from node `first` of the
// allocation; steps that share nodes with another (servers beside workers) overlap.
std::string srun(int nodes, int tasks, int first, bool overlap, const std::string& extra = "") {
  return fmt::format("srun --kill-on-bad-exit=1 --nodes={} --ntasks={} --relative={}{}{}", nodes,
                     tasks, first, overlap ? " --overlap" : "", extra);
}

void point_body(std::ostringstream& s, const LaunchOptions& o, const LaunchPoint& p) {
  const int per_node = ranks_per_node(o);
  for (const auto& line : environment(o, p)) s << "  " << line << "\n";
  const std::string cmd = command_words(o, p);
  switch (p.framework) {
    case LaunchFramework::kPytorchDdp:
      s << "  export MASTER_ADDR=\"${nodes[0]}\" MASTER_PORT=" << o.master_port << "\n";
      if (o.torch_launcher == "torchrun") {
        s << "  " << srun(p.nodes, p.nodes, 0, false, " --ntasks-per-node=1")
          << " \\\n    torchrun --nnodes=" << p.nodes << " --nproc_per_node=" << per_node
          << " --rdzv_id=\"$SLURM_JOB_ID\" --rdzv_backend=c10d"
          << " --rdzv_endpoint=\"$MASTER_ADDR:$MASTER_PORT\" \\\n    " << script_words(o, p)
          << "\n";
      } else {
        s << "  "
          << srun(p.nodes, p.nodes * per_node, 0, false,
                  fmt::format(" --ntasks-per-node={}", per_node))
          << " \\\n    bash -c 'export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS "
             "LOCAL_RANK=$SLURM_LOCALID LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE; exec \"$@\"' "
             "rank \\\n    "
          << cmd << "\n";
      }
      break;
    case LaunchFramework::kHorovodPytorch:
    case LaunchFramework::kHorovodTensorflow:
    case LaunchFramework::kHorovodKeras:
      s << "  "
        << srun(p.nodes, p.nodes * per_node, 0, false,
                fmt::format(" --ntasks-per-node={} --mpi=pmix", per_node))
        << " \\\n    " << cmd << "\n";
      break;
    case LaunchFramework::kKerasMwms:
      s << "  " << srun(p.nodes, p.nodes, 0, false, " --ntasks-per-node=1")
        << " \\\n    bash -c 'mwms_task \"$@\"' mwms \\\n    " << cmd << "\n";
      break;
    case LaunchFramework::kTfPs: {
      const int k = servers(o);
      const bool ded = dedicated(o);
      // Servers first (they serve until the job ends), then the workers; the servers are
      // stopped when the workers are done.
      s << "  "
        << srun(ded ? k : std::min(k, p.nodes), k, ded ? p.nodes : 0, true,
                ded ? " --ntasks-per-node=1" : " --distribution=cyclic")
        << " \\\n    bash -c 'tf_task ps \"$@\"' tf " << p.nodes << " " << k << " " << (ded ? 1 : 0)
        << " \\\n    " << cmd << " &\n";
      s << "  servers=$!\n";
      s << "  " << srun(p.nodes, p.nodes, 0, true, " --ntasks-per-node=1")
        << " \\\n    bash -c 'tf_task worker \"$@\"' tf " << p.nodes << " " << k << " "
        << (ded ? 1 : 0) << " \\\n    " << cmd << "\n";
      s << "  kill \"$servers\" 2>/dev/null || true\n";
      break;
    }
    case LaunchFramework::kMxnetPs: {
      const int k = servers(o);
      const bool ded = dedicated(o);
      // The scheduler and the servers run on the CPU (ps-lite's servers sum in host memory).
      s << "  DMLC_ROLE=scheduler CUDA_VISIBLE_DEVICES='' " << srun(1, 1, 0, true) << " \\\n    "
        << cmd << " &\n";
      s << "  scheduler=$!\n";
      s << "  DMLC_ROLE=server CUDA_VISIBLE_DEVICES='' "
        << srun(ded ? k : std::min(k, p.nodes), k, ded ? p.nodes : 0, true,
                ded ? " --ntasks-per-node=1" : " --distribution=cyclic")
        << " \\\n    " << cmd << " &\n";
      s << "  servers=$!\n";
      s << "  DMLC_ROLE=worker " << srun(p.nodes, p.nodes, 0, true, " --ntasks-per-node=1")
        << " \\\n    " << cmd << "\n";
      s << "  wait \"$servers\" \"$scheduler\" || true\n";
      break;
    }
  }
}

// Helpers the tasks of TensorFlow jobs run (exported to srun's tasks as bash functions).
constexpr const char* kTfTask =
    R"SH(# TensorFlow's cluster for task $SLURM_PROCID of role $1 (docs/launch.md): workers on the
# first $2 nodes (port 2220), $3 servers (port 2222 + index) on the next nodes ($4 = 1) or
# spread over the workers' nodes; both as tf_cnn_benchmarks flags and as TF_CONFIG.
tf_task() {
  local role=$1 workers=$2 ps=$3 dedicated=$4 i hosts=() ps_hosts=() worker_hosts=()
  shift 4
  mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  for ((i = 0; i < workers; i++)); do worker_hosts+=("${hosts[i]}:2220"); done
  for ((i = 0; i < ps; i++)); do
    if ((dedicated)); then ps_hosts+=("${hosts[workers + i]}:$((2222 + i))")
    else ps_hosts+=("${hosts[i % workers]}:$((2222 + i))"); fi
  done
  local ps_list worker_list
  if [[ $role == ps ]]; then export CUDA_VISIBLE_DEVICES=''; fi # servers: variables on the CPU
  ps_list=$(IFS=,; echo "${ps_hosts[*]}")
  worker_list=$(IFS=,; echo "${worker_hosts[*]}")
  export TF_CONFIG="{\"cluster\": {\"ps\": [\"${ps_list//,/\", \"}\"], \"worker\": [\"${worker_list//,/\", \"}\"]}, \"task\": {\"type\": \"$role\", \"index\": $SLURM_PROCID}}"
  exec "$@" --job_name="$role" --task_index="$SLURM_PROCID" --ps_hosts="$ps_list" \
    --worker_hosts="$worker_list"
}
export -f tf_task
)SH";

constexpr const char* kMwmsTask =
    R"SH(# MultiWorkerMirroredStrategy's TF_CONFIG for worker $SLURM_PROCID: one worker per node, port 2220.
mwms_task() {
  local hosts=() workers=() i list
  mapfile -t hosts < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
  for ((i = 0; i < SLURM_NNODES; i++)); do workers+=("\"${hosts[i]}:2220\""); done
  list=$(IFS=,; echo "${workers[*]}")
  export TF_CONFIG="{\"cluster\": {\"worker\": [$list]}, \"task\": {\"type\": \"worker\", \"index\": $SLURM_PROCID}}"
  exec "$@"
}
export -f mwms_task
)SH";

std::string point_comment(const LaunchOptions& o, const LaunchPoint& p) {
  return fmt::format(
      "{} {} batch {} on {} node(s), {} rank(s){}", to_string(p.framework), o.model, p.batch,
      p.nodes, p.ranks(),
      has_servers(p.framework)
          ? fmt::format(", {} {} server(s)", servers(o), dedicated(o) ? "dedicated" : "colocated")
          : "");
}

std::string job_script(const LaunchOptions& o, const std::vector<LaunchPoint>& points) {
  const auto& first = points.front();
  const std::string out_dir = fs::absolute(o.output_dir).lexically_normal().string();
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "# Written by dlvalidate launch (dlsim " << kVersion << ", docs/launch.md):\n";
  s << "#   " << comment_safe(o.command_line) << "\n";
  for (std::size_t i = 0; i < points.size(); ++i) {
    s << "# task " << i << ": " << comment_safe(point_comment(o, points[i])) << "\n";
  }
  s << "#SBATCH --job-name=" << o.job_name << "\n";
  s << "#SBATCH --nodes=" << first.alloc_nodes << "\n";
  if (first.tasks_per_node > 0) s << "#SBATCH --ntasks-per-node=" << first.tasks_per_node << "\n";
  if (o.gpus_per_node > 0) s << "#SBATCH --gpus-per-node=" << o.gpus_per_node << "\n";
  if (o.threads_per_rank > 0 && !one_process_per_node(first.framework)) {
    s << "#SBATCH --cpus-per-task=" << o.threads_per_rank << "\n";
  }
  s << "#SBATCH --time=" << o.time << "\n";
  if (!o.partition.empty()) s << "#SBATCH --partition=" << o.partition << "\n";
  if (!o.account.empty()) s << "#SBATCH --account=" << o.account << "\n";
  if (!o.constraint.empty()) s << "#SBATCH --constraint=" << o.constraint << "\n";
  if (o.exclusive) s << "#SBATCH --exclusive\n";
  s << "#SBATCH --array=0-" << points.size() - 1 << "\n";
  s << "#SBATCH --output=" << out_dir << "/%x-%A_%a.out\n";
  s << "set -euo pipefail\n";
  s << "mapfile -t nodes < <(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n";
  s << "echo \"dlsim-launch: job ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on ${nodes[*]}\"\n";
  bool tf = false, mwms = false;
  for (const auto& p : points) {
    tf = tf || p.framework == LaunchFramework::kTfPs;
    mwms = mwms || p.framework == LaunchFramework::kKerasMwms;
  }
  if (tf) s << kTfTask;
  if (mwms) s << kMwmsTask;
  for (std::size_t i = 0; i < points.size(); ++i) {
    s << "# " << comment_safe(point_comment(o, points[i])) << "\n";
    s << "point_" << i << "() {\n";
    point_body(s, o, points[i]);
    s << "}\n";
  }
  s << "case \"$SLURM_ARRAY_TASK_ID\" in\n";
  for (std::size_t i = 0; i < points.size(); ++i) s << "  " << i << ") point_" << i << " ;;\n";
  s << "esac\n";
  return s.str();
}

// A name that goes into an environment line unquoted (an interface or HCA list).
void check_name_list(const char* field, const std::string& value) {
  if (!value.empty()) check_sbatch_value(field, value, "_.-,:=^", "name list");
}

}  // namespace

std::optional<LaunchFramework> parse_launch_framework(std::string_view text) {
  for (const auto& f : kFrameworks) {
    if (text == f.name) return f.f;
  }
  return std::nullopt;
}

std::string_view to_string(LaunchFramework f) {
  for (const auto& n : kFrameworks) {
    if (n.f == f) return n.name;
  }
  return "unknown";
}

const std::vector<std::string>& launch_framework_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& f : kFrameworks) v.emplace_back(f.name);
    return v;
  }();
  return names;
}

int LaunchPoint::ranks() const { return nodes * ranks_per_node; }

std::string benchmark_model_name(LaunchFramework f, const std::string& zoo) {
  // Each benchmark's spelling of the zoo's models: torchvision (PyTorch), tf_cnn_benchmarks'
  // model names, tf.keras.applications classes, MXNet's symbols (network:layers).
  struct Names {
    const char* zoo;
    const char* torch;
    const char* tf_cnn;
    const char* keras;
    const char* mxnet;
  };
  static constexpr Names kNames[] = {
      {"alexnet", "alexnet", "alexnet", nullptr, "alexnet"},
      {"googlenet", "googlenet", "googlenet", nullptr, "googlenet"},
      {"inception_v3", "inception_v3", "inception3", "InceptionV3", "inception-v3"},
      {"resnet18", "resnet18", nullptr, nullptr, "resnet:18"},
      {"resnet34", "resnet34", nullptr, nullptr, "resnet:34"},
      {"resnet50", "resnet50", "resnet50", "ResNet50", "resnet:50"},
      {"resnet101", "resnet101", "resnet101", "ResNet101", "resnet:101"},
      {"resnet152", "resnet152", "resnet152", "ResNet152", "resnet:152"},
      {"vgg11", "vgg11", "vgg11", nullptr, "vgg:11"},
      {"vgg16", "vgg16", "vgg16", "VGG16", "vgg:16"},
      {"vgg19", "vgg19", "vgg19", "VGG19", "vgg:19"},
  };
  for (const auto& n : kNames) {
    if (zoo != n.zoo) continue;
    const char* name = nullptr;
    switch (f) {
      case LaunchFramework::kPytorchDdp:
      case LaunchFramework::kHorovodPytorch:
        name = n.torch;
        break;
      case LaunchFramework::kHorovodTensorflow:
      case LaunchFramework::kTfPs:
        name = n.tf_cnn;
        break;
      case LaunchFramework::kHorovodKeras:
      case LaunchFramework::kKerasMwms:
        name = n.keras;
        break;
      case LaunchFramework::kMxnetPs:
        name = n.mxnet;
        break;
    }
    if (name) return name;
    break;
  }
  fail_at({}, "model",
          fmt::format("the {} benchmark has no model '{}': give --script and --script-args",
                      to_string(f), comment_safe(zoo)));
}

void validate_launch(const LaunchOptions& o) {
  if (o.frameworks.empty()) fail_at({}, "framework", "give at least one framework");
  // The model names the runs in the script's comments and in the results: one printable line.
  if (std::any_of(o.model.begin(), o.model.end(),
                  [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    fail_at({}, "model", fmt::format("'{}' holds a control character", comment_safe(o.model)));
  }
  if (o.nodes.empty()) fail_at({}, "nodes", "give at least one node count");
  if (o.batches.empty()) fail_at({}, "batch", "give at least one batch");
  for (int n : o.nodes) {
    if (n < 1) fail_at({}, "nodes", fmt::format("must be at least 1 (got {})", n));
  }
  for (auto b : o.batches) {
    if (b < 1) fail_at({}, "batch", fmt::format("must be at least 1 (got {})", b));
  }
  if (o.gpus_per_node < 0 || o.gpus_per_node > 1024) {
    fail_at({}, "gpus_per_node", fmt::format("must be 0 to 1024 (got {})", o.gpus_per_node));
  }
  if (o.ranks_per_node < 1) {
    fail_at({}, "ranks_per_node", fmt::format("must be at least 1 (got {})", o.ranks_per_node));
  }
  if (o.threads_per_rank < 0) {
    fail_at({}, "threads", fmt::format("must not be negative (got {})", o.threads_per_rank));
  }
  if (o.steps < 1) fail_at({}, "steps", fmt::format("must be at least 1 (got {})", o.steps));
  if (o.warmup_steps < 0) {
    fail_at({}, "warmup", fmt::format("must not be negative (got {})", o.warmup_steps));
  }
  if (o.master_port < 1024 || o.master_port > 65535) {
    fail_at({}, "master_port", fmt::format("must be 1024 to 65535 (got {})", o.master_port));
  }
  if (o.python.empty()) fail_at({}, "python", "must not be empty");
  if (!o.torch_backend.empty() && o.torch_backend != "nccl" && o.torch_backend != "gloo" &&
      o.torch_backend != "mpi") {
    fail_at({}, "backend",
            fmt::format("'{}' is not nccl, gloo or mpi", comment_safe(o.torch_backend)));
  }
  if (o.torch_launcher != "srun" && o.torch_launcher != "torchrun") {
    fail_at({}, "torch_launcher",
            fmt::format("'{}' is not srun or torchrun", comment_safe(o.torch_launcher)));
  }
  if (o.torch_backend == "nccl" && o.gpus_per_node == 0) {
    fail_at({}, "backend", "nccl needs GPUs (--gpus-per-node); CPU ranks use gloo");
  }
  if (o.knobs.ps_servers && (*o.knobs.ps_servers < 1 || *o.knobs.ps_servers > dlsim::kMaxRanks)) {
    fail_at({}, "ps_servers",
            fmt::format("must be in 1..{} (got {})", dlsim::kMaxRanks, *o.knobs.ps_servers));
  }
  if (o.knobs.mode && *o.knobs.mode != "parameter_server" &&
      *o.knobs.mode != "distributed_replicated") {
    fail_at({}, "mode",
            fmt::format("'{}' is not parameter_server or distributed_replicated (tf-ps)",
                        comment_safe(*o.knobs.mode)));
  }
  if (o.knobs.cycle_time && !(o.knobs.cycle_time->value() >= 0)) {
    fail_at({}, "cycle_time", "must be zero (HOROVOD_CYCLE_TIME=0: no sleep) or positive");
  }
  if (o.knobs.bucket_cap && !(o.knobs.bucket_cap->value() > 0)) {
    fail_at({}, "bucket_cap", "must be positive");
  }
  if (!o.nccl_algo.empty()) {
    check_sbatch_value("nccl_algo", o.nccl_algo, ",^", "NCCL algorithm list");
  }
  check_name_list("socket_ifname", o.gloo_socket_ifname);
  check_name_list("nccl_socket_ifname", o.nccl_socket_ifname);
  check_name_list("ib_hca", o.nccl_ib_hca);
  for (auto f : o.frameworks) {
    if (f == LaunchFramework::kKerasMwms && o.script.empty()) {
      fail_at({}, "script",
              "keras-mwms has no standard benchmark: give the training script (it must print "
              "Horovod's 'Total img/sec' line or ddp_step.py's JSON line)");
    }
    if (o.script.empty()) benchmark_model_name(f, o.model);  // the benchmark knows the model
  }
  // A knob is refused only where no framework of the sweep reads it; each job sets it for the
  // frameworks that do (launch_prediction, the scripts).
  const auto sweep = [&] {
    std::vector<std::string> names;
    for (auto f : o.frameworks) names.emplace_back(to_string(f));
    return join(names, ", ");
  };
  const auto any = [&](auto reads) {
    return std::any_of(o.frameworks.begin(), o.frameworks.end(), reads);
  };
  if (o.knobs.bucket_cap &&
      !any([](LaunchFramework f) { return f == LaunchFramework::kPytorchDdp; })) {
    fail_at({}, "bucket_cap",
            fmt::format("is PyTorch DDP's; no framework of the sweep ({}) takes it", sweep()));
  }
  if (o.knobs.compression.value_or(simulator::GradientCompression::kNone) ==
          simulator::GradientCompression::kFp16 &&
      o.script.empty() && !any(takes_compression)) {
    fail_at({}, "compression",
            fmt::format("fp16 is taken by pytorch-ddp (ddp_step.py --fp16-compress), "
                        "horovod-pytorch and horovod-keras (--fp16-allreduce); no framework of "
                        "the sweep ({}) does",
                        sweep()));
  }
  if ((o.knobs.fusion_threshold || o.knobs.cycle_time) && !any(is_horovod)) {
    fail_at({}, o.knobs.fusion_threshold ? "fusion_threshold" : "cycle_time",
            fmt::format("is Horovod's; no framework of the sweep ({}) takes it", sweep()));
  }
  // Slurm's own fields, as dlcalibrate slurm checks them.
  calibrate::SlurmOptions s;
  s.nodes = *std::max_element(o.nodes.begin(), o.nodes.end());
  s.gpus_per_node = o.gpus_per_node;
  s.partition = o.partition;
  s.account = o.account;
  s.constraint = o.constraint;
  s.time = o.time;
  s.job_name = o.job_name;
  s.output_dir = o.output_dir;
  calibrate::validate_slurm_options(s);
}

std::vector<LaunchJob> plan_launch(const LaunchOptions& o) {
  validate_launch(o);
  std::vector<LaunchJob> jobs;
  for (auto f : o.frameworks) {
    for (int n : o.nodes) {
      for (auto b : o.batches) {
        LaunchPoint p;
        p.framework = f;
        p.nodes = n;
        p.batch = b;
        const bool torchrun = f == LaunchFramework::kPytorchDdp && o.torch_launcher == "torchrun";
        p.tasks_per_node = has_servers(f)                        ? 0
                           : one_process_per_node(f) || torchrun ? 1
                                                                 : ranks_per_node(o);
        p.alloc_nodes = n + (has_servers(f) && dedicated(o) ? servers(o) : 0);
        p.ranks_per_node = ranks_per_node(o);
        auto same = std::find_if(jobs.begin(), jobs.end(), [&](const LaunchJob& j) {
          const auto& q = j.points.front();
          return q.alloc_nodes == p.alloc_nodes && q.tasks_per_node == p.tasks_per_node &&
                 one_process_per_node(q.framework) == one_process_per_node(f);
        });
        if (same == jobs.end()) {
          jobs.push_back({{p}, ""});
        } else {
          same->points.push_back(p);
        }
      }
    }
  }
  for (auto& j : jobs) j.script = job_script(o, j.points);
  return jobs;
}

simulator::PredictOptions predict_options(const LaunchOptions& o, const LaunchPoint& p,
                                          const std::string& cluster) {
  simulator::PredictOptions q;
  q.model = o.model;
  q.cluster = cluster;
  q.batch = p.batch;
  q.gpus = p.nodes * ranks_per_node(o);
  q.gpus_per_node = ranks_per_node(o);
  q.framework_options = o.knobs;
  switch (p.framework) {
    case LaunchFramework::kPytorchDdp:
      q.framework = "pytorch-ddp";
      break;
    case LaunchFramework::kHorovodPytorch:
    case LaunchFramework::kHorovodTensorflow:
      q.framework = "horovod";
      break;
    case LaunchFramework::kHorovodKeras:
    case LaunchFramework::kKerasMwms:
      q.framework = "keras";
      break;
    case LaunchFramework::kTfPs:
      q.framework = "tf-ps";
      break;
    case LaunchFramework::kMxnetPs:
      q.framework = "mxnet-kvstore";
      q.framework_options.mode = "dist_sync";
      break;
  }
  if (!is_horovod(p.framework) && p.framework != LaunchFramework::kKerasMwms) {
    q.framework_options.fusion_threshold.reset();
    q.framework_options.cycle_time.reset();
  }
  if (p.framework != LaunchFramework::kPytorchDdp) q.framework_options.bucket_cap.reset();
  if (!takes_compression(p.framework)) q.framework_options.compression.reset();
  if (!has_servers(p.framework)) {
    q.framework_options.ps_servers.reset();
    q.framework_options.ps_colocated.reset();
    q.framework_options.ps_on_gpu.reset();
  }
  if (p.framework != LaunchFramework::kTfPs && p.framework != LaunchFramework::kMxnetPs) {
    q.framework_options.mode.reset();
  }
  return q;
}

nlohmann::json launch_manifest(const LaunchOptions& o, const LaunchJob& job,
                               const std::string& job_id, const std::string& script_path) {
  using nlohmann::json;
  const std::string out_dir = fs::absolute(o.output_dir).lexically_normal().string();
  json points = json::array();
  for (std::size_t i = 0; i < job.points.size(); ++i) {
    const auto& p = job.points[i];
    points.push_back({{"task", i},
                      {"job_id", fmt::format("{}_{}", job_id, i)},
                      {"framework", to_string(p.framework)},
                      {"nodes", p.nodes},
                      {"batch_per_gpu", p.batch},
                      {"alloc_nodes", p.alloc_nodes},
                      {"tasks_per_node", p.tasks_per_node},
                      {"ranks", p.ranks()},
                      {"log", fmt::format("{}/{}-{}_{}.out", out_dir, o.job_name, job_id, i)}});
  }
  json knobs = json::object();
  if (o.knobs.fusion_threshold) knobs["fusion_threshold_bytes"] = o.knobs.fusion_threshold->value();
  if (o.knobs.cycle_time) knobs["cycle_time_s"] = o.knobs.cycle_time->value();
  if (o.knobs.bucket_cap) knobs["bucket_cap_bytes"] = o.knobs.bucket_cap->value();
  if (o.knobs.ps_servers) knobs["ps_servers"] = *o.knobs.ps_servers;
  if (o.knobs.ps_colocated)
    knobs["ps_placement"] = *o.knobs.ps_colocated ? "colocated" : "dedicated";
  if (o.knobs.mode) knobs["mode"] = *o.knobs.mode;
  if (o.knobs.compression) knobs["compression"] = simulator::to_string(*o.knobs.compression);
  return {{"kind", "dlsim-launch"},
          {"dlsim", kVersion},
          {"command_line", o.command_line},
          {"job_id", job_id},
          {"script", script_path},
          {"model", o.model},
          {"gpus_per_node", o.gpus_per_node},
          {"ranks_per_node", ranks_per_node(o)},
          {"threads_per_rank", o.threads_per_rank},
          {"steps", o.steps},
          {"warmup_steps", o.warmup_steps},
          {"job_name", o.job_name},
          {"output_dir", out_dir},
          {"knobs", knobs},
          {"points", points}};
}

double read_launched_throughput(const std::string& path, int workers, int warmup_steps,
                                std::string* format) {
  std::ifstream in(path);
  if (!in) fail_at({path, 0, 0}, "", "cannot read the job's log (did the job start?)");
  std::string line;
  int no = 0;
  std::string limit;
  std::vector<double> mxnet;
  static const std::regex kSpeed(R"(Speed:\s*([0-9.eE+-]+)\s*samples/sec)");
  static const std::regex kCancelled(R"(\*\*\* (JOB|STEP) \S+ ON \S+ CANCELLED AT \S+(.*)\*\*\*)");
  bool horovod_or_tf = false;
  std::string last_error;  // the log's last complaint, for the message when nothing was measured
  std::string fallback_error;  // srun's or slurmstepd's, when the program said none
  while (std::getline(in, line)) {
    ++no;
    // The program's own complaint is worth more than srun's note that a task failed.
    const bool slurm = line.rfind("srun:", 0) == 0 || line.rfind("slurmstepd", 0) == 0;
    if (line.find("Error") != std::string::npos || line.find("error:") != std::string::npos ||
        line.find("can't open file") != std::string::npos) {
      (slurm ? fallback_error : last_error) = fmt::format("line {}: {}", no, comment_safe(line));
    }
    std::smatch m;
    if (std::regex_search(line, m, kCancelled)) {
      const std::string why = m[2].str();
      limit = why.find("TIME LIMIT") != std::string::npos ? "it ran out of its time limit"
                                                          : "it was cancelled";
    }
    const auto brace = line.find("{\"kind\": \"pytorch-ddp-step\"");
    if (brace != std::string::npos) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line.substr(brace));
      } catch (const nlohmann::json::exception&) {
        fail_at({path, no, 0}, "", "ddp_step.py's JSON line does not parse (a truncated log?)");
      }
      const double v = j.value("samples_per_s", 0.0);
      if (!(v > 0) || !std::isfinite(v)) {
        fail_at({path, no, 0}, "samples_per_s", "missing or not positive");
      }
      if (format) *format = "pytorch-ddp-step";
      return v;
    }
    if (std::regex_search(line, m, kSpeed)) mxnet.push_back(std::stod(m[1].str()));
    if (line.find("Total img/sec") != std::string::npos ||
        line.find("total images/sec") != std::string::npos) {
      horovod_or_tf = true;
    }
  }
  if (last_error.empty()) last_error = fallback_error;
  if (!limit.empty()) {
    fail_at({path, 0, 0}, "", fmt::format("no throughput: {}", limit));
  }
  if (horovod_or_tf) {
    const auto m = read_log(path);
    if (format) *format = m.format;
    return m.total;
  }
  const auto skip = static_cast<std::size_t>(std::max(workers, 1) * warmup_steps);
  if (mxnet.size() > skip) {
    // Speedometer's lines: each worker's samples/s over its last batch, interleaved; the job's
    // rate is their mean after each worker's warm-up batches, times the workers
    // (docs/launch.md).
    double sum = 0;
    for (std::size_t i = skip; i < mxnet.size(); ++i) sum += mxnet[i];
    if (format) *format = "mxnet";
    return sum / static_cast<double>(mxnet.size() - skip) * std::max(workers, 1);
  }
  fail_at(
      {path, 0, 0}, "",
      fmt::format(
          "no throughput line (ddp_step.py's JSON, Horovod's 'Total img/sec', tf_cnn_benchmarks' "
          "'total images/sec' or MXNet's 'Speed: ... samples/sec'){}",
          last_error.empty() ? ": did the job stop early?" : "; last error " + last_error));
}

Row launch_row(const LaunchOptions& o, const LaunchResult& r, const std::string& source_id) {
  Row row;
  for (const auto& c : throughput_columns()) row[c] = "";
  const auto& p = r.point;
  const int per_node = o.gpus_per_node > 0 ? o.gpus_per_node : o.ranks_per_node;
  row["source_id"] = source_id;
  row["model"] = o.model;
  row["task"] = "train";
  row["framework"] = std::string(to_string(p.framework));
  row["comm"] =
      p.framework == LaunchFramework::kPytorchDdp
          ? (o.torch_backend.empty() ? (o.gpus_per_node > 0 ? "nccl" : "gloo") : o.torch_backend)
      : has_servers(p.framework) ? fmt::format("parameter_server({} {})", servers(o),
                                               dedicated(o) ? "dedicated" : "colocated")
                                 : "allreduce";
  row["precision"] = "fp32";
  row["gpu"] = o.gpus_per_node > 0 ? "gpu" : "cpu";
  row["num_gpus"] = std::to_string(p.nodes * per_node);
  row["num_nodes"] = std::to_string(p.nodes);
  row["gpus_per_node"] = std::to_string(per_node);
  row["batch_per_gpu"] = std::to_string(p.batch);
  row["data"] = "synthetic";
  row["value"] = fmt::format("{:.6g}", r.samples_per_s);
  row["unit"] = "samples/s";
  row["approx"] = "no";
  row["locator"] = r.log;
  row["notes"] = fmt::format("dlvalidate launch, Slurm job {} ({} log)", r.job_id, r.format);
  return row;
}

std::string launch_cases_yaml(const LaunchOptions& o, const std::vector<LaunchResult>& results,
                              const std::string& source_id, const std::string& data_set,
                              const std::string& cluster) {
  std::ostringstream y;
  y << "kind: validation-cases\n";
  y << "name: " << source_id << "\n";
  y << "description: >-\n  Runs launched by dlvalidate launch (" << comment_safe(o.command_line)
    << "), predicted from the cluster profile alone (no anchor).\n";
  y << "source: " << source_id << " (dlvalidate launch)\n";
  y << "cases:\n";
  std::set<std::string> seen;
  for (const auto& r : results) {
    // One case per framework and batch: a case counts one row per GPU count.
    const auto framework = std::string(to_string(r.point.framework));
    const auto name = fmt::format("{} b{}", framework, r.point.batch);
    if (!seen.insert(name).second) continue;
    const auto q = predict_options(o, r.point, cluster);
    y << "  - name: " << name << "\n";
    y << "    data: " << data_set << "\n";
    y << "    match: {source_id: " << source_id << ", framework: " << framework
      << ", batch_per_gpu: \"" << r.point.batch << "\"}\n";
    y << "    quantity: throughput\n";
    y << "    predict: {cluster: " << nlohmann::json(cluster).dump()
      << ", framework: " << q.framework << ", gpus_per_node: " << *q.gpus_per_node;
    const auto& k = q.framework_options;
    if (k.fusion_threshold)
      y << fmt::format(", fusion_threshold: {:.0f}B", k.fusion_threshold->value());
    if (k.cycle_time) y << fmt::format(", cycle_time: {:g}ms", k.cycle_time->value() * 1e3);
    if (k.bucket_cap) y << fmt::format(", bucket_cap: {:.0f}B", k.bucket_cap->value());
    if (k.ps_servers) y << ", ps_servers: " << *k.ps_servers;
    if (k.ps_colocated) y << ", ps_placement: " << (*k.ps_colocated ? "colocated" : "dedicated");
    if (k.mode) y << ", mode: " << *k.mode;
    if (k.compression) y << ", compression: " << simulator::to_string(*k.compression);
    y << "}\n";
  }
  return y.str();
}

}  // namespace dlsim::validate
