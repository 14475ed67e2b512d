#include "simulator/framework_flags.hpp"

#include <fmt/format.h>

#include "common/cli.hpp"
#include "common/error.hpp"

namespace dlsim::simulator {
namespace {

// A size flag that must be positive (zero would mean no bucket or no partition).
template <class Q, class Parse>
Q positive(const std::string& text, const std::string& flag, Parse parse) {
  const Q q = parse_flag(text, flag, parse);
  if (!(q.value() > 0)) fail_at({}, flag, fmt::format("must be positive, got '{}'", text));
  return q;
}

}  // namespace

void add_framework_flags(CLI::App* c, FrameworkFlags& f) {
  c->add_option("--fusion-threshold", f.fusion_threshold,
                "Horovod fusion buffer (e.g. 64MiB; 0B: no fusion)")
      ->type_name("SIZE");
  c->add_option("--cycle-time", f.cycle_time, "Horovod cycle time (e.g. 5ms)")->type_name("TIME");
  c->add_option("--bucket-cap", f.bucket_cap, "DDP bucket size (e.g. 25MiB)")->type_name("SIZE");
  c->add_option("--first-bucket", f.first_bucket, "DDP first bucket size (e.g. 1MiB)")
      ->type_name("SIZE");
  c->add_option("--mode", f.mode,
                "tf-ps: parameter_server | distributed_replicated; tf-replicated: nccl | copy; "
                "mxnet-kvstore: device | dist_sync");
  c->add_option("--ps-servers", f.ps_servers, "Parameter servers")->check(CLI::Range(1, kMaxRanks));
  c->add_option("--ps-placement", f.ps_placement, "colocated (on worker nodes) or dedicated");
  c->add_option("--ps-device", f.ps_device, "Servers sum on the cpu or a gpu");
  c->add_option("--partition", f.partition,
                "byteps: largest partition of a tensor sent to one server (e.g. 4096000B)")
      ->type_name("SIZE");
}

void add_runtime_flags(CLI::App* c, FrameworkFlags& f) {
  c->add_flag("--xla", f.xla,
              "horovod, keras, byteps: TensorFlow with XLA auto-clustering; the gradients leave "
              "the compiled backward pass together, so every exchange starts after it");
  c->add_flag("--host-staging", f.host_staging,
              "horovod, keras with --library mpi: GPU tensors are allreduced in host memory "
              "(Horovod built without HOROVOD_GPU_ALLREDUCE), copied there and back");
  c->add_option("--negotiation", f.negotiation,
                "horovod, keras: how the ranks agree on ready tensors each cycle: cache (the "
                "response cache's bit-vector allreduce, Horovod 0.17 on), gather "
                "(HOROVOD_CACHE_CAPACITY=0, or 0.16: rank 0 gathers the requests and "
                "broadcasts the responses)");
  c->add_option("--cache-capacity", f.cache_capacity,
                "horovod, keras: the response cache's entries (HOROVOD_CACHE_CAPACITY, 1024; "
                "0: no cache, as --negotiation gather)")
      ->check(CLI::Range(0, 1 << 30));
  c->add_option("--compression", f.compression,
                "horovod, keras, byteps: the DistributedOptimizer's compression: none, or fp16 "
                "(Compression.fp16: gradients cast to float16 before the exchange and back "
                "after it, on the compute stream); pytorch-ddp: fp16 is the communication hook "
                "fp16_compress_hook (each bucket cast to float16 and back)");
}

FrameworkOptions parse_framework_flags(const FrameworkFlags& f) {
  FrameworkOptions fw;
  fw.xla = f.xla;
  fw.host_staging = f.host_staging;
  if (!f.fusion_threshold.empty()) {
    fw.fusion_threshold = parse_flag(f.fusion_threshold, "--fusion-threshold", parse_whole_bytes);
  }
  if (!f.cycle_time.empty()) {
    // Zero is Horovod's HOROVOD_CYCLE_TIME=0: its loop does not sleep between cycles.
    fw.cycle_time = parse_flag(f.cycle_time, "--cycle-time", parse_seconds);
  }
  if (!f.bucket_cap.empty()) {
    fw.bucket_cap = positive<Bytes>(f.bucket_cap, "--bucket-cap", parse_whole_bytes);
  }
  if (!f.first_bucket.empty()) {
    fw.first_bucket = positive<Bytes>(f.first_bucket, "--first-bucket", parse_whole_bytes);
  }
  if (!f.mode.empty()) fw.mode = f.mode;
  if (!f.negotiation.empty()) {
    fw.negotiation = parse_negotiation(f.negotiation);
    if (!fw.negotiation) {
      fail_at({}, "--negotiation",
              fmt::format("unknown negotiation '{}' (cache, gather)", f.negotiation));
    }
  }
  if (!f.compression.empty()) {
    fw.compression = parse_gradient_compression(f.compression);
    if (!fw.compression) {
      fail_at({}, "--compression",
              fmt::format("unknown compression '{}' (none, fp16)", f.compression));
    }
  }
  if (!f.partition.empty()) {
    fw.partition_bytes = positive<Bytes>(f.partition, "--partition", parse_whole_bytes);
  }
  fw.ps_servers = f.ps_servers;
  fw.cache_capacity = f.cache_capacity;
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

}  // namespace dlsim::simulator
