#include "simulator/framework.hpp"

#include <fmt/format.h>

#include <algorithm>

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

std::optional<Negotiation> parse_negotiation(const std::string& text) {
  if (text == "cache") return Negotiation::kCache;
  if (text == "gather") return Negotiation::kGather;
  return std::nullopt;
}

std::string to_string(Negotiation n) { return n == Negotiation::kGather ? "gather" : "cache"; }

std::optional<GradientCompression> parse_gradient_compression(const std::string& text) {
  if (text == "none") return GradientCompression::kNone;
  if (text == "fp16") return GradientCompression::kFp16;
  return std::nullopt;
}

std::string to_string(GradientCompression c) {
  return c == GradientCompression::kFp16 ? "fp16" : "none";
}

void apply_compression(const FrameworkOptions& o, ResolvedPolicy& p, bool per_tensor) {
  const auto c = o.compression.value_or(GradientCompression::kNone);
  p.params.compression = c;
  p.settings["compression"] = to_string(c);
  p.compress_per_tensor = per_tensor && c == GradientCompression::kFp16;
  if (c == GradientCompression::kFp16) {
    p.description += per_tensor ? ", gradients cast to fp16 for the exchange"
                                : ", fp16_compress_hook: each bucket cast to fp16 for the exchange";
  }
}

bool compresses_fp16(const ResolvedPolicy& p) {
  return p.params.compression == GradientCompression::kFp16;
}

void refuse(bool given, const std::string& field, const std::string& framework) {
  if (given) fail_at({}, field, "does not apply to framework '" + framework + "'");
}

std::vector<std::pair<std::string_view, bool>> settings_given(const FrameworkOptions& o) {
  return {
      {"fusion_threshold", o.fusion_threshold.has_value()},
      {"cycle_time", o.cycle_time.has_value()},
      {"negotiation", o.negotiation.has_value()},
      {"cache_capacity", o.cache_capacity.has_value()},
      {"compression", o.compression.has_value()},
      {"bucket_cap", o.bucket_cap.has_value()},
      {"first_bucket", o.first_bucket.has_value()},
      {"partition", o.partition_bytes.has_value()},
      {"mode", o.mode.has_value()},
      {"xla", o.xla},
      {"host_staging", o.host_staging},
      {"ps_device", o.ps_on_gpu.has_value()},
  };
}

void refuse_unless_taken(const FrameworkOptions& o, std::initializer_list<std::string_view> takes,
                         const std::string& framework) {
  for (const auto& [field, is_given] : settings_given(o)) {
    if (std::find(takes.begin(), takes.end(), field) == takes.end()) {
      refuse(is_given, std::string(field), framework);
    }
  }
}

}  // namespace dlsim::simulator
