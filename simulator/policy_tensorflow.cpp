// TensorFlow as tf_cnn_benchmarks runs it (docs/simulator.md, "tf-ps" and "tf-replicated").
// tf-ps, `parameter_server`: every variable lives on one parameter server, placed in creation
// order on the server holding the fewest bytes so far (GreedyLoadBalancingStrategy); a worker
// sums its GPUs' gradients of a variable on its CPU (the add_n is placed on the worker's CPU) as
// soon as backward produces them, sends the sum to the variable's server, which applies it, and
// reads the new value back. `distributed_replicated` keeps a copy on every GPU; the master copies
// go round robin over the servers in creation order (replica_device_setter); a worker sums a
// variable's gradients on its GPU (i mod g) and sends that sum; the updated master is read to
// the worker's CPU and copied to every GPU. tf-replicated, `replicated` with --use_nccl (mode
// nccl): each variable's gradient is allreduced across the node's GPUs as it is produced, no
// fusion; without (mode copy): summed on GPU i mod g by copies and copied back.

#include <fmt/format.h>
#include <algorithm>
#include <numeric>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

// TensorFlow's runtime (docs/simulator.md, "TensorFlow's GPU replicas"): an op that consumes a
// GPU-to-GPU copy is queued on the receiving GPU once the copy is done (gpu_util.cc,
// DeviceToDeviceCopy, waits for that GPU's stream first), and by then its executor has queued
// the rest of the backward pass: a replica's sum and update, and the copies between them, run
// after it.
constexpr const char* replicas_by_copies =
    "TensorFlow sums each variable on one GPU and copies the sum to every replica, queued behind "
    "the GPUs' backward pass";

std::vector<CommGroup> per_tensor(const JobInfo& job, const networks::PsOptions& ps) {
  std::vector<CommGroup> g(job.gradient_bytes.size());
  for (std::size_t t = 0; t < g.size(); ++t) {
    g[t].tensors = {static_cast<int>(t)};
    g[t].bytes = job.gradient_bytes[t];
    g[t].ps = ps;
    g[t].ps.tensors = {job.gradient_bytes[t]};
    // Variables are created in forward order, the reverse of backward order.
    g[t].ps.variable = static_cast<int>(g.size() - 1 - t);
  }
  return g;
}

class TfParameterServer : public FrameworkPolicy {
 public:
  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo& job) const override {
    const std::string name = "tf-ps";
    refuse_unless_taken(o, {"mode", "ps_device"}, name);
    ResolvedPolicy p;
    p.params.mode = o.mode.value_or("parameter_server");
    if (*p.params.mode != "parameter_server" && *p.params.mode != "distributed_replicated") {
      fail_at({}, "mode",
              fmt::format("unknown tf-ps mode '{}' (parameter_server, distributed_replicated)",
                          *p.params.mode));
    }
    p.strategy = strategy.value_or("ps");
    // One server per worker node, on the workers' hosts, summing on the CPU: the setup of the
    // TensorFlow benchmarks' distributed runs (and of one machine with
    // --local_parameter_device=cpu).
    p.ps = ps_options(o, job.nodes);
    p.ps.sharding = "round_robin";
    // Summed inside the worker before it is sent: on the worker's CPU (parameter_server) or on
    // one of its GPUs (distributed_replicated).
    // With the variables on a GPU (local_parameter_device=gpu, one machine) the add_n runs on
    // that GPU, the server's: every GPU's gradient goes to it.
    p.ps.aggregation =
        *p.params.mode == "parameter_server"
            ? (p.ps.on_gpu ? networks::PsAggregation::kNone : networks::PsAggregation::kHost)
            : networks::PsAggregation::kGpu;
    // Between-graph replication: every worker runs its own apply op on the server, which
    // updates the variable with that worker's sum as it arrives and answers it (the workers
    // meet at a barrier at the end of the step, not at the server).
    p.ps.apply_each = p.ps.aggregation != networks::PsAggregation::kNone;
    p.settings["mode"] = *p.params.mode;
    // distributed_replicated keeps a replica of every variable on every GPU: what updates them is
    // queued behind the GPUs' backward passes. (parameter_server keeps one copy, on a server;
    // the GPUs read it while the next forward pass runs.)
    if (*p.params.mode == "distributed_replicated" && job.gpus_per_node > 1) {
      p.after_backward = replicas_by_copies;
    }
    p.settings["ps_servers"] = std::to_string(p.ps.servers);
    p.settings["ps_placement"] = p.ps.colocated ? "colocated" : "dedicated";
    p.settings["ps_device"] = p.ps.on_gpu ? "gpu" : "cpu";
    p.description =
        fmt::format("tf-ps ({}): variables on {} {} {} parameter server(s), {} per variable",
                    *p.params.mode, p.ps.servers, p.ps.colocated ? "colocated" : "dedicated",
                    p.ps.on_gpu ? "GPU" : "CPU", p.strategy);
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    auto groups = per_tensor(job, p.ps);
    const auto servers = static_cast<std::size_t>(p.ps.servers);
    // In creation order: the greedy strategy puts each variable on the least-loaded server
    // (the first of equals); round robin puts variable i on server i mod S.
    std::vector<double> load(servers, 0.0);
    for (std::size_t k = groups.size(); k-- > 0;) {
      auto& g = groups[k];
      std::size_t s = static_cast<std::size_t>(g.ps.variable) % servers;
      if (*p.params.mode == "parameter_server") {
        s = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      }
      load[s] += g.bytes;
      g.ps.server_offset = static_cast<int>(s);
    }
    return std::make_unique<PerTensorLauncher>(std::move(groups));
  }

  Bytes buffer_bytes(const ResolvedPolicy&, const JobInfo&) const override { return Bytes(0); }
};

class TfReplicated : public FrameworkPolicy {
 public:
  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo& job) const override {
    const std::string name = "tf-replicated";
    refuse_unless_taken(o, {"mode", "ps_device"}, name);
    if (job.nodes > 1) {
      fail_at({}, "framework",
              fmt::format("tf-replicated runs inside one node, but the job spans {} nodes "
                          "(use tf-ps with --mode distributed_replicated, or horovod)",
                          job.nodes));
    }
    ResolvedPolicy p;
    p.params.mode = o.mode.value_or("nccl");
    if (*p.params.mode != "nccl" && *p.params.mode != "copy") {
      fail_at({}, "mode",
              fmt::format("unknown tf-replicated mode '{}' (nccl, copy)", *p.params.mode));
    }
    p.settings["mode"] = *p.params.mode;
    if (*p.params.mode == "copy") {
      // --use_nccl=false: variable i's gradients are summed on GPU i mod g by copies and the
      // sum copied back to every GPU (aggregate_gradients_using_copy_with_device_selection):
      // a parameter server per GPU.
      refuse(o.ps_servers.has_value(), "ps_servers", "tf-replicated copy");
      refuse(o.ps_on_gpu.has_value(), "ps_device", "tf-replicated copy");
      refuse(o.ps_colocated.has_value(), "ps_placement", "tf-replicated copy");
      p.strategy = strategy.value_or("ps");
      p.ps.servers = job.gpus;
      p.ps.colocated = true;
      p.ps.on_gpu = true;
      p.ps.sharding = "round_robin";
      if (job.gpus > 1) p.after_backward = replicas_by_copies;
      p.description = fmt::format(
          "tf-replicated (copy): each variable summed on one of the {} GPUs and copied back",
          job.gpus);
      return p;
    }
    p.strategy = strategy.value_or("auto");
    p.ps = ps_options(o, 1);
    p.description =
        fmt::format("tf-replicated: NCCL {} allreduce per variable inside the node", p.strategy);
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    auto groups = per_tensor(job, p.ps);
    if (*p.params.mode == "copy") {
      for (auto& g : groups) g.ps.server_offset = g.ps.variable % p.ps.servers;
    }
    return std::make_unique<PerTensorLauncher>(std::move(groups));
  }

  Bytes buffer_bytes(const ResolvedPolicy&, const JobInfo&) const override { return Bytes(0); }
};

}  // namespace

void register_tensorflow(FrameworkRegistry& r) {
  r.add("tf-ps",
        "tf_cnn_benchmarks parameter_server / distributed_replicated: push and pull "
        "each variable to its server",
        [] { return std::make_unique<TfParameterServer>(); });
  r.add("tf-replicated", "tf_cnn_benchmarks replicated: NCCL allreduce per variable in a node",
        [] { return std::make_unique<TfReplicated>(); });
}

}  // namespace dlsim::simulator
