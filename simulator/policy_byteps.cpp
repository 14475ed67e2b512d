// BytePS (Jiang et al., "A Unified Architecture for Accelerating Distributed DNN Training in
// Heterogeneous GPU/CPU Clusters", OSDI 2020; github.com/bytedance/byteps, docs/env.md): each
// gradient is first summed over the node's GPUs, cut into partitions of at most
// BYTEPS_PARTITION_BYTES (4,096,000 by default), and every partition is pushed to one server
// and pulled back as soon as it is ready; servers sum on the host CPU. Servers run on their own
// hosts by default (the paper's "CPU machines"), one per worker node unless told otherwise.
// Defaults and sources: docs/simulator.md, "byteps".

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

// Partitions of one tensor BytePS can key: the low 16 bits of a key (operations.cc).
constexpr std::int64_t kMaxPartitionsPerTensor = 1 << 16;
// BytePS's default partition size (BYTEPS_PARTITION_BYTES, docs/env.md).
constexpr double kDefaultPartition = 4'096'000;

class Byteps : public FrameworkPolicy {
 public:
  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo& job) const override {
    const std::string name = "byteps";
    refuse_unless_taken(o, {"compression", "partition", "xla"}, name);
    if (strategy && *strategy != "ps") {
      fail_at({}, "strategy",
              fmt::format("byteps exchanges through parameter servers only, not '{}'", *strategy));
    }
    ResolvedPolicy p;
    p.params = o;
    const double partition = o.partition_bytes ? o.partition_bytes->value() : kDefaultPartition;
    p.params.partition_bytes = Bytes(partition);
    p.settings["partition"] = fmt::format("{:.0f} B", partition);
    // A partition's key is (declared tensor << 16) + its index (operations.cc): BytePS cuts a
    // tensor into at most 65,536 partitions, so a smaller partition is no BytePS setting.
    for (std::size_t t = 0; t < job.gradient_bytes.size(); ++t) {
      const double count = std::ceil(job.gradient_bytes[t] / partition);
      if (count > static_cast<double>(kMaxPartitionsPerTensor)) {
        fail_at(
            {}, "partition",
            fmt::format("{:.0f} B cuts gradient '{}' ({:.0f} B) into {:.0f} partitions; a "
                        "BytePS key holds at most {} per tensor (key = tensor << 16 | "
                        "partition), so the partition must be at least {:.0f} B",
                        partition,
                        t < job.gradient_names.size() ? job.gradient_names[t] : std::to_string(t),
                        job.gradient_bytes[t], count, kMaxPartitionsPerTensor,
                        std::ceil(job.gradient_bytes[t] / kMaxPartitionsPerTensor)));
      }
    }
    if (job.nodes == 1) {
      // One worker machine is not distributed: BytePS sums each partition with NCCL inside the
      // node and never contacts a server (BytePSGlobal::IsDistributed() is false).
      refuse(o.ps_servers.has_value(), "ps_servers", "byteps on one node (no servers used)");
      refuse(o.ps_colocated.has_value(), "ps_placement", "byteps on one node (no servers used)");
      p.strategy = "auto";
      p.description = fmt::format(
          "byteps on one node: partitions of {:.0f} B summed with the library's allreduce "
          "inside the node, no parameter server",
          partition);
      apply_xla(o, name, p);
      apply_compression(o, p, true);
      return p;
    }
    p.strategy = "ps";
    p.ps = ps_options(o, job.nodes);
    p.ps.colocated = o.ps_colocated.value_or(false);
    // The node's GPUs sum a partition before one push and copy it to host memory; the pulled
    // partition is copied back and spread to every GPU. Both with NCCL: reduce-scatter and
    // all-gather across the machine's GPUs (a BytePS author, bytedance/byteps#87: "Within a
    // worker, we use ReduceScatter + AllGather").
    p.ps.aggregation = networks::PsAggregation::kGpu;
    p.ps.library_in_node = true;
    // ps-lite: one ZeroMQ connection per worker and server, messages in order.
    p.ps.ordered = true;
    // ps-lite's ZeroMQ van: each process receives through one socket (zeromq/libzmq#3525).
    p.ps.shared_receive = true;
    p.settings["ps_servers"] = std::to_string(p.ps.servers);
    p.settings["ps_placement"] = p.ps.colocated ? "colocated" : "dedicated";
    p.description = fmt::format(
        "byteps: sum inside the node, partitions of {:.0f} B spread over {} {} server(s), each "
        "pushed and pulled when ready",
        partition, p.ps.servers, p.ps.colocated ? "colocated" : "dedicated");
    apply_xla(o, name, p);
    apply_compression(o, p, true);
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    return std::make_unique<Launcher>(p, job);
  }

  Bytes buffer_bytes(const ResolvedPolicy&, const JobInfo&) const override { return Bytes(0); }

 private:
  // Where BytePS sends each partition (docs/simulator.md, "byteps"): byteps.torch's
  // DistributedOptimizer declares "Gradient." + name for every parameter in sorted name order
  // (byteps/torch/__init__.py), each declaration takes the next key (BytePSGlobal::
  // GetOrInitBPSContext), partition i of declared tensor d has key (d << 16) + i
  // (operations.cc), and the key goes to server djb2(decimal key) mod k (BytePSGlobal::
  // EncodeDefaultKey; BYTEPS_KEY_HASH_FN's default since bytedance/byteps#140, v0.2).
  class Launcher : public GradientLauncher {
   public:
    Launcher(const ResolvedPolicy& p, const JobInfo& job) {
      const double part = p.params.partition_bytes->value();
      const std::size_t n = job.gradient_bytes.size();
      std::vector<std::size_t> order(n);
      for (std::size_t i = 0; i < n; ++i) order[i] = i;
      if (job.gradient_names.size() == n) {
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
          return job.gradient_names[a] < job.gradient_names[b];
        });
      }
      std::vector<std::uint64_t> declared(n, 0);
      for (std::size_t d = 0; d < n; ++d) declared[order[d]] = d;
      groups_.resize(n);
      for (std::size_t t = 0; t < n; ++t) {
        const double bytes = job.gradient_bytes[t];
        const std::int64_t count = partitions(bytes, part);
        for (std::int64_t k = 0; k < count; ++k) {
          CommGroup g;
          g.tensors = k == 0 ? std::vector<int>{static_cast<int>(t)} : std::vector<int>{};
          g.bytes = std::min(part, bytes - static_cast<double>(k) * part);
          g.ps = p.ps;
          g.ps.sharding = "round_robin";
          g.ps.tensors = {g.bytes};
          const std::uint64_t key = (declared[t] << 16) + static_cast<std::uint64_t>(k);
          g.ps.variable = static_cast<int>(key & 0x7fffffffU);
          g.ps.server_offset =
              static_cast<int>(byteps_key_hash(key) % static_cast<std::uint64_t>(p.ps.servers));
          groups_[t].push_back(std::move(g));
        }
      }
    }
    std::vector<CommGroup> ready(int t, Time) override {
      return groups_[static_cast<std::size_t>(t)];
    }

   private:
    static std::int64_t partitions(double bytes, double part) {
      return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(bytes / part)));
    }
    std::vector<std::vector<CommGroup>> groups_;
  };
};

}  // namespace

void register_byteps(FrameworkRegistry& r) {
  r.add("byteps",
        "BytePS: node-local sum, partitions pushed to and pulled from CPU parameter servers",
        [] { return std::make_unique<Byteps>(); });
}

std::uint64_t byteps_key_hash(std::uint64_t key) {
  std::uint64_t hash = 5381;
  for (const char c : std::to_string(key))
    hash = (hash << 5) + hash + static_cast<unsigned char>(c);
  return hash;
}

}  // namespace dlsim::simulator
