// The analytic engine (docs/simulator.md, "The analytic engine"): one step in closed form.
// Every GPU runs at the expected slowest GPU's speed, 1 + cv E[max of N normals]; gradients are
// ready at their backward offsets; the framework's launcher groups them exactly as in the DES;
// each group's collective takes its closed-form time on a stream that runs one at a time, and
// parameter-server exchanges, which run together, queue for the links and memories they use
// (each a first-come fluid queue: an exchange ends no sooner than its quiet time after it is
// ready, nor before every resource it uses has served it and everything ahead of it).

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <tuple>
#include <unordered_map>

#include "networks/nccl.hpp"
#include "simulator/engine.hpp"

namespace dlsim::simulator {
namespace {

// Parameter-server exchanges as fluid queues on the resources they use: every link their
// transfers cross and every memory that sums.
class PsQueues {
 public:
  PsQueues(const StepSetup& setup, CollectivePlanner& planner)
      : setup_(setup),
        planner_(planner),
        links_(setup.topo->link_count()),
        work_(links_ + setup.topo->vertex_count(), 0.0),
        busy_(work_.size(), 0.0) {}

  // The worker nodes node 0's exchanges stood for (NodeMirror); 1 where each was its own.
  int mirrored_nodes() const { return mirror_ ? mirror_->nodes() : 1; }

  // The end of the exchange of `group`, ready at `ready` (s).
  double exchange(const CommGroup& group, double ready) {
    const auto& topo = *setup_.topo;
    const auto& stream = topo.cluster().network.transport.stream_bandwidth;
    const auto req = planner_.request(group);
    const auto servers = networks::ps_servers(req, setup_.comm);
    const bool local = group.ps.aggregation != networks::PsAggregation::kNone;
    // One worker node for all (NodeMirror): node 0's transfers alone (its exchange on its own
    // ranks), its share of each server-side link and server socket W times over, no fabric link
    // (none can bind); every other node's links carry what node 0's do.
    if (local && !mirror_) {
      mirror_ = std::make_unique<NodeMirror>(setup_, group.ps, servers, nodes_);
      node0_ = setup_.comm.subset(nodes_.front());
    }
    const int W = local ? mirror_->nodes() : 1;
    const auto schedule = W > 1 ? planner_.schedule(group, node0_) : planner_.schedule(group);
    const int n_servers = static_cast<int>(servers.size());
    for (const auto& phase : schedule.phases) {
      for (const auto& t : phase.transfers) {
        if (t.src == t.dst || t.bytes <= 0) continue;
        const auto& r = route(t);
        for (int id : r) {
          const int times = W > 1 ? mirror_->copies(id) : 1;
          if (times == 0) continue;
          add(static_cast<std::size_t>(id), times * t.bytes / topo.link(id).bandwidth.value());
        }
        // A receiving socket (ps-lite): one stream's worth for all that reaches the process.
        if (phase.shared_receive && stream && t.socket >= 0 &&
            topo.path_class(r) == hardware::PathClass::kNetwork) {
          const double times = W > 1 && t.socket < n_servers ? W : 1;
          add(sockets_ + static_cast<std::size_t>(t.socket), times * t.bytes / stream->value());
        }
      }
    }
    // Sums: each server's shard from every pusher, and each node's GPUs where the framework
    // sums inside the node (keyed below the links' ids by vertex).
    const auto& nodes = nodes_;
    const int pushers = local ? static_cast<int>(nodes.size()) : setup_.comm.size();
    for (const auto& sv : servers) {
      add(links_ + static_cast<std::size_t>(sv.vertex),
          networks::ps_server_traffic(group.ps.apply_each, sv.bytes, pushers) / sv.memory.value());
    }
    if (local) {
      for (std::size_t j = 0; j < (W > 1 ? 1 : nodes.size()); ++j) {
        const auto& ranks = nodes[j];
        const auto a = networks::ps_aggregator(group.ps, setup_.comm, ranks);
        const int g = static_cast<int>(ranks.size());
        if (g > 1) {
          add(links_ + static_cast<std::size_t>(a.vertex),
              networks::reduce_traffic(group.bytes, g) / a.memory.value());
        }
        // The library's reduce-scatter and all-gather through the node's SHM transport, one
        // collective at a time (docs/networks.md, "BytePS").
        if (group.ps.library_in_node && g > 1) {
          if (const double shm = shm_rate(j, ranks); shm > 0) {
            add(shm_ + j, 2 * group.bytes * (g - 1) / g / shm);
          }
        }
      }
    }
    double end = ready + planner_.plan(group).time.value();
    for (const std::size_t r : touched_) {
      double& busy = busy_[r];
      busy = std::max(busy, ready) + work_[r];
      end = std::max(end, busy);
      work_[r] = 0;
    }
    touched_.clear();
    return std::max(end, server_chains(group, schedule, servers, ready, W, n_servers, pushers));
  }

 private:
  const StepSetup& setup_;
  CollectivePlanner& planner_;
  // The queues above take all of an exchange's work when it is ready, as if its pull could use
  // the server's outgoing link while its push still comes in. Each server also serves its
  // exchanges in turn, push, sum and pull one after another: its incoming links (and its
  // receiving socket) take the push when the exchange is ready, its memory the sum when the
  // pushes are in, its outgoing links the pull when the sum is done. The end of the slowest
  // server's pull (s); only the server's own links count here (the worker's are in the queues
  // above), so each of these queues sees its exchanges in the order they are ready.
  double server_chains(const CommGroup& group, const networks::Schedule& schedule,
                       const std::vector<networks::PsServer>& servers, double ready, int W,
                       int n_servers, int pushers) {
    const auto& topo = *setup_.topo;
    const auto& stream = topo.cluster().network.transport.stream_bandwidth;
    const networks::Phase* push = nullptr;
    const networks::Phase* pull = nullptr;
    for (const auto& phase : schedule.phases) {
      if (phase.transfers.empty()) continue;
      const bool to_server = std::any_of(
          servers.begin(), servers.end(),
          [&](const networks::PsServer& sv) { return sv.vertex == phase.transfers.front().dst; });
      const bool from_server = std::any_of(
          servers.begin(), servers.end(),
          [&](const networks::PsServer& sv) { return sv.vertex == phase.transfers.front().src; });
      if (to_server && !push) push = &phase;
      if (from_server && !pull) pull = &phase;
    }
    double last = ready;
    for (std::size_t s_i = 0; s_i < servers.size(); ++s_i) {
      const auto& sv = servers[s_i];
      if (sv.bytes <= 0) continue;
      const int slot = topo.slot_of(sv.vertex);
      double at = ready;
      // One stage's work on this server's own resources, queued from `at`; when it is done.
      auto stage = [&](const networks::Phase* phase, bool inbound) {
        double done = at;
        auto queue = [&](std::size_t r, double seconds) {
          done = std::max(done, chain(r, at, seconds));
        };
        if (!phase) return done;
        for (const auto& t : phase->transfers) {
          if (t.src == t.dst || t.bytes <= 0) continue;
          if ((inbound ? t.dst : t.src) != sv.vertex) continue;
          const auto& r = route(t);
          for (int id : r) {
            const auto& l = topo.link(id);
            if (topo.slot_of(inbound ? l.to : l.from) != slot) continue;  // not the server's
            const int times = W > 1 ? mirror_->copies(id) : 1;
            if (times == 0) continue;
            queue(static_cast<std::size_t>(id), times * t.bytes / l.bandwidth.value());
          }
          if (inbound && phase->shared_receive && stream && t.socket >= 0 && t.socket < n_servers &&
              topo.path_class(r) == hardware::PathClass::kNetwork) {
            queue(sockets_ + static_cast<std::size_t>(t.socket),
                  (W > 1 ? W : 1) * t.bytes / stream->value());
          }
        }
        return done;
      };
      at = stage(push, true);
      at = chain(
          links_ + static_cast<std::size_t>(sv.vertex), at,
          networks::ps_server_traffic(group.ps.apply_each, sv.bytes, pushers) / sv.memory.value());
      at = stage(pull, false);
      last = std::max(last, at);
    }
    return last;
  }

  // Resource r of a server's chain takes `seconds` of work from `from` on; when it is done.
  double chain(std::size_t r, double from, double seconds) {
    if (r >= chain_busy_.size()) chain_busy_.resize(r + 1, 0.0);
    double& busy = chain_busy_[r];
    busy = std::max(busy, from) + seconds;
    return busy;
  }

  // Work (s) this exchange puts on each resource, and each resource's busy-until time (s): link
  // ids first, then one memory per vertex (links_ + vertex), then the receiving sockets
  // (sockets_ + socket).
  void add(std::size_t resource, double seconds) {
    if (resource >= work_.size()) {
      work_.resize(resource + 1, 0.0);
      busy_.resize(resource + 1, 0.0);
    }
    if (work_[resource] == 0) touched_.push_back(resource);
    work_[resource] += seconds;
  }
  std::size_t links_;
  const std::vector<std::vector<int>> nodes_ = setup_.comm.ranks_by_node();
  std::unique_ptr<NodeMirror> mirror_;  // decided at the first exchange
  networks::Communicator node0_;        // node 0's ranks
  std::vector<double> work_, busy_;
  std::vector<double> chain_busy_;  // the servers' own resources, in turn (server_chains)
  std::size_t sockets_ = work_.size();
  // Then each node's SHM transport (shm_ + node), past every receiving socket: sockets number
  // the servers, then the pushers.
  std::size_t shm_ = sockets_ + static_cast<std::size_t>(setup_.resolved.ps.servers) +
                     static_cast<std::size_t>(setup_.comm.size());
  std::vector<double> shm_rates_;  // by node, -1: not yet known
  double shm_rate(std::size_t j, const std::vector<int>& ranks) {
    if (j >= shm_rates_.size()) shm_rates_.resize(j + 1, -1.0);
    if (shm_rates_[j] < 0) shm_rates_[j] = networks::node_shm_rate(setup_.comm, ranks);
    return shm_rates_[j];
  }
  std::vector<std::size_t> touched_;
  // Routes by (source, destination, rail): thousands of exchanges reuse a few thousand routes.
  const std::vector<int>& route(const networks::Transfer& t) {
    const auto key = std::make_tuple(t.src, t.dst, t.rail);
    auto it = routes_.find(key);
    if (it == routes_.end()) {
      std::vector<int> r;
      setup_.topo->route(t.src, t.dst, t.rail, r);
      it = routes_.emplace(key, std::move(r)).first;
    }
    return it->second;
  }
  // Hashed: a few thousand routes looked up for every transfer of every exchange (a tree's
  // pointer chase here took most of a 1,024-GPU BytePS step).
  struct RouteHash {
    std::size_t operator()(const std::tuple<int, int, int>& k) const {
      const auto [a, b, c] = k;
      std::uint64_t h = static_cast<std::uint32_t>(a);
      h = h * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint32_t>(b);
      h = h * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint32_t>(c);
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<std::tuple<int, int, int>, std::vector<int>, RouteHash> routes_;
};

}  // namespace

EngineRun run_analytic(const StepSetup& setup, const Observers& observers) {
  const int n = setup.comm.size();
  const double factor = expected_straggler_factor(setup);
  const auto& compute = setup.compute;
  auto at = [&](double seconds) { return to_time(seconds * factor); };

  const Time forward_end = at(compute.forward.value());
  Time backward_end = at(compute.forward.value() + compute.backward.value());
  observers.emit({SpanKind::kForward, 0, 0, "forward", 0, forward_end});
  const auto& library = setup.cluster->library;
  // Whether communication can take compute from backward: the library's host CPU work, or
  // NCCL's kernels on the GPU (CollectivePlanner::compute_share); then backward's end is known
  // only after the collectives.
  const bool host_work = library.cpu_per_call.value() > 0 || library.cpu_per_byte.value() > 0 ||
                         (library.nccl() && n > 1 && setup.resolved.strategy != "ps");
  if (!host_work) {
    observers.emit({SpanKind::kBackward, 0, 0, "backward", forward_end, backward_end});
  }
  // Shared cores (docs/simulator.md): a collective that starts while the GPUs compute takes its
  // host CPU time from them; backward and every gradient still to come end that much later.
  Time stolen = 0;
  Time copy_out = 0;  // DDP's copies out of the buckets, on the compute stream at the end

  // Gradient tensors in backward order with the time every GPU has them.
  std::vector<std::pair<Time, int>> ready;
  double t = compute.forward.value();
  for (std::size_t i = compute.layers.size(); i-- > 0;) {
    t += compute.layers[i].backward.value();
    for (int g : compute.layers[i].gradients) {
      ready.emplace_back(setup.overlap ? at(t) : backward_end, g);
    }
  }

  Time comm_end = backward_end;
  EngineRun result;
  if (n > 1 && !ready.empty()) {
    CollectivePlanner planner(setup);
    auto launcher = setup.policy->launcher(setup.resolved, setup.job);
    Time channel = 0;
    std::size_t reduced = 0;
    const bool ps = setup.resolved.strategy == "ps";
    PsQueues queues(setup, planner);
    const std::string_view collective_name =
        setup.cluster->library.nccl() ? "NCCL_ALLREDUCE" : "MPI_ALLREDUCE";
    auto run = [&](const std::vector<CommGroup>& groups, Time now) {
      for (const auto& g : groups) {
        if (ps) {
          // Every exchange starts when its variable is ready; they share what they use.
          const double end = queues.exchange(g, to_seconds(now));
          Span c{SpanKind::kCollective, 0, -1, "PS_PUSH_PULL", now, to_time(end), g.bytes};
          c.latency = to_time(planner.plan(g).latency.value());
          c.parameter_server = true;
          observers.emit(c);
          channel = std::max(channel, c.end);
          reduced += g.tensors.size();
          continue;
        }
        Time t0 = std::max(now, channel);
        auto span = [&](SpanKind k, std::string_view name, Time d) {
          if (d > 0) observers.emit({k, 0, -1, name, t0, t0 + d, g.bytes});
          t0 += d;
        };
        span(SpanKind::kNegotiate, "NEGOTIATE_ALLREDUCE", to_time(g.negotiate.value()));
        const Time copy_in = to_time(planner.copy_in_time(g).value());
        const Time copy_out_time = to_time(planner.copy_out_time(g).value());
        // Compute-stream work that a rank still in backward takes from its compute: copies into
        // the bucket (DDP) and the library's host CPU where cores are shared.
        auto take = [&](Time lost, std::string_view what) {
          if (lost <= 0 || t0 >= backward_end) return false;
          observers.emit({SpanKind::kHostShare, 0, -1, what, t0, t0 + lost});
          stolen += lost;
          backward_end += lost;
          return true;
        };
        if (copy_in > 0 && !(g.copies_on_compute && take(copy_in, "MEMCPY_IN_FUSION_BUFFER"))) {
          span(SpanKind::kCopyIn, "MEMCPY_IN_FUSION_BUFFER", copy_in);
        }
        // On shared cores, a collective that starts during backward also waits for the cores
        // while backward lasts.
        const Time wait = planner.core_wait(g, backward_end - t0);
        const auto& plan = planner.plan(g);
        // Its host CPU time is taken only while backward runs beside it (docs/simulator.md).
        take(planner.host_cpu_lost(g, backward_end - t0), "HOST_CPU_COMMUNICATION");
        Span c{SpanKind::kCollective,
               0,
               -1,
               collective_name,
               t0,
               t0 + wait + to_time(plan.time.value()),
               g.bytes};
        c.latency = to_time(plan.latency.value());
        observers.emit(c);
        // NCCL's kernel on the compute's SMs: backward, slowed by a share r while the collective
        // runs, ends later (the DES's charge, the same closed form).
        const Time running = c.end - to_time(plan.time.value());  // after the cores' wait
        const double lost = CollectivePlanner::compute_lost(
            planner.compute_share(g), static_cast<double>(backward_end - running),
            static_cast<double>(c.end - running));
        if (lost > 0) take(static_cast<Time>(std::llround(lost)), "NCCL_KERNEL_ON_COMPUTE");
        t0 = c.end;
        if (g.copy_out && g.copies_on_compute) {
          copy_out += copy_out_time;  // finalize_backward, after the last collective
        } else {
          span(SpanKind::kCopyOut, "MEMCPY_OUT_FUSION_BUFFER", copy_out_time);
        }
        channel = t0;
        reduced += g.tensors.size();
      }
    };
    // The launcher sees ready tensors and its own ticks in time order (a tensor ready at a
    // tick's instant goes first).
    std::size_t next = 0;
    Time clock = 0;
    while (reduced < ready.size()) {
      const auto tick = launcher->next_tick(clock);
      if (next < ready.size() && (!tick || ready[next].first + stolen <= *tick)) {
        clock = ready[next].first + stolen;
        run(launcher->ready(ready[next].second, clock), clock);
        ++next;
      } else if (tick) {
        clock = *tick;
        run(launcher->tick(clock), clock);
      } else {
        break;  // a launcher that holds tensors and never ticks: nothing more starts
      }
    }
    comm_end = std::max(backward_end, channel);
    result.mirrored_nodes = queues.mirrored_nodes();
    if (copy_out > 0) {
      observers.emit(
          {SpanKind::kCopyOut, 0, -1, "MEMCPY_OUT_FUSION_BUFFER", comm_end, comm_end + copy_out});
      comm_end += copy_out;
    }
  }
  if (host_work) {
    observers.emit({SpanKind::kBackward, 0, 0, "backward", forward_end, backward_end});
  }
  const Time done = comm_end + at(compute.update.value());
  observers.emit({SpanKind::kUpdate, 0, 0, "update", comm_end, done});
  // The slowest node's input pipeline: no step is shorter than its interval (docs/simulator.md,
  // "Input pipeline").
  Time update_end = done;
  if (!setup.input_interval.empty()) {
    update_end = std::max(
        done, to_time(*std::max_element(setup.input_interval.begin(), setup.input_interval.end())));
    if (update_end > done) {
      observers.emit({SpanKind::kInputWait, 0, -1, "waiting for input", done, update_end});
    }
  }
  observers.emit({SpanKind::kIteration, 0, -1, "step", 0, update_end});
  return result;
}

}  // namespace dlsim::simulator
