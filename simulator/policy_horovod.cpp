// Horovod (Sergeev & Del Balso 2018): a background thread wakes every cycle time, the ranks
// agree on which tensors all of them have ready (negotiation; since 0.17 a bit-vector allreduce
// over the response cache), the agreed tensors are packed into fusion buffers of at most the
// fusion threshold, and each buffer is copied in, allreduced with NCCL and copied out
// (MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER in Horovod's timeline).
// `keras` is Horovod under tf.keras (horovod.tensorflow.keras): the same policy and defaults.
// With TensorFlow's XLA auto-clustering (`xla`) every exchange waits for the backward pass.
// Defaults and sources: docs/simulator.md, "horovod".

#include <fmt/format.h>
#include <cmath>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

class HorovodLauncher : public GradientLauncher {
 public:
  HorovodLauncher(const JobInfo& job, networks::PsOptions ps, double threshold, Time cycle)
      : job_(job), ps_(std::move(ps)), threshold_(threshold), cycle_(cycle) {}

  std::vector<CommGroup> ready(int t, Time) override {
    waiting_.push_back(t);
    return {};
  }
  std::optional<Time> next_tick(Time now) const override {
    if (waiting_.empty()) return std::nullopt;
    // A cycle of zero (HOROVOD_CYCLE_TIME=0): the loop does not sleep, so what is ready is
    // negotiated at once.
    if (cycle_ <= 0) return now;
    return (now / cycle_ + 1) * cycle_;
  }
  std::vector<CommGroup> tick(Time) override {
    std::vector<CommGroup> out;
    if (waiting_.empty()) return out;
    // Tensors go into buffers in the order they became ready; one larger than the threshold
    // travels alone.
    for (int t : waiting_) {
      const double b = job_.gradient_bytes[static_cast<std::size_t>(t)];
      if (out.empty() || out.back().bytes + b > threshold_) out.emplace_back();
      out.back().tensors.push_back(t);
      out.back().bytes += b;
    }
    for (auto& g : out) {
      g.copy_in = g.copy_out = g.tensors.size() > 1;
      g.ps = ps_;
      g.ps.tensors = {g.bytes};
    }
    // One bit per tensor of the response cache, allreduced once per cycle.
    const auto bits = static_cast<double>(job_.gradient_bytes.size());
    out.front().negotiate =
        job_.gpus > 1 ? job_.small_allreduce(Bytes(std::ceil(bits / 8))) : Seconds(0);
    waiting_.clear();
    return out;
  }

 private:
  const JobInfo& job_;
  networks::PsOptions ps_;
  double threshold_;
  Time cycle_;
  std::vector<int> waiting_;
};

class Horovod : public FrameworkPolicy {
 public:
  explicit Horovod(std::string name) : name_(std::move(name)) {}

  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo&) const override {
    refuse(o.bucket_cap.has_value(), "--bucket-cap", name_);
    refuse(o.first_bucket.has_value(), "--first-bucket", name_);
    refuse(o.mode.has_value(), "--mode", name_);
    refuse(o.partition_bytes.has_value(), "--partition", name_);
    ResolvedPolicy p;
    p.strategy = strategy.value_or("auto");
    p.ps = ps_options(o, 1);
    const Bytes threshold = o.fusion_threshold.value_or(Bytes(128 * kMiB));
    const Seconds cycle = o.cycle_time.value_or(Seconds(1e-3));
    if (cycle.value() < 0) fail_at({}, "--cycle-time", "must be zero or positive");
    p.params.fusion_threshold = threshold;
    p.params.cycle_time = cycle;
    p.settings["fusion_threshold"] = format_bytes(threshold);
    p.settings["cycle_time"] = format_seconds(cycle);
    p.description =
        cycle.value() > 0
            ? fmt::format("{}: tensor fusion up to {} every {} cycle, {} allreduce", name_,
                          format_bytes(threshold), format_seconds(cycle), p.strategy)
            : fmt::format(
                  "{}: tensor fusion up to {}, no cycle wait (HOROVOD_CYCLE_TIME=0), {} "
                  "allreduce",
                  name_, format_bytes(threshold), p.strategy);
    apply_xla(o, name_, p);
    if (o.host_staging) {
      p.params.host_staging = true;
      p.settings["host_staging"] = "on";
      p.description += ", allreduce in host memory";
    }
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    return std::make_unique<HorovodLauncher>(job, p.ps, p.params.fusion_threshold->value(),
                                             to_time(p.params.cycle_time->value()));
  }

  Bytes buffer_bytes(const ResolvedPolicy& p, const JobInfo&) const override {
    return *p.params.fusion_threshold;
  }

 private:
  std::string name_;
};

}  // namespace

void register_horovod(FrameworkRegistry& r) {
  r.add("horovod", "Horovod: tensor fusion every cycle, NCCL allreduce (Sergeev & Del Balso 2018)",
        [] { return std::make_unique<Horovod>("horovod"); });
  r.add("keras", "tf.keras with Horovod: the horovod policy and its defaults",
        [] { return std::make_unique<Horovod>("keras"); });
}

}  // namespace dlsim::simulator
