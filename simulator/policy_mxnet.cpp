// MXNet KVStore (Chen et al. 2015; Li et al. 2014): `device` sums each array's gradients on the
// node's GPUs; `dist_sync` pushes each array to the servers and pulls it back every step. Arrays
// of at least MXNET_KVSTORE_BIGARRAY_BOUND elements (1,000,000) are split evenly over all
// servers; a smaller one lives whole on server (key x 9973) mod S. Defaults and sources:
// docs/simulator.md, "mxnet-kvstore".

#include <fmt/format.h>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

constexpr std::int64_t kBigArrayBound = 1'000'000;

class MxnetKvstore : public FrameworkPolicy {
 public:
  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo& job) const override {
    const std::string name = "mxnet-kvstore";
    refuse_unless_taken(o, {"mode", "ps_device"}, name);
    ResolvedPolicy p;
    p.params.mode = o.mode.value_or(job.nodes > 1 ? "dist_sync" : "device");
    const auto& mode = *p.params.mode;
    if (mode != "device" && mode != "dist_sync") {
      fail_at({}, "mode", fmt::format("unknown mxnet-kvstore mode '{}' (device, dist_sync)", mode));
    }
    if (mode == "device" && job.nodes > 1) {
      fail_at({}, "mode",
              fmt::format("kvstore 'device' runs inside one node, but the job spans {} nodes "
                          "(use dist_sync)",
                          job.nodes));
    }
    if (mode == "device") {
      refuse(o.ps_servers.has_value(), "ps_servers", "mxnet-kvstore device");
      p.strategy = strategy.value_or("auto");
    } else {
      p.strategy = strategy.value_or("ps");
    }
    // The launcher starts as many servers as workers (tools/launch.py: -s defaults to -n), on
    // the workers' machines.
    p.ps = ps_options(o, job.nodes);
    // dist_sync (CommCPU) copies every GPU's gradient to pinned host memory and sums it there
    // before the push (kvstore_dist.h Push_, comm.h CommCPU::Reduce).
    p.ps.aggregation = networks::PsAggregation::kHost;
    p.settings["mode"] = mode;
    if (mode == "dist_sync") p.settings["ps_servers"] = std::to_string(p.ps.servers);
    p.description =
        mode == "device"
            ? fmt::format("mxnet-kvstore device: {} allreduce per array on the GPUs", p.strategy)
            : fmt::format(
                  "mxnet-kvstore dist_sync: {} {} server(s), arrays of 1M+ elements "
                  "split over all, {} per array",
                  p.ps.servers, p.ps.colocated ? "colocated" : "dedicated", p.strategy);
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    std::vector<CommGroup> groups(job.gradient_bytes.size());
    for (std::size_t t = 0; t < groups.size(); ++t) {
      auto& g = groups[t];
      g.tensors = {static_cast<int>(t)};
      g.bytes = job.gradient_bytes[t];
      g.ps = p.ps;
      g.ps.tensors = {g.bytes};
      // Keys are numbered in parameter order, the reverse of backward order.
      const auto key = static_cast<std::int64_t>(groups.size() - 1 - t);
      g.ps.variable = static_cast<int>(key);
      if (job.gradient_elems[t] >= kBigArrayBound) {
        g.ps.sharding = "split";
      } else {
        g.ps.sharding = "round_robin";
        g.ps.server_offset = static_cast<int>((key * 9973) % p.ps.servers);
      }
    }
    return std::make_unique<PerTensorLauncher>(std::move(groups));
  }

  Bytes buffer_bytes(const ResolvedPolicy&, const JobInfo&) const override { return Bytes(0); }
};

}  // namespace

void register_mxnet(FrameworkRegistry& r) {
  r.add("mxnet-kvstore", "MXNet KVStore: device (GPU reduce) or dist_sync (parameter servers)",
        [] { return std::make_unique<MxnetKvstore>(); });
}

}  // namespace dlsim::simulator
