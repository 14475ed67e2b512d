// PyTorch DistributedDataParallel (Li et al. 2020, "PyTorch Distributed", VLDB): gradients are
// assigned to buckets in reverse parameter order (a small first bucket, then bucket_cap each);
// autograd hooks copy each gradient into its bucket, and a bucket's allreduce is launched once
// all its gradients are in and every earlier bucket has been launched, overlapping the rest of
// backward; results are copied back to the gradients (gradient_as_bucket_view=False, the
// default). With --compression fp16, the communication hook fp16_compress_hook (PyTorch 1.8 on,
// torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py) casts each bucket to float16 and
// divides it by the world size before the allreduce and casts the result back into the bucket.
// Defaults and sources: docs/simulator.md, "pytorch-ddp".

#include <fmt/format.h>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

class DdpLauncher : public GradientLauncher {
 public:
  DdpLauncher(const JobInfo& job, const networks::PsOptions& ps, double first, double cap,
              bool fp16) {
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
      auto& g = buckets_[b];
      missing_[b] = static_cast<int>(g.tensors.size());
      g.copy_in = g.copy_out = g.copies_on_compute = true;
      if (fp16 && job.gpus > 1) {
        // The hook, on the bucket of e elements of w bytes: buffer.to(float16) reads w e and
        // writes 2 e (no kernel where w = 2), div_ reads and writes 2 e, and the result is
        // copied back into the bucket (2 e read, w e written); 2 e bytes travel.
        double elems = 0;
        for (int t : g.tensors)
          elems += static_cast<double>(job.gradient_elems[static_cast<std::size_t>(t)]);
        const double wide = elems > 0 ? g.bytes / elems : 2.0;
        g.buffer_bytes = g.bytes;
        g.bytes = 2 * elems;
        if (wide > 2) g.kernels_in.push_back((wide + 2) * elems);
        g.kernels_in.push_back(4 * elems);
        g.kernels_out.push_back((wide + 2) * elems);
      }
      g.ps = ps;
      g.ps.tensors = {g.bytes};
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
    refuse_unless_taken(o, {"compression", "bucket_cap", "first_bucket", "ps_device"}, name);
    ResolvedPolicy p;
    p.strategy = strategy.value_or("auto");
    p.ps = ps_options(o, 1);
    p.params.bucket_cap = o.bucket_cap.value_or(Bytes(25 * kMiB));
    p.params.first_bucket = o.first_bucket.value_or(Bytes(1 * kMiB));
    if (p.params.bucket_cap->value() <= 0) fail_at({}, "bucket_cap", "must be positive");
    if (p.params.first_bucket->value() <= 0) fail_at({}, "first_bucket", "must be positive");
    p.settings["bucket_cap"] = format_bytes(*p.params.bucket_cap);
    p.settings["first_bucket"] = format_bytes(*p.params.first_bucket);
    p.description = fmt::format("pytorch-ddp: buckets of {} (first {}), {} allreduce in order",
                                format_bytes(*p.params.bucket_cap),
                                format_bytes(*p.params.first_bucket), p.strategy);
    apply_compression(o, p, false);
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    return std::make_unique<DdpLauncher>(job, p.ps, p.params.first_bucket->value(),
                                         p.params.bucket_cap->value(), compresses_fp16(p));
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
