// `dlvalidate replay` (docs/validate.md, "Replay").
//
// The exchange runs on a background thread, as Horovod's and PyTorch DDP's do, while the main
// thread computes the backward pass. The thread drives the framework policy's GradientLauncher
// (simulator/framework.hpp), the same object dlsim's engines drive, so the replay groups
// gradients exactly as the prediction does:
// - a periodic policy (Horovod) wakes every cycle, ANDs every rank's bit vector of ready
//   tensors (Horovod's response cache: one MPI_Allreduce with MPI_BAND per cycle), hands the
//   newly ready tensors to the launcher in backward order and runs the groups its tick returns;
// - the others (DDP buckets, one variable at a time for TensorFlow and MXNet) run each group as
//   soon as the launcher returns it; the backward order is the same on every rank, so every
//   rank runs the same collectives in the same order.
// A group whose policy copies into a fusion or bucket buffer is copied in and out for real.
// Strategies: ring (ReplayComm::ring_allreduce) and ps (ReplayComm::ps_exchange, servers
// colocated with the workers, rank s mod N serving shard s, shards sized as networks/algo_ps.cpp
// sizes them).

#include "validate/replay.hpp"
#include "common/json_text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <tuple>

#include "calibrate/driver.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "common/version.hpp"
#include "model/loader.hpp"
#include "simulator/kernel.hpp"
#include "validate/replay_step.hpp"

namespace dlsim::validate {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The per-server sizes of a group (networks::ps_shard_bytes, as the prediction sizes them),
// laid out as contiguous ranges of the group's buffer; server s is rank s mod N.
std::vector<Shard> shards_of(const simulator::CommGroup& g, std::int64_t elements, int ranks) {
  const auto bytes = networks::ps_shard_bytes(g.ps, g.bytes);
  const double total = std::accumulate(bytes.begin(), bytes.end(), 0.0);
  std::vector<Shard> out;
  std::int64_t at = 0;
  double cum = 0;
  for (std::size_t s = 0; s < bytes.size(); ++s) {
    cum += bytes[s];
    const auto end = s + 1 == bytes.size()
                         ? elements
                         : std::min<std::int64_t>(
                               elements, std::llround(cum / total * static_cast<double>(elements)));
    out.push_back({static_cast<int>(s) % ranks, at, end - at});
    at = end;
  }
  return out;
}

// The exchange of one step, on its own thread.
class Exchange {
 public:
  Exchange(ReplayComm& comm, const simulator::FrameworkPolicy& policy,
           const simulator::ResolvedPolicy& resolved, const simulator::JobInfo& job,
           TrainingStep& step, std::vector<float>& fusion)
      : comm_(comm),
        resolved_(resolved),
        step_(step),
        grads_(step.gradients()),
        fusion_(fusion),
        launcher_(policy.launcher(resolved, job)),
        ready_(grads_.size(), 0) {}

  void start() {
    t0_ = Clock::now();
    thread_ = std::thread([this] {
      try {
        run();
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }
  // Gradient g is written (main thread).
  void ready(int g) {
    {
      std::lock_guard lock(mutex_);
      ready_[static_cast<std::size_t>(g)] = 1;
      queue_.push_back(g);
    }
    cv_.notify_one();
  }
  // Waits for the exchange to finish; rethrows its error.
  void join() {
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }
  double bytes_sent() const { return bytes_; }
  int collectives() const { return collectives_; }

 private:
  simulator::Time now() const { return simulator::to_time(seconds_since(t0_)); }

  void run() {
    const std::size_t total = grads_.size();
    if (comm_.size() == 1) return;  // one rank: nothing to exchange (frameworks skip it too)
    const bool periodic = resolved_.params.cycle_time.has_value();
    if (periodic) {
      const double cycle = resolved_.params.cycle_time->value();
      std::vector<char> global(total, 0);
      while (done_ < total) {
        // The next cycle boundary after now (a cycle spent exchanging is not made up for); with
        // a cycle of zero (HOROVOD_CYCLE_TIME=0) the loop does not sleep.
        if (cycle > 0) {
          const double next = (std::floor(seconds_since(t0_) / cycle) + 1) * cycle;
          std::this_thread::sleep_until(t0_ + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(next)));
        }
        std::vector<std::uint64_t> bits((total + 63) / 64, 0);
        {
          std::lock_guard lock(mutex_);
          for (std::size_t t = 0; t < total; ++t) {
            if (ready_[t] && !global[t]) bits[t / 64] |= std::uint64_t{1} << (t % 64);
          }
        }
        comm_.and_bits(bits);
        std::vector<simulator::CommGroup> groups;
        const auto at = now();
        for (std::size_t t = 0; t < total; ++t) {
          if (bits[t / 64] >> (t % 64) & 1) {
            global[t] = 1;
            auto g = launcher_->ready(static_cast<int>(t), at);
            groups.insert(groups.end(), g.begin(), g.end());
          }
        }
        if (launcher_->next_tick(at)) {
          auto g = launcher_->tick(at);
          groups.insert(groups.end(), g.begin(), g.end());
        }
        for (const auto& g : groups) execute(g);
      }
      return;
    }
    while (done_ < total) {
      int t = 0;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        t = queue_.front();
        queue_.pop_front();
      }
      for (const auto& g : launcher_->ready(t, now())) execute(g);
    }
  }

  void execute(const simulator::CommGroup& g) {
    const int tag = 2 * (sequence_++ % 16000);
    std::int64_t n = 0;
    for (int t : g.tensors) n += grads_[static_cast<std::size_t>(t)].elements;
    // A fused group, or any gradient in device memory, goes through the host fusion buffer.
    const bool staged = g.copy_in || g.tensors.size() > 1 || !step_.host_memory();
    float* data = nullptr;
    if (staged) {
      if (static_cast<std::int64_t>(fusion_.size()) < n) {
        fusion_.resize(static_cast<std::size_t>(n));
      }
      std::int64_t at = 0;
      for (int t : g.tensors) {
        step_.to_host(t, fusion_.data() + at);
        at += grads_[static_cast<std::size_t>(t)].elements;
      }
      data = fusion_.data();
    } else {
      data = grads_[static_cast<std::size_t>(g.tensors.front())].data;
    }
    if (resolved_.strategy == "ps") {
      comm_.ps_exchange(data, shards_of(g, n, comm_.size()), tag);
    } else {
      comm_.ring_allreduce(data, n, tag);
    }
    if (staged) {
      std::int64_t at = 0;
      for (int t : g.tensors) {
        step_.from_host(t, fusion_.data() + at);
        at += grads_[static_cast<std::size_t>(t)].elements;
      }
    }
    bytes_ += 4.0 * static_cast<double>(n);
    ++collectives_;
    done_ += g.tensors.size();
  }

  ReplayComm& comm_;
  const simulator::ResolvedPolicy& resolved_;
  TrainingStep& step_;
  const std::vector<GradientBuffer>& grads_;
  std::vector<float>& fusion_;
  std::unique_ptr<simulator::GradientLauncher> launcher_;
  std::vector<char> ready_;
  std::deque<int> queue_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
  std::exception_ptr error_;
  Clock::time_point t0_;
  std::size_t done_ = 0;
  int sequence_ = 0;
  double bytes_ = 0;
  int collectives_ = 0;
};

// What every rank must agree on, as one JSON text.
nlohmann::json config_of(const ReplayOptions& o, const simulator::ResolvedPolicy& r) {
  return {{"model", o.model},         {"batch_per_rank", o.batch},
          {"framework", o.framework}, {"strategy", r.strategy},
          {"settings", r.settings},   {"steps", o.steps},
          {"warmup", o.warmup},       {"seed", o.seed},
          {"dlsim", kVersion}};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json times_json(const RankTimes& t) {
  return {
      {"rank", t.rank},
      {"host", t.host},
      {"step_s", t.step},
      {"forward_s", t.forward},
      {"backward_s", t.backward},
      {"exchange_wait_s", t.exchange_wait},
      {"update_s", t.update},
      {"exchanged_bytes_per_step", t.exchanged_bytes},
      {"collectives_per_step", t.collectives},
      {"ring_step_s", t.ring_seconds},
      {"ring_sent_bytes", t.ring_bytes_sent},
      {"ring_send_rate_bytes_per_s",
       t.ring_seconds > 0 ? nlohmann::json(t.ring_bytes_sent / t.ring_seconds) : nlohmann::json()}};
}

RankTimes times_from(const nlohmann::json& j) {
  RankTimes t;
  t.rank = j.at("rank");
  t.host = j.at("host");
  t.step = j.at("step_s").get<std::vector<double>>();
  t.forward = j.at("forward_s").get<std::vector<double>>();
  t.backward = j.at("backward_s").get<std::vector<double>>();
  t.exchange_wait = j.at("exchange_wait_s").get<std::vector<double>>();
  t.update = j.at("update_s").get<std::vector<double>>();
  t.exchanged_bytes = j.at("exchanged_bytes_per_step");
  t.collectives = j.at("collectives_per_step");
  t.ring_seconds = j.at("ring_step_s");
  t.ring_bytes_sent = j.at("ring_sent_bytes");
  return t;
}

}  // namespace

ReplayMeasurement run_replay(const ReplayOptions& o, ReplayComm& comm, const std::string& command) {
  // Set-up: anything that fails here fails on the rank that has it; all ranks learn of it
  // before any exchange starts, and rank 0 names it.
  std::string setup_error;
  std::unique_ptr<TrainingStep> step;
  std::unique_ptr<simulator::FrameworkPolicy> policy;
  simulator::ResolvedPolicy resolved;
  simulator::JobInfo job;
  std::optional<model::LayerGraph> graph;
  try {
    if (o.batch < 1) fail_at({}, "--batch", fmt::format("must be at least 1, got {}", o.batch));
    if (o.steps < 1) fail_at({}, "--steps", fmt::format("must be at least 1, got {}", o.steps));
    if (o.warmup < 0) fail_at({}, "--warmup", fmt::format("must be 0 or more, got {}", o.warmup));
    policy = simulator::framework_policies().at(o.framework, {}, "--framework").make();
    graph.emplace(model::load_model(o.model));
    step = make_training_step(o.device, *graph, o.batch, o.seed + 7919u * comm.rank());
    job.gpus = comm.size();
    job.nodes = comm.size();
    job.gpus_per_node = 1;
    for (const auto& g : step->gradients()) {
      job.gradient_elems.push_back(g.elements);
      job.gradient_bytes.push_back(4.0 * static_cast<double>(g.elements));
    }
    job.small_allreduce = [](Bytes) { return Seconds(0); };
    resolved = policy->resolve(o.framework_options, o.strategy, job);
    // The replay's exchange is MPI point to point: what an MPI library runs for `auto` is its
    // ring.
    if (resolved.strategy == "auto") resolved.strategy = "ring";
    if (resolved.strategy != "ring" && resolved.strategy != "ps") {
      fail_at(
          {}, "--strategy",
          fmt::format("the replay runs the ring and ps strategies, not '{}'", resolved.strategy));
    }
    if (resolved.strategy == "ps" && !resolved.ps.colocated) {
      fail_at({}, "--ps-placement", "the replay runs servers colocated with the workers only");
    }
    if (resolved.strategy == "ps" && resolved.ps.on_gpu) {
      fail_at({}, "--ps-device", "the replay's servers sum in host memory (cpu) only");
    }
  } catch (const InputError& e) {
    setup_error = e.what();
  }
  const auto errors = comm.gather(setup_error);
  const auto configs = comm.gather(setup_error.empty() ? json_text(config_of(o, resolved)) : "");
  if (!comm.all(setup_error.empty())) {
    if (comm.rank() != 0) return {};
    for (std::size_t r = 0; r < errors.size(); ++r) {
      if (!errors[r].empty()) {
        throw InputError(errors.size() > 1 ? fmt::format("rank {}: {}", r, errors[r]) : errors[r]);
      }
    }
  }
  // Every rank must run the same configuration as rank 0.
  std::string mismatch;
  if (comm.rank() == 0) {
    const auto root = nlohmann::json::parse(configs[0]);
    for (std::size_t r = 1; r < configs.size() && mismatch.empty(); ++r) {
      const auto other = nlohmann::json::parse(configs[r]);
      for (const auto& [key, value] : root.items()) {
        if (other.value(key, nlohmann::json()) != value) {
          mismatch = fmt::format(
              "ranks disagree on the configuration: rank {} has {} = {} where rank 0 has {} "
              "(every rank must run the same replay command)",
              r, key, json_text(other.value(key, nlohmann::json())), json_text(value));
          break;
        }
      }
    }
  }
  if (!comm.all(mismatch.empty())) {
    if (comm.rank() == 0) throw InputError(mismatch);
    return {};
  }

  std::vector<float> fusion;
  RankTimes mine;
  mine.rank = comm.rank();
  mine.host = comm.host();
  const float scale = 1.0f / static_cast<float>(comm.size());
  comm.barrier();
  ReplayComm::Transfers ring_before;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup) {
      step->start_layer_timing();
      ring_before = comm.ring_transfers();
    }
    const auto t0 = Clock::now();
    step->forward();
    const double fwd = seconds_since(t0);
    Exchange ex(comm, *policy, resolved, job, *step, fusion);
    ex.start();
    const auto t1 = Clock::now();
    step->backward([&ex](int g) { ex.ready(g); });
    const double bwd = seconds_since(t1);
    const auto t2 = Clock::now();
    ex.join();
    const double wait = seconds_since(t2);
    const auto t3 = Clock::now();
    step->update(scale);
    const double upd = seconds_since(t3);
    if (s < o.warmup) continue;
    mine.step.push_back(seconds_since(t0));
    mine.forward.push_back(fwd);
    mine.backward.push_back(bwd);
    mine.exchange_wait.push_back(wait);
    mine.update.push_back(upd);
    mine.exchanged_bytes = ex.bytes_sent();
    mine.collectives = ex.collectives();
  }
  const auto ring_after = comm.ring_transfers();
  mine.ring_seconds = ring_after.seconds - ring_before.seconds;
  mine.ring_bytes_sent = ring_after.bytes_sent - ring_before.bytes_sent;
  const auto all_times = comm.gather(json_text(times_json(mine)));
  if (comm.rank() != 0) return {};
  auto layers = step->layer_times();
  for (auto& l : layers) {
    l.forward_s /= o.steps;
    l.backward_s /= o.steps;
  }

  ReplayMeasurement m;
  m.options = o;
  m.model = graph->name();
  m.strategy = resolved.strategy;
  m.policy = resolved.description;
  m.ranks = comm.size();
  m.library = comm.library();
  m.command = command;
  m.date = calibrate::utc_now();
  m.dlsim_version = kVersion;
  m.cpu = calibrate::cpu_model();
  m.gradient_tensors = static_cast<int>(job.gradient_bytes.size());
  m.gradient_bytes = std::accumulate(job.gradient_bytes.begin(), job.gradient_bytes.end(), 0.0);
  m.allocated_bytes = step->bytes();
  m.backend = step->device();
  std::set<std::string> hosts;
  for (const auto& text : all_times) {
    m.per_rank.push_back(times_from(nlohmann::json::parse(text)));
    hosts.insert(m.per_rank.back().host);
  }
  m.per_rank.front().layers = std::move(layers);
  m.nodes = static_cast<int>(hosts.size());
  // The job's step: the slowest rank's, per step.
  std::vector<double> job_steps(static_cast<std::size_t>(o.steps), 0.0);
  for (const auto& r : m.per_rank) {
    for (std::size_t i = 0; i < job_steps.size(); ++i)
      job_steps[i] = std::max(job_steps[i], r.step[i]);
  }
  m.step_median_s = median(job_steps);
  m.step_mean_s = std::accumulate(job_steps.begin(), job_steps.end(), 0.0) /
                  static_cast<double>(job_steps.size());
  m.step_min_s = *std::min_element(job_steps.begin(), job_steps.end());
  m.step_max_s = *std::max_element(job_steps.begin(), job_steps.end());
  double var = 0;
  for (double x : job_steps) var += (x - m.step_mean_s) * (x - m.step_mean_s);
  m.step_stddev_s =
      job_steps.size() > 1 ? std::sqrt(var / static_cast<double>(job_steps.size() - 1)) : 0;
  m.samples_per_s = static_cast<double>(m.ranks * o.batch) / m.step_median_s;
  std::tie(m.forward_imbalance, m.slowest_forward_host) = forward_imbalance(m.per_rank);
  return m;
}

std::pair<double, std::string> forward_imbalance(const std::vector<RankTimes>& ranks) {
  double fastest = 0, slowest = 0;
  std::string host;
  for (const auto& r : ranks) {
    if (r.forward.empty()) continue;
    const double f = median(r.forward);
    if (host.empty() || f < fastest) fastest = f;
    if (host.empty() || f > slowest) {
      slowest = f;
      host = r.host;
    }
  }
  if (ranks.size() < 2 || !(fastest > 0)) return {0.0, host};
  return {slowest / fastest - 1, host};
}

std::string replay_json(const ReplayMeasurement& m) {
  const auto& o = m.options;
  nlohmann::json j;
  j["kind"] = "replay-measurement";
  j["config"] = {{"model", m.model},
                 {"model_argument", o.model},
                 {"batch_per_rank", o.batch},
                 {"framework", o.framework},
                 {"strategy", m.strategy},
                 {"policy", m.policy},
                 {"ranks", m.ranks},
                 {"nodes", m.nodes},
                 {"steps", o.steps},
                 {"warmup", o.warmup},
                 {"seed", o.seed},
                 {"precision", "fp32"},
                 {"device", o.device},
                 {"backend", m.backend},
                 {"inter_node", o.inter_node}};
  j["provenance"] = {{"command", m.command}, {"date", m.date}, {"dlsim", m.dlsim_version},
                     {"mpi", m.library},     {"cpu", m.cpu},   {"source_id", o.source_id}};
  j["model"] = {{"gradient_tensors", m.gradient_tensors},
                {"gradient_bytes", m.gradient_bytes},
                {"allocated_bytes_per_rank", m.allocated_bytes}};
  j["summary"] = {{"step_time_s",
                   {{"median", m.step_median_s},
                    {"mean", m.step_mean_s},
                    {"min", m.step_min_s},
                    {"max", m.step_max_s},
                    {"stddev", m.step_stddev_s}}},
                  {"samples_per_s", m.samples_per_s},
                  {"forward_imbalance", m.forward_imbalance},
                  {"definition",
                   "per timed step the slowest rank's step time; the median over the steps; "
                   "samples/s = ranks x batch / median; forward_imbalance: the slowest rank's "
                   "forward pass over the fastest's, minus 1 (each the median over the steps)"}};
  j["ranks"] = nlohmann::json::array();
  for (const auto& r : m.per_rank) j["ranks"].push_back(times_json(r));
  // Rank 0's time per layer, the mean over the timed steps.
  j["layers_rank0"] = nlohmann::json::array();
  for (const auto& l : m.per_rank.front().layers) {
    j["layers_rank0"].push_back({{"layer", l.layer},
                                 {"op", l.op},
                                 {"forward_s", l.forward_s},
                                 {"backward_s", l.backward_s}});
  }
  return json_text(j, 2) + "\n";
}

namespace {
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
}  // namespace

std::string replay_csv(const ReplayMeasurement& m) {
  const auto& o = m.options;
  const std::vector<std::string> header = {
      "source_id",     "model",  "task",       "framework",  "comm",
      "precision",     "gpu",    "num_gpus",   "num_nodes",  "gpus_per_node",
      "batch_per_gpu", "data",   "intra_node", "inter_node", "value",
      "unit",          "approx", "locator",    "notes"};
  const std::vector<std::string> row = {
      o.source_id,
      m.model,
      "train",
      fmt::format("dlsim-replay({})", o.framework),
      m.strategy,
      "fp32",
      o.device == "gpu" ? m.backend.substr(0, m.backend.find(" (")) : std::string("cpu"),
      std::to_string(m.ranks),
      std::to_string(m.nodes),
      std::to_string(m.nodes > 0 ? m.ranks / m.nodes : m.ranks),
      std::to_string(o.batch),
      "synthetic",
      "none",
      o.inter_node.empty() ? std::string(m.nodes > 1 ? "tcp" : "none") : o.inter_node,
      fmt::format("{:.4f}", m.samples_per_s),
      "samples/s",
      "no",
      fmt::format("median of {} steps after {} warm-up", o.steps, o.warmup),
      fmt::format("step {:.4f} s median, {:.4f}-{:.4f} s, stddev {:.4f} s; {}{}; {}",
                  m.step_median_s, m.step_min_s, m.step_max_s, m.step_stddev_s,
                  m.ranks > 1 ? fmt::format("ranks' forward passes {:.1f} % apart; ",
                                            100 * m.forward_imbalance)
                              : std::string(),
                  m.library, m.date)};
  std::string out;
  for (std::size_t i = 0; i < header.size(); ++i) out += (i ? "," : "") + header[i];
  out += "\n";
  for (std::size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
  return out + "\n";
}

}  // namespace dlsim::validate
