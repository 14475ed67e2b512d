#include "simulator/framework.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace dlsim::simulator {

const FrameworkRegistry& framework_policies() {
  static const FrameworkRegistry registry = [] {
    FrameworkRegistry r("framework");
    register_horovod(r);
    register_pytorch_ddp(r);
    register_tensorflow(r);
    register_mxnet(r);
    register_byteps(r);
    return r;
  }();
  return registry;
}

networks::PsOptions ps_options(const FrameworkOptions& o, int servers) {
  networks::PsOptions ps;
  ps.servers = o.ps_servers.value_or(servers);
  ps.colocated = o.ps_colocated.value_or(true);
  ps.on_gpu = o.ps_on_gpu.value_or(false);
  return ps;
}

void apply_xla(const FrameworkOptions& o, const std::string& framework, ResolvedPolicy& p) {
  if (!o.xla) return;
  // XLA compiles the backward pass into clusters that the framework's custom ops cannot join; a
  // cluster's outputs exist only once the whole cluster has run, so the framework is told of
  // the gradients together, at the end of backward (horovod/horovod#1673, #1283;
  // docs/simulator.md, "XLA").
  p.params.xla = true;
  p.settings["xla"] = "on";
  p.description += ", XLA auto-clustering";
  p.after_backward = fmt::format(
      "XLA compiles the backward pass into clusters, whose gradients {} receives only when the "
      "cluster has run",
      framework);
}

void apply_compression(const FrameworkOptions& o, ResolvedPolicy& p, bool per_tensor) {
  const std::string c = o.compression.value_or("none");
  if (c != "none" && c != "fp16") {
    fail_at({}, "--compression", fmt::format("unknown compression '{}' (none, fp16)", c));
  }
  p.params.compression = c;
  p.settings["compression"] = c;
  p.compress_per_tensor = per_tensor && c == "fp16";
  if (c == "fp16") {
    p.description += per_tensor ? ", gradients cast to fp16 for the exchange"
                                : ", fp16_compress_hook: each bucket cast to fp16 for the exchange";
  }
}

bool compresses_fp16(const ResolvedPolicy& p) { return p.params.compression == "fp16"; }

void refuse(bool given, const std::string& flag, const std::string& framework) {
  if (given) fail_at({}, flag, "does not apply to framework '" + framework + "'");
}

}  // namespace dlsim::simulator
