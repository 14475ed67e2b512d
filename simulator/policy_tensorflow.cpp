// TensorFlow as tf_cnn_benchmarks runs it (docs/simulator.md, "tf-ps" and "tf-replicated").
// tf-ps, `parameter_server`: every variable lives on one parameter server (greedy by size over
// the servers, largest first; tf_cnn_benchmarks' greedy strategy takes creation order); each worker
// GPU pushes a variable's gradient as soon as backward produces it, the server sums, and the worker
// pulls the new value. `distributed_replicated` keeps a copy on every worker and the
// parameter-server copies go round-robin over the servers; gradients cross the network the same
// way, per GPU. tf-replicated, `replicated` with --all_reduce_spec=nccl: each variable's gradient
// is allreduced across the node's GPUs as it is produced, no fusion.

#include <fmt/format.h>
#include <algorithm>
#include <numeric>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

std::vector<CommGroup> per_tensor(const JobInfo& job, const networks::PsOptions& ps) {
  std::vector<CommGroup> g(job.gradient_bytes.size());
  for (std::size_t t = 0; t < g.size(); ++t) {
    g[t].tensors = {static_cast<int>(t)};
    g[t].bytes = job.gradient_bytes[t];
    g[t].ps = ps;
    g[t].ps.tensors = {job.gradient_bytes[t]};
  }
  return g;
}

class TfParameterServer : public FrameworkPolicy {
 public:
  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo& job) const override {
    const std::string name = "tf-ps";
    refuse(o.fusion_threshold.has_value(), "--fusion-threshold", name);
    refuse(o.cycle_time.has_value(), "--cycle-time", name);
    refuse(o.bucket_cap.has_value(), "--bucket-cap", name);
    refuse(o.first_bucket.has_value(), "--first-bucket", name);
    ResolvedPolicy p;
    p.params.mode = o.mode.value_or("parameter_server");
    if (*p.params.mode != "parameter_server" && *p.params.mode != "distributed_replicated") {
      fail_at({}, "--mode",
              fmt::format("unknown tf-ps mode '{}' (parameter_server, distributed_replicated)",
                          *p.params.mode));
    }
    p.strategy = strategy.value_or("ps");
    // One server per worker node, on the workers' hosts, summing on the CPU: the setup of the
    // TensorFlow benchmarks' distributed runs (and of one machine with
    // --local_parameter_device=cpu).
    p.ps = ps_options(o, job.nodes);
    p.ps.sharding = "round_robin";
    p.settings["mode"] = *p.params.mode;
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
    if (*p.params.mode == "parameter_server") {
      // Greedy: largest variable first onto the least-loaded server.
      std::vector<std::size_t> order(groups.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) {
        return job.gradient_bytes[a] > job.gradient_bytes[b];
      });
      std::vector<double> load(servers, 0.0);
      for (auto t : order) {
        const auto s =
            static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        load[s] += job.gradient_bytes[t];
        groups[t].ps.server_offset = static_cast<int>(s);
      }
    } else {
      for (std::size_t t = 0; t < groups.size(); ++t) {
        groups[t].ps.server_offset = static_cast<int>(t % servers);
      }
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
    refuse(o.fusion_threshold.has_value(), "--fusion-threshold", name);
    refuse(o.cycle_time.has_value(), "--cycle-time", name);
    refuse(o.bucket_cap.has_value(), "--bucket-cap", name);
    refuse(o.first_bucket.has_value(), "--first-bucket", name);
    refuse(o.mode.has_value(), "--mode", name);
    if (job.nodes > 1) {
      fail_at({}, "--framework",
              fmt::format("tf-replicated runs inside one node, but the job spans {} nodes "
                          "(use tf-ps with --mode distributed_replicated, or horovod)",
                          job.nodes));
    }
    ResolvedPolicy p;
    p.strategy = strategy.value_or("ring");
    p.ps = ps_options(o, 1);
    p.description =
        fmt::format("tf-replicated: NCCL {} allreduce per variable inside the node", p.strategy);
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    return std::make_unique<PerTensorLauncher>(per_tensor(job, p.ps));
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
