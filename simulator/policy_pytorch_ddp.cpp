// PyTorch DistributedDataParallel (Li et al. 2020, "PyTorch Distributed", VLDB): gradients are
// assigned to buckets in reverse parameter order (a small first bucket, then bucket_cap each);
// autograd hooks copy each gradient into its bucket, and a bucket's allreduce is launched once
// all its gradients are in and every earlier bucket has been launched, overlapping the rest of
// backward; results are copied back to the gradients (gradient_as_bucket_view=False, the
// default). Defaults and sources: docs/simulator.md, "pytorch-ddp".

#include <fmt/format.h>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

class DdpLauncher : public GradientLauncher {
 public:
  DdpLauncher(const JobInfo& job, const networks::PsOptions& ps, double first, double cap) {
    // Backward order is reverse parameter order: the first-filled bucket closes when it
    // reaches `first` bytes, later ones at `cap` (a tensor never splits).
    double limit = first;
    for (std::size_t t = 0; t < job.gradient_bytes.size(); ++t) {
      if (buckets_.empty() || buckets_.back().bytes >= limit) {
        if (!buckets_.empty()) limit = cap;
        buckets_.emplace_back();
      }
      buckets_.back().tensors.push_back(static_cast<int>(t));
      buckets_.back().bytes += job.gradient_bytes[t];
      bucket_of_.push_back(static_cast<int>(buckets_.size()) - 1);
    }
    missing_.resize(buckets_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      missing_[b] = static_cast<int>(buckets_[b].tensors.size());
      buckets_[b].copy_in = buckets_[b].copy_out = buckets_[b].copies_on_compute = true;
      buckets_[b].ps = ps;
      buckets_[b].ps.tensors = {buckets_[b].bytes};
    }
  }

  std::vector<CommGroup> ready(int t, Time) override {
    --missing_[static_cast<std::size_t>(bucket_of_[static_cast<std::size_t>(t)])];
    std::vector<CommGroup> out;
    while (next_ < buckets_.size() && missing_[next_] == 0) out.push_back(buckets_[next_++]);
    return out;
  }

 private:
  std::vector<CommGroup> buckets_;
  std::vector<int> bucket_of_;
  std::vector<int> missing_;
  std::size_t next_ = 0;
};

class PytorchDdp : public FrameworkPolicy {
 public:
  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo&) const override {
    const std::string name = "pytorch-ddp";
    refuse(o.fusion_threshold.has_value(), "--fusion-threshold", name);
    refuse(o.cycle_time.has_value(), "--cycle-time", name);
    refuse(o.negotiation.has_value(), "--negotiation", name);
    refuse(o.compression.has_value(), "--compression", name);
    refuse(o.mode.has_value(), "--mode", name);
    refuse(o.partition_bytes.has_value(), "--partition", name);
    refuse(o.xla, "--xla", name);
    refuse(o.host_staging, "--host-staging", name);
    ResolvedPolicy p;
    p.strategy = strategy.value_or("auto");
    p.ps = ps_options(o, 1);
    p.params.bucket_cap = o.bucket_cap.value_or(Bytes(25 * kMiB));
    p.params.first_bucket = o.first_bucket.value_or(Bytes(1 * kMiB));
    if (p.params.bucket_cap->value() <= 0) fail_at({}, "--bucket-cap", "must be positive");
    if (p.params.first_bucket->value() <= 0) fail_at({}, "--first-bucket", "must be positive");
    p.settings["bucket_cap"] = format_bytes(*p.params.bucket_cap);
    p.settings["first_bucket"] = format_bytes(*p.params.first_bucket);
    p.description = fmt::format("pytorch-ddp: buckets of {} (first {}), {} allreduce in order",
                                format_bytes(*p.params.bucket_cap),
                                format_bytes(*p.params.first_bucket), p.strategy);
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    return std::make_unique<DdpLauncher>(job, p.ps, p.params.first_bucket->value(),
                                         p.params.bucket_cap->value());
  }

  // The flat buckets hold a copy of every gradient.
  Bytes buffer_bytes(const ResolvedPolicy&, const JobInfo& job) const override {
    double b = 0;
    for (double g : job.gradient_bytes) b += g;
    return Bytes(b);
  }
};

}  // namespace

void register_pytorch_ddp(FrameworkRegistry& r) {
  r.add("pytorch-ddp", "PyTorch DDP: 25 MiB gradient buckets allreduced in order (Li et al. 2020)",
        [] { return std::make_unique<PytorchDdp>(); });
}

}  // namespace dlsim::simulator
