#include "simulator/engine.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "common/error.hpp"
#include "networks/schedule.hpp"

namespace dlsim::simulator {

CollectivePlanner::CollectivePlanner(const StepSetup& setup)
    : setup_(setup),
      algorithm_(networks::collective_algorithms().at(setup.resolved.strategy).make()) {
  if (!algorithm_->supports(networks::CollectiveOp::kAllReduce, setup.cluster->library)) {
    fail_at({}, "strategy",
            fmt::format("'{}' cannot allreduce with {}; strategies that can: {}",
                        setup.resolved.strategy, setup.cluster->library.about.name,
                        fmt::join(networks::algorithms_for(networks::CollectiveOp::kAllReduce,
                                                           setup.cluster->library),
                                  ", ")));
  }
  shared_ = shared_cores(setup);
  if (setup.resolved.params.host_staging && setup.cluster->library.nccl()) {
    fail_at({}, "host_staging",
            "Horovod allreduces in host memory with MPI, not NCCL: give --library mpi");
  }
}

double shared_cores(const StepSetup& setup) {
  const auto& lib = setup.cluster->library;
  if (lib.cpu_per_call.value() <= 0 && lib.cpu_per_byte.value() <= 0 &&
      lib.wait_per_call.value() <= 0 && lib.wait_per_byte.value() <= 0) {
    return 0;
  }
  double shared = 0;
  for (const auto& ranks_of_node : setup.comm.ranks_by_node()) {
    const int ranks = static_cast<int>(ranks_of_node.size());
    const auto& node = setup.topo->node(setup.comm.rank_slot[ranks_of_node.front()]);
    const double spare = node.host.cores - static_cast<double>(ranks) * node.gpu.threads;
    shared = std::max(shared, std::clamp(1 - spare / ranks, 0.0, 1.0));
  }
  return shared;
}

Time CollectivePlanner::full_core_wait(const CommGroup& group) const {
  if (shared_ <= 0) return 0;
  const auto& lib = setup_.cluster->library;
  return to_time(shared_ * (lib.wait_per_call.value() + lib.wait_per_byte.value() * group.bytes));
}

Time CollectivePlanner::core_wait(const CommGroup& group, Time to_end) {
  if (to_end <= 0) return 0;
  const auto w = static_cast<double>(full_core_wait(group));
  if (w <= 0) return 0;
  const double d = static_cast<double>(to_time(plan(group).time.value()));
  return static_cast<Time>(std::llround(std::min(w, static_cast<double>(to_end) * w / (d + w))));
}

Seconds CollectivePlanner::compute_steal(const CommGroup& group) const {
  if (shared_ <= 0) return Seconds(0);
  const auto& lib = setup_.cluster->library;
  return Seconds(shared_ * (lib.cpu_per_call.value() + lib.cpu_per_byte.value() * group.bytes));
}

Time CollectivePlanner::host_cpu_lost(const CommGroup& group, Time to_end) {
  const Time cpu = to_time(compute_steal(group).value());
  if (cpu <= 0 || to_end <= 0) return 0;
  // Beside compute the collective runs at its slow pace, D + W for all of its work.
  const Time d = full_core_wait(group) + to_time(plan(group).time.value());
  if (d <= 0) return cpu;
  return static_cast<Time>(
      std::llround(compute_lost(static_cast<double>(cpu) / static_cast<double>(d),
                                static_cast<double>(to_end), static_cast<double>(d))));
}

double CollectivePlanner::compute_share(const CommGroup& group) {
  const auto& gpu = *setup_.gpu;
  const auto& compute = setup_.compute;
  const int n = setup_.comm.size();
  if (!setup_.cluster->library.nccl() || setup_.resolved.strategy == "ps" || n < 2 ||
      compute.backward.value() <= 0) {
    return 0;
  }
  const auto& cost = plan(group);
  if (cost.time.value() <= 0) return 0;
  // NCCL's blocks do not share an SM with other kernels (they use every register: NVIDIA/nccl
  // #689), one block per channel.
  const double sms =
      gpu.sm_count > 0 ? std::min(1.0, static_cast<double>(cost.channels) / gpu.sm_count) : 0.0;
  // Each byte on the wire is written to GPU memory and read back, and the user's buffers are
  // read and written: about 3 x (NVIDIA/nccl#1428); 2 (n - 1) / n bytes a GPU sends per byte
  // of an allreduce.
  const double bus_bytes = 2.0 * (n - 1) / n * group.bytes;
  const double memory = std::min(
      1.0, kNcclMemoryPerBusByte * bus_bytes / cost.time.value() / gpu.memory_bandwidth.value());
  const double m = compute.backward_memory_bound.value() / compute.backward.value();
  return (1 - m) * sms + m * memory;
}

double CollectivePlanner::compute_lost(double r, double to_end, double duration) {
  if (r <= 0 || to_end <= 0) return 0;
  if (r < 1) {
    const double before_end = r * to_end / (1 - r);
    if (to_end + before_end <= duration) return before_end;
  }
  return r * duration;
}

const networks::CollectiveCost& CollectivePlanner::plan(const CommGroup& group) {
  auto key = group_key(group);
  // One whole tensor on one server: on a cluster of one kind of node every server costs the
  // same on a quiet network, so the plan of one stands for all (thousands of BytePS
  // partitions, one per server in turn, share it).
  if (group.ps.sharding == "round_robin" && group.ps.tensors.size() <= 1 &&
      setup_.cluster->groups.size() == 1) {
    std::get<1>(key) = 0;
  }
  auto& slot = cache_[key];
  if (!slot) {
    slot =
        std::make_unique<networks::CollectiveCost>(algorithm_->cost(request(group), setup_.comm));
  }
  return *slot;
}

networks::CollectiveRequest CollectivePlanner::request(const CommGroup& group) const {
  networks::CollectiveRequest req;
  req.op = networks::CollectiveOp::kAllReduce;
  req.size = Bytes(group.bytes);
  req.ps = group.ps;
  return req;
}

networks::Schedule CollectivePlanner::schedule(const CommGroup& group) {
  return algorithm_->schedule(request(group), setup_.comm);
}

networks::Schedule CollectivePlanner::schedule(const CommGroup& group,
                                               const networks::Communicator& comm) {
  return algorithm_->schedule(request(group), comm);
}

Seconds CollectivePlanner::copy_in_time(const CommGroup& group) {
  if (setup_.resolved.params.host_staging) return staging_time(group.bytes, true);
  return copies_time(group, group.copy_in, group.kernels_in);
}

Seconds CollectivePlanner::copy_out_time(const CommGroup& group) {
  if (setup_.resolved.params.host_staging) return staging_time(group.bytes, false);
  return copies_time(group, group.copy_out, group.kernels_out);
}

// The buffer's copy, if `copy`, and the group's extra kernels on the same side.
Seconds CollectivePlanner::copies_time(const CommGroup& group, bool copy,
                                       const std::vector<double>& kernels) const {
  Seconds t =
      copy ? copy_time(group.buffer_bytes > 0 ? group.buffer_bytes : group.bytes) : Seconds(0);
  for (double traffic : kernels) t += memory_kernel_time(*setup_.gpu, Bytes(traffic));
  return t;
}

// Every GPU of the first node copies `bytes` to its host (or back) at once; the busiest link of
// their routes bounds them (networks::execute). The nodes of a job are alike, so one stands for
// all.
Seconds CollectivePlanner::staging_time(double bytes, bool to_host) {
  auto [it, added] = staging_.try_emplace({bytes, to_host});
  if (!added) return it->second;
  const auto& comm = setup_.comm;
  networks::Schedule s;
  networks::Phase copy;
  copy.label = to_host ? "copy to the host" : "copy from the host";
  const auto nodes = comm.ranks_by_node();
  for (int r : nodes.front()) {
    const int gpu = comm.rank_vertex[static_cast<std::size_t>(r)];
    const int host = setup_.topo->host_vertex(comm.rank_slot[static_cast<std::size_t>(r)]);
    copy.transfers.push_back({to_host ? gpu : host, to_host ? host : gpu, bytes});
  }
  s.phases.push_back(std::move(copy));
  it->second = networks::execute(s, *setup_.topo, setup_.cluster->network.transport).time;
  return it->second;
}

Seconds CollectivePlanner::copy_time(double bytes) const {
  return memory_kernel_time(*setup_.gpu, Bytes(2 * bytes));
}

NodeMirror::NodeMirror(const StepSetup& s, const networks::PsOptions& ps,
                       const std::vector<networks::PsServer>& servers,
                       const std::vector<std::vector<int>>& nodes)
    : topo_(*s.topo), server_slot_(static_cast<std::size_t>(s.topo->node_slots()), 0) {
  const int W = static_cast<int>(nodes.size());
  if (!s.mirror_nodes || W < 2 || ps.colocated || ps.apply_each ||
      ps.aggregation == networks::PsAggregation::kNone) {
    return;
  }
  for (int slot : s.comm.server_slots) server_slot_[static_cast<std::size_t>(slot)] = 1;
  // The nodes alike: the same node type, the same GPUs of it, aggregating at the same place.
  const auto local = [&](const std::vector<int>& ranks) {
    const int slot = s.comm.rank_slot[static_cast<std::size_t>(ranks.front())];
    const int base = topo_.gpu_vertex(slot, 0);
    const auto a = networks::ps_aggregator(ps, s.comm, ranks);
    std::vector<int> sig{a.vertex - base, a.pull_vertex - base};
    for (int r : ranks) sig.push_back(s.comm.rank_vertex[static_cast<std::size_t>(r)] - base);
    return std::make_pair(topo_.node(slot).about.name, sig);
  };
  const auto first = local(nodes.front());
  for (const auto& ranks : nodes) {
    if (local(ranks) != first) return;
  }
  // Node 0's routes to and from every server, and the last node's: each link node 0's own, a
  // server node's, or a fabric link that cannot bind; the server-side links the same for both.
  const int w0 = s.comm.rank_slot[static_cast<std::size_t>(nodes.front().front())];
  const auto a0 = networks::ps_aggregator(ps, s.comm, nodes.front());
  const auto a1 = networks::ps_aggregator(ps, s.comm, nodes.back());
  std::vector<int> r0, r1, side0, side1;
  for (const auto& sv : servers) {
    if (!server_slot_[static_cast<std::size_t>(topo_.slot_of(sv.vertex))]) return;
    for (const auto& [from0, to0, from1, to1] :
         {std::array{a0.vertex, sv.vertex, a1.vertex, sv.vertex},
          std::array{sv.vertex, a0.pull_vertex, sv.vertex, a1.pull_vertex}}) {
      r0.clear();
      r1.clear();
      topo_.route(from0, to0, -1, r0);
      topo_.route(from1, to1, -1, r1);
      side0.clear();
      side1.clear();
      for (int l : r0) {
        const auto& k = topo_.link(l);
        if (server_link(l)) {
          side0.push_back(l);
        } else if (topo_.slot_of(k.from) != w0 && topo_.slot_of(k.to) != w0 && !never_binds(l)) {
          return;
        }
      }
      for (int l : r1) {
        if (server_link(l)) side1.push_back(l);
      }
      if (side0 != side1) return;
    }
  }
  nodes_ = W;
}

bool NodeMirror::server_link(int l) const {
  const auto& k = topo_.link(l);
  const auto at = [&](int v) {
    const int slot = topo_.slot_of(v);
    return slot >= 0 && server_slot_[static_cast<std::size_t>(slot)];
  };
  return at(k.from) || at(k.to);
}

int NodeMirror::copies(int l) const {
  if (server_link(l)) return nodes_;
  return fabric_link(l) ? 0 : 1;
}

bool NodeMirror::fabric_link(int l) const {
  const auto& k = topo_.link(l);
  return topo_.slot_of(k.from) < 0 && topo_.slot_of(k.to) < 0;
}

// Every flow on u -> v entered u over another link than v -> u and leaves v over another than
// v -> u, so the link's load is at most the smaller of those links' capacities, summed: where its
// own capacity is that much (a fat tree's trunk at oversubscription 1 or less), it fills only
// once the links feeding it are full, and leaving it out changes no max-min rate.
bool NodeMirror::never_binds(int l) const {
  if (!fabric_link(l)) return false;
  const auto [it, added] = never_binds_.try_emplace(l, false);
  if (!added) return it->second;
  const auto& k = topo_.link(l);
  double in = 0, out = 0;
  for (std::size_t j = 0; j < topo_.link_count(); ++j) {
    const auto& o = topo_.link(static_cast<int>(j));
    if (o.to == k.from && o.from != k.to) in += o.bandwidth.value();
    if (o.from == k.to && o.to != k.from) out += o.bandwidth.value();
  }
  it->second = k.bandwidth.value() >= std::min(in, out);
  return it->second;
}

namespace {

// A small MPI collective of `bytes` on the job by the hd algorithm: Open MPI's coll/tuned picks
// recursive doubling for an allreduce below 10,000 bytes (MPICH the same) and a binomial tree
// rooted at rank 0 for a small broadcast.
Seconds small_mpi_time(const networks::Communicator& comm, networks::CollectiveOp op, Bytes bytes) {
  if (comm.size() < 2) return Seconds(0);
  networks::CollectiveRequest req;
  req.op = op;
  req.size = bytes;
  return networks::collective_algorithms().at("hd").make()->cost(req, comm).time;
}

}  // namespace

Seconds small_allreduce_time(const networks::Communicator& comm, Bytes bytes) {
  return small_mpi_time(comm, networks::CollectiveOp::kAllReduce, bytes);
}

Seconds small_broadcast_time(const networks::Communicator& comm, Bytes bytes) {
  return small_mpi_time(comm, networks::CollectiveOp::kBroadcast, bytes);
}

namespace {

// Phi^-1(p), the inverse standard normal distribution function, for 0 < p < 1: P. J. Acklam's
// rational approximation (relative error below 1.2e-9), its lower half by symmetry.
double normal_quantile(double p) {
  if (p < 0.5) return -normal_quantile(1 - p);
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  if (p > 0.97575) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double q = p - 0.5;
  const double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

// Blom's approximation of the expected k-th smallest of n standard normals (G. Blom,
// "Statistical Estimates and Transformed Beta-Variables", Wiley 1958).
double blom_score(int k, int n) { return normal_quantile((k - 0.375) / (n + 0.25)); }

}  // namespace

double expected_max_normal(int n) { return n <= 1 ? 0.0 : blom_score(n, n); }

std::vector<double> gpu_speed_scores(int n, std::uint64_t seed) {
  std::vector<double> scores(static_cast<std::size_t>(std::max(n, 0)), 0.0);
  if (n <= 1) return scores;
  for (int k = 1; k <= n; ++k) scores[static_cast<std::size_t>(k - 1)] = blom_score(k, n);
  // A stream of its own, so that the per-step draws stay those of the seed.
  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ULL);
  for (std::size_t i = scores.size() - 1; i > 0; --i) {
    std::swap(scores[i], scores[static_cast<std::size_t>(rng() % (i + 1))]);
  }
  return scores;
}

double expected_straggler_factor(const hardware::GpuSpec& gpu, int n) {
  return 1 + std::hypot(gpu.speed_spread, gpu.step_jitter) * expected_max_normal(n);
}

double expected_straggler_factor(const StepSetup& setup) {
  double factor = expected_straggler_factor(*setup.gpu, setup.comm.size());
  for (double speed : setup.rank_speed) factor = std::max(factor, 1 / speed);
  return factor;
}

}  // namespace dlsim::simulator
