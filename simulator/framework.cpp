#include "simulator/framework.hpp"

#include <fmt/format.h>

#include "common/cli.hpp"
#include "common/error.hpp"

namespace dlsim::simulator {

namespace {

int parse_count(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || used == 0) {
    fail_at({}, flag, fmt::format("expected an integer, got '{}'", text));
  }
  if (v < 1) fail_at({}, flag, "must be at least 1");
  return v;
}

}  // namespace

FrameworkOptions parse_framework_flags(const FrameworkFlags& f) {
  FrameworkOptions fw;
  if (!f.fusion_threshold.empty()) {
    fw.fusion_threshold = parse_flag(f.fusion_threshold, "--fusion-threshold", parse_bytes);
  }
  if (!f.cycle_time.empty()) {
    fw.cycle_time = parse_flag(f.cycle_time, "--cycle-time", parse_seconds);
  }
  if (!f.bucket_cap.empty()) fw.bucket_cap = parse_flag(f.bucket_cap, "--bucket-cap", parse_bytes);
  if (!f.first_bucket.empty()) {
    fw.first_bucket = parse_flag(f.first_bucket, "--first-bucket", parse_bytes);
  }
  if (!f.mode.empty()) fw.mode = f.mode;
  if (!f.ps_servers.empty()) fw.ps_servers = parse_count(f.ps_servers, "--ps-servers");
  if (!f.ps_placement.empty()) {
    if (f.ps_placement != "colocated" && f.ps_placement != "dedicated") {
      fail_at({}, "--ps-placement",
              fmt::format("unknown placement '{}' (colocated, dedicated)", f.ps_placement));
    }
    fw.ps_colocated = f.ps_placement == "colocated";
  }
  if (!f.ps_device.empty()) {
    if (f.ps_device != "cpu" && f.ps_device != "gpu") {
      fail_at({}, "--ps-device", fmt::format("unknown device '{}' (cpu, gpu)", f.ps_device));
    }
    fw.ps_on_gpu = f.ps_device == "gpu";
  }
  return fw;
}

const FrameworkRegistry& framework_policies() {
  static const FrameworkRegistry registry = [] {
    FrameworkRegistry r("framework");
    register_horovod(r);
    register_pytorch_ddp(r);
    register_tensorflow(r);
    register_mxnet(r);
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

void refuse(bool given, const std::string& flag, const std::string& framework) {
  if (given) fail_at({}, flag, "does not apply to framework '" + framework + "'");
}

}  // namespace dlsim::simulator
