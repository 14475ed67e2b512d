// Horovod (Sergeev & Del Balso 2018): a background thread wakes every cycle time, the ranks
// agree on which tensors all of them have ready (negotiation; since 0.17 a bit-vector allreduce
// over the response cache), the agreed tensors are packed into fusion buffers of at most the
// fusion threshold, and each buffer is copied in, allreduced with NCCL and copied out
// (MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER in Horovod's timeline).
// `keras` is Horovod under tf.keras (horovod.tensorflow.keras): the same policy and defaults.
// With TensorFlow's XLA auto-clustering (`xla`) every exchange waits for the backward pass.
// Defaults and sources: docs/simulator.md, "horovod".

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "simulator/framework.hpp"

namespace dlsim::simulator {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Bytes on the wire of Horovod's negotiation messages (flatbuffers tables of
// horovod/common/wire/message.fbs, 0.16-0.19): a Request about 64 bytes besides its tensor's
// name, a Response about 48 bytes and 16 per tensor besides the names. Horovod names a tensor
// after its framework's (horovod.torch: "allreduce." + the parameter's name).
constexpr double kRequestBytes = 64, kResponseBytes = 48, kResponsePerTensor = 16;
constexpr double kNamePrefix = 10;  // "allreduce."

class HorovodLauncher : public GradientLauncher {
 public:
  HorovodLauncher(const JobInfo& job, networks::PsOptions ps, double threshold, Time cycle,
                  Negotiation negotiation, int capacity)
      : job_(job),
        ps_(std::move(ps)),
        threshold_(threshold),
        cycle_(cycle),
        negotiation_(negotiation),
        capacity_(capacity) {}

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
    if (job_.gpus > 1) out.front().negotiate = negotiation(out);
    waiting_.clear();
    return out;
  }

 private:
  // This cycle's agreement on the tensors `waiting_` (docs/simulator.md, "horovod").
  Seconds negotiation(const std::vector<CommGroup>& responses) const {
    if (negotiation_ == Negotiation::kCache) {
      // One bit per entry of the response cache, allreduced once per cycle. The cache evicts
      // its least recently used entry (horovod/common/response_cache.cc): with more tensors
      // than entries, each step's tensors, ready in the same order, have all been evicted by
      // the time they come back, so every one misses and is also coordinated through rank 0.
      const auto tensors = job_.gradient_bytes.size();
      const auto bits = static_cast<double>(std::min<std::size_t>(tensors, capacity_));
      const Seconds bit_vector = job_.small_allreduce(Bytes(std::ceil(bits / 8)));
      if (tensors <= static_cast<std::size_t>(capacity_)) return bit_vector;
      return bit_vector + coordinated(responses);
    }
    return coordinated(responses);
  }
  // The requests of `waiting_` gathered at rank 0 and its responses broadcast.
  Seconds coordinated(const std::vector<CommGroup>& responses) const {
    double names = 0;
    for (int t : waiting_) names += kNamePrefix + name_bytes(t);
    const auto k = static_cast<double>(waiting_.size());
    const double requests = k * kRequestBytes + names;
    const double response =
        static_cast<double>(responses.size()) * kResponseBytes + k * kResponsePerTensor + names;
    const double p = job_.gpus;
    const double rounds = std::ceil(std::log2(p));
    // Rank 0 as coordinator (horovod/common/mpi/mpi_controller.cc of v0.19.0, operations.cc of
    // v0.16.0; from 0.17 with HOROVOD_CACHE_CAPACITY=0): MPI_Gather of each
    // rank's message length, MPI_Gatherv of the requests, MPI_Bcast of the response list's
    // length and of the list. A binomial gather of m bytes from each rank takes the tree's
    // rounds of latency and (p - 1) m bytes into rank 0: a binomial broadcast of
    // (p - 1) m / rounds.
    const auto gather = [&](double m) { return job_.small_broadcast(Bytes((p - 1) * m / rounds)); };
    return gather(4) + gather(requests) + job_.small_broadcast(Bytes(4)) +
           job_.small_broadcast(Bytes(response));
  }
  double name_bytes(int t) const {
    const auto i = static_cast<std::size_t>(t);
    return i < job_.gradient_names.size() ? static_cast<double>(job_.gradient_names[i].size())
                                          : 0.0;
  }

  const JobInfo& job_;
  networks::PsOptions ps_;
  double threshold_;
  Time cycle_;
  Negotiation negotiation_;
  int capacity_;
  std::vector<int> waiting_;
};

class Horovod : public FrameworkPolicy {
 public:
  explicit Horovod(std::string name) : name_(std::move(name)) {}

  ResolvedPolicy resolve(const FrameworkOptions& o, const std::optional<std::string>& strategy,
                         const JobInfo&) const override {
    refuse_unless_taken(o,
                        {"fusion_threshold", "cycle_time", "negotiation", "cache_capacity",
                         "compression", "xla", "host_staging", "ps_device"},
                        name_);
    ResolvedPolicy p;
    p.strategy = strategy.value_or("auto");
    p.ps = ps_options(o, 1);
    const Bytes threshold = o.fusion_threshold.value_or(Bytes(128 * kMiB));
    const Seconds cycle = o.cycle_time.value_or(Seconds(1e-3));
    if (cycle.value() < 0) fail_at({}, "cycle_time", "must be zero or positive");
    // HOROVOD_CACHE_CAPACITY (horovod/common/global_state.h: 1024); 0 turns the cache off.
    const int capacity = o.cache_capacity.value_or(1024);
    if (capacity < 0) fail_at({}, "cache_capacity", "must be zero or positive");
    if (capacity == 0 && o.negotiation == Negotiation::kCache) {
      fail_at({}, "cache_capacity", "0 turns the response cache off: --negotiation gather");
    }
    if (capacity > 0 && o.cache_capacity && o.negotiation == Negotiation::kGather) {
      fail_at({}, "cache_capacity",
              fmt::format("{} entries of a response cache that gather negotiation does not have "
                          "(it stands for HOROVOD_CACHE_CAPACITY=0)",
                          capacity));
    }
    p.params.negotiation =
        capacity == 0 ? Negotiation::kGather : o.negotiation.value_or(Negotiation::kCache);
    p.settings["negotiation"] = to_string(*p.params.negotiation);
    if (*p.params.negotiation == Negotiation::kCache) {
      p.params.cache_capacity = capacity;
      p.settings["cache_capacity"] = std::to_string(capacity);
    }
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
    if (*p.params.negotiation == Negotiation::kGather) {
      p.description += ", negotiation by rank 0's gather and broadcast (no response cache)";
    }
    apply_xla(o, name_, p);
    apply_compression(o, p, true);
    if (o.host_staging) {
      p.params.host_staging = true;
      p.settings["host_staging"] = "on";
      p.description += ", allreduce in host memory";
    }
    return p;
  }

  std::unique_ptr<GradientLauncher> launcher(const ResolvedPolicy& p,
                                             const JobInfo& job) const override {
    return std::make_unique<HorovodLauncher>(
        job, p.ps, p.params.fusion_threshold->value(), to_time(p.params.cycle_time->value()),
        p.params.negotiation.value_or(Negotiation::kCache), p.params.cache_capacity.value_or(1024));
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
