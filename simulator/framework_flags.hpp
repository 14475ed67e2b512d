#pragma once
// The framework flags of the command line, shared by dlsim predict/scale/compare and dlvalidate
// replay: declared once (add_framework_flags) and parsed once (parse_framework_flags) into the
// typed FrameworkOptions the policies take.

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "simulator/framework.hpp"

namespace dlsim::simulator {

// As given (empty or nullopt: not given). Sizes and times stay text until parsed with their unit.
struct FrameworkFlags {
  std::string fusion_threshold, cycle_time, bucket_cap, first_bucket, mode, ps_placement, ps_device,
      partition, negotiation, compression;
  std::optional<int> ps_servers;
  std::optional<int> cache_capacity;
  bool xla = false;
  bool host_staging = false;
};

// Declares the flags on `command`.
void add_framework_flags(CLI::App* command, FrameworkFlags& flags);

// Declares --xla (TensorFlow's XLA auto-clustering), --host-staging (Horovod's allreduce of GPU
// tensors in host memory), --negotiation (Horovod's controller) and --compression (the optimizer
// wrapper's fp16 casts) on a command that predicts a framework's step; the replay, which runs its
// own exchange, declares none of them.
void add_runtime_flags(CLI::App* command, FrameworkFlags& flags);

// A bad value is an InputError naming its flag (--fusion-threshold, ...).
FrameworkOptions parse_framework_flags(const FrameworkFlags& flags);

}  // namespace dlsim::simulator
