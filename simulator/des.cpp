// The discrete-event engine (docs/simulator.md, "The DES engine"): per-GPU compute streams,
// the framework's launcher, and the job's communication as its framework runs it, all of it as
// flows sharing one max-min network: collectives (NCCL, MPI) one after another on the job's
// communicator, or parameter-server exchanges of every variable in flight together.

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <numbers>
#include <random>
#include <tuple>
#include <unordered_map>

#include "networks/nccl.hpp"
#include "simulator/engine.hpp"
#include "simulator/flow_network.hpp"

namespace dlsim::simulator {
namespace {

// Standard normal draws by Box-Muller from mt19937_64, whose output the C++ standard fixes, so
// a seed gives the same stragglers on every platform (std::normal_distribution's does not).
class Normal {
 public:
  explicit Normal(std::uint64_t seed) : rng_(seed) {}
  double operator()() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;          // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    have_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool have_spare_ = false;
};

class DesStep {
 public:
  DesStep(const StepSetup& s, const Observers& obs, FlowObserver* flow_observer)
      : s_(s), obs_(obs), planner_(s), normal_(s.seed) {
    if (s.gpu->speed_spread > 0 && s.comm.size() > 1) {
      speed_scores_ = gpu_speed_scores(s.comm.size(), s.seed);
    }
    // One network for everything: the topology's links, then one resource per memory that
    // parameter servers and node-local sums use (a host's, or a GPU's when servers sum on GPUs).
    auto capacity = link_capacities(*s.topo);
    ps_ = s.resolved.strategy == "ps";
    if (ps_) {
      for (int slot = 0; slot < s.topo->node_slots(); ++slot) {
        memory_[s.topo->host_vertex(slot)] = static_cast<int>(capacity.size());
        capacity.push_back(s.topo->node(slot).host.memory_bandwidth.value());
        for (int g = 0; g < s.topo->node(slot).gpus; ++g) {
          memory_[s.topo->gpu_vertex(slot, g)] = static_cast<int>(capacity.size());
          capacity.push_back(s.topo->node(slot).gpu.memory_bandwidth.value());
        }
      }
    }
    link_capacity_ = capacity;
    net_ = std::make_unique<FlowNetwork>(kernel_, std::move(capacity));
    if (flow_observer) net_->add_observer(flow_observer);
    run_ = std::make_unique<CollectiveRun>(kernel_, *net_, *s.topo,
                                           s.topo->cluster().network.transport);
    const auto& layers = s.compute.layers;
    double t = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) forward_ += layers[i].forward.value();
    // Backward runs the layers in reverse; a checkpoint wherever gradients appear.
    for (std::size_t i = layers.size(); i-- > 0;) {
      t += layers[i].backward.value();
      if (!layers[i].gradients.empty()) checkpoints_.push_back({t, &layers[i].gradients});
    }
    backward_ = t;
    gpus_.resize(static_cast<std::size_t>(s.comm.size()));
    tensors_ = s.compute.gradient_bytes.size();
  }

  int mirrored_nodes() const { return std::max(mirrors_, 1); }

  std::uint64_t run() {
    begin_iteration(0);
    for (std::size_t g = 0; g < gpus_.size(); ++g) start_forward(static_cast<int>(g));
    return kernel_.run();
  }

 private:
  struct Checkpoint {
    double offset;  // s after backward starts, unjittered
    const std::vector<int>* tensors;
  };
  struct Gpu {
    int iteration = 0;
    double factor = 1;  // this step's compute slowdown
    Time forward_start = 0, backward_start = 0, backward_end = 0;
    bool backward_done = false;
    Time backward_due = 0;  // when backward ends, host CPU taken by communication included
    std::uint64_t due_generation = 0;
    Time shared_seen = 0;  // shared_total_ when backward_due was last set
  };

  int n() const { return static_cast<int>(gpus_.size()); }
  Time scaled(double seconds, const Gpu& g) const { return to_time(seconds * g.factor); }

  // The job-wide state of step `i`; set when step i-1's gradients are all reduced, before any
  // GPU can start step i.
  void begin_iteration(int i) {
    iteration_ = i;
    reduced_ = 0;
    stolen_ = 0;
    comm_done_ = tensors_ == 0 || n() == 1;
    launcher_ = s_.policy->launcher(s_.resolved, s_.job);
    tick_pending_ = false;
    // One worker waits for nobody: its variation averages out, so only jobs of two or more
    // draw stragglers (and one GPU's step is the nominal step the efficiency is measured by).
    // Each GPU's own speed (speed_spread) is the same every step; the step's jitter is drawn anew.
    const double cv = n() > 1 ? s_.gpu->step_jitter : 0.0;
    factors_.resize(gpus_.size());
    for (std::size_t r = 0; r < factors_.size(); ++r) {
      const double own = speed_scores_.empty() ? 0.0 : s_.gpu->speed_spread * speed_scores_[r];
      factors_[r] = std::max(0.0, 1 + own + cv * normal_());
      // A GPU known to run at another speed (--gpu-speed) computes all of it that much slower.
      if (!s_.rank_speed.empty()) factors_[r] /= s_.rank_speed[r];
    }
  }

  void start_forward(int r) {
    auto& g = gpus_[static_cast<std::size_t>(r)];
    g.iteration = iteration_;
    g.factor = factors_[static_cast<std::size_t>(r)];
    g.backward_done = false;
    const Time start = kernel_.now();
    g.forward_start = start;
    const Time end = start + scaled(forward_, g);
    if (obs_.wants_layers()) {
      Time t = start;
      for (const auto& l : s_.compute.layers) {
        const Time e = t + scaled(l.forward.value(), g);
        obs_.emit({SpanKind::kLayerForward, g.iteration, r, layer_name(l), t, e});
        t = e;
      }
    }
    obs_.emit({SpanKind::kForward, g.iteration, r, "forward", start, end});
    g.backward_start = end;
    kernel_.at(end, [this, r] { start_backward(r); });
  }

  std::string_view layer_name(const LayerTime& l) const {
    return s_.compute.layer_names[static_cast<std::size_t>(&l - s_.compute.layers.data())];
  }

  // A GPU's compute stream waits for nothing during backward, so its checkpoints need no events
  // of their own: a tensor is ready on every rank at the latest of the ranks' checkpoint times,
  // known once the last rank has started backward. One event per checkpoint for the job, not
  // one per checkpoint and GPU.
  void start_backward(int r) {
    auto& g = gpus_[static_cast<std::size_t>(r)];
    if (obs_.wants_layers()) emit_backward_layers(r);
    if (n() > 1 && !checkpoints_.empty()) {
      if (started_backward_ == 0) ready_at_.assign(checkpoints_.size(), 0);
      for (std::size_t k = 0; k < checkpoints_.size(); ++k) {
        const Time produced = s_.overlap ? g.backward_start + scaled(checkpoints_[k].offset, g)
                                         : g.backward_start + scaled(backward_, g);
        ready_at_[k] = std::max(ready_at_[k], produced);
      }
      if (++started_backward_ == n()) {
        started_backward_ = 0;
        fired_.assign(checkpoints_.size(), 0);
        schedule_checkpoints();
      }
    }
    g.backward_due = g.backward_start + scaled(backward_, g);
    g.shared_seen = shared_total_;
    schedule_backward_done(r);
  }

  // Every checkpoint not reached yet, at its time plus the compute lost so far to the host's
  // communication work; a rescheduling supersedes the events of the one before.
  void schedule_checkpoints() {
    const auto generation = ++checkpoint_generation_;
    for (std::size_t k = 0; k < checkpoints_.size(); ++k) {
      if (!fired_[k]) schedule_checkpoint(k, generation);
    }
  }
  // Checkpoint k at its time as of now; if compute is taken later without rescheduling
  // (charge_sharing), it moves itself when it comes.
  void schedule_checkpoint(std::size_t k, std::uint64_t generation) {
    kernel_.at(ready_at_[k] + stolen_, [this, k, generation] {
      if (generation != checkpoint_generation_) return;
      if (ready_at_[k] + stolen_ > kernel_.now()) {
        schedule_checkpoint(k, generation);
        return;
      }
      fired_[k] = 1;
      for (int t : *checkpoints_[k].tensors) tensor_ready(t);
    });
  }

  void schedule_backward_done(int r) {
    auto& g = gpus_[static_cast<std::size_t>(r)];
    const auto generation = ++g.due_generation;
    kernel_.at(g.backward_due, [this, r, generation] {
      if (generation == gpus_[static_cast<std::size_t>(r)].due_generation) backward_done(r);
    });
  }

  // Shared cores (docs/simulator.md): the collective starting now takes `lost` of host CPU from
  // every rank still computing its backward pass, which ends that much later, and so does every
  // gradient it has yet to produce. Whether any rank was computing.
  bool steal(Time lost, std::string_view what) {
    if (lost <= 0) return false;
    bool computing = false;
    for (int r = 0; r < n(); ++r) {
      auto& g = gpus_[static_cast<std::size_t>(r)];
      if (g.backward_done || g.iteration != iteration_) continue;
      computing = true;
      g.backward_due += lost;
      schedule_backward_done(r);
    }
    if (!computing) return false;
    obs_.emit({SpanKind::kHostShare, iteration_, -1, what, kernel_.now(), kernel_.now() + lost});
    stolen_ += lost;
    if (!fired_.empty()) schedule_checkpoints();
    return true;
  }

  void emit_backward_layers(int r) {
    const auto& g = gpus_[static_cast<std::size_t>(r)];
    Time t = g.backward_start;
    for (std::size_t i = s_.compute.layers.size(); i-- > 0;) {
      const Time e = t + scaled(s_.compute.layers[i].backward.value(), g);
      obs_.emit({SpanKind::kLayerBackward, g.iteration, r, s_.compute.layer_names[i], t, e});
      t = e;
    }
  }

  void backward_done(int r) {
    auto& g = gpus_[static_cast<std::size_t>(r)];
    // NCCL's kernels have taken compute from this backward pass since it was last scheduled
    // (charge_sharing): it ends that much later.
    if (const Time pending = shared_total_ - g.shared_seen; pending > 0) {
      g.shared_seen = shared_total_;
      g.backward_due += pending;
      schedule_backward_done(r);
      return;
    }
    g.backward_end = kernel_.now();
    g.backward_done = true;
    obs_.emit({SpanKind::kBackward, g.iteration, r, "backward", g.backward_start, g.backward_end});
    if (comm_done_) start_update(r);
  }

  // Tensor `t` has been produced by every rank.
  void tensor_ready(int t) {
    enqueue(launcher_->ready(t, kernel_.now()));
    schedule_tick();
  }

  void schedule_tick() {
    if (tick_pending_) return;
    const auto next = launcher_->next_tick(kernel_.now());
    if (!next) return;
    tick_pending_ = true;
    kernel_.at(*next, [this] {
      tick_pending_ = false;
      enqueue(launcher_->tick(kernel_.now()));
      schedule_tick();
    });
  }

  void enqueue(std::vector<CommGroup> groups) {
    if (ps_) {
      // gRPC and ps-lite send every variable as soon as it is ready: all in flight together.
      for (auto& g : groups) start_exchange(std::move(g));
      return;
    }
    for (auto& g : groups) queue_.push_back(std::move(g));
    if (!busy_) start_group();
  }

  // The communicator's stream: one group at a time, negotiation, copy in, collective, copy out.
  void start_group() {
    if (queue_.empty()) return;
    busy_ = true;
    group_ = std::move(queue_.front());
    queue_.pop_front();
    const Time neg = to_time(group_.negotiate.value());
    if (neg > 0) {
      obs_.emit({SpanKind::kNegotiate, iteration_, -1, "NEGOTIATE_ALLREDUCE", kernel_.now(),
                 kernel_.now() + neg, group_.bytes});
    }
    kernel_.after(neg, [this] { copy_in(); });
  }

  void copy_in() {
    Time d = to_time(planner_.copy_in_time(group_).value());
    // Copies on the compute stream: while the ranks compute, their backward pass takes them and
    // the bucket is in when its last gradient is; after backward, the collective waits for them.
    if (d > 0 && group_.copies_on_compute && steal(d, "MEMCPY_IN_FUSION_BUFFER")) d = 0;
    if (d > 0) {
      obs_.emit({SpanKind::kCopyIn, iteration_, -1, "MEMCPY_IN_FUSION_BUFFER", kernel_.now(),
                 kernel_.now() + d, group_.bytes});
    }
    kernel_.after(d, [this] { collective(); });
  }

  void collective() {
    collective_start_ = kernel_.now();
    // On shared cores the collective also waits for the cores its ranks compute on, while they
    // do (latest_backward_end is -1 once none computes).
    const Time wait = planner_.core_wait(group_, latest_backward_end() - kernel_.now());
    steal(host_cpu_lost(), "HOST_CPU_COMMUNICATION");
    if (wait > 0) {
      kernel_.after(wait, [this] { run_collective(); });
    } else {
      run_collective();
    }
  }

  // Shared cores (docs/simulator.md): the library's host CPU time for the collective starting
  // now is taken from the compute only while backward runs beside it, against the latest rank's
  // end of backward so far.
  Time host_cpu_lost() {
    return planner_.host_cpu_lost(group_, latest_backward_end() - kernel_.now());
  }

  // The latest end of backward of the ranks still computing, with what NCCL's kernels have
  // taken since each was set (charge_sharing); -1 when none computes.
  Time latest_backward_end() const {
    Time b = -1;
    for (const auto& g : gpus_) {
      if (g.backward_done || g.iteration != iteration_) continue;
      b = std::max(b, g.backward_due + (shared_total_ - g.shared_seen));
    }
    return b;
  }

  // NCCL's kernel on the compute's SMs (docs/simulator.md): the collective starting now, of
  // quiet time `quiet`, slows every rank still computing by a share r while both run. Charged
  // at its start in the closed form the analytic engine uses, L = r (min(t_e, b + L) - t_s) with
  // b the latest rank's end of backward so far: every gradient still to come is L later at once
  // (the checkpoints), and each rank's end of backward when it comes (backward_done), so the
  // charge costs no event per rank.
  void charge_sharing(Time quiet) {
    const double r = planner_.compute_share(group_);
    if (r <= 0) return;
    const Time now = kernel_.now();
    const auto t = static_cast<Time>(std::llround(CollectivePlanner::compute_lost(
        r, static_cast<double>(latest_backward_end() - now), static_cast<double>(quiet))));
    if (t <= 0) return;
    obs_.emit({SpanKind::kHostShare, iteration_, -1, "NCCL_KERNEL_ON_COMPUTE", now, now + t});
    shared_total_ += t;
    stolen_ += t;  // the checkpoints not yet reached move when they come
  }

  void run_collective() {
    const Time start = kernel_.now();
    const auto key = group_key(group_);
    // The stream is the job's only traffic: a collective that starts on a quiet network takes
    // exactly the time the same collective took from a quiet start before.
    const bool quiet = net_->active() == 0;
    if (auto it = measured_.find(key); quiet && it != measured_.end()) {
      charge_sharing(it->second);
      kernel_.after(it->second, [this] { collective_done(); });
      return;
    }
    charge_sharing(to_time(planner_.plan(group_).time.value()));
    schedule_ = planner_.schedule(group_);
    run_->run(schedule_, [this, key, quiet, start] {
      if (quiet) measured_[key] = kernel_.now() - start;
      collective_done();
    });
  }

  void collective_done() {
    const auto& plan = planner_.plan(group_);
    Span span{SpanKind::kCollective, iteration_,    -1,          collective_name(),
              collective_start_,     kernel_.now(), group_.bytes};
    span.latency = to_time(plan.latency.value());
    obs_.emit(span);
    Time d = to_time(planner_.copy_out_time(group_).value());
    if (group_.copies_on_compute) {
      copy_out_pending_ += d;  // after the last collective (finalize_backward)
      d = 0;
    }
    if (d > 0) {
      obs_.emit({SpanKind::kCopyOut, iteration_, -1, "MEMCPY_OUT_FUSION_BUFFER", kernel_.now(),
                 kernel_.now() + d, group_.bytes});
    }
    kernel_.after(d, [this] { group_done(); });
  }

  std::string_view collective_name() const {
    return s_.cluster->library.nccl() ? "NCCL_ALLREDUCE" : "MPI_ALLREDUCE";
  }

  // ---- parameter servers: one exchange per variable, all in flight together ----------------
  // Each node (or each GPU) pushes its gradient to the servers holding the variable, after
  // summing its GPUs' gradients where the framework does; a server sums once every push has
  // arrived (sharing its memory with whatever else sums there) and then answers every pull; the
  // pulled parameters are copied to the node's GPUs (docs/simulator.md, "The DES engine").
  struct Pusher {
    int vertex = 0;       // where the push leaves from
    int pull_vertex = 0;  // where the pull lands
    std::vector<int> gpus;
    // The node's SHM transport, where its GPUs sum and spread with the collective library
    // through host memory (PsOptions::library_in_node): its resource id, -1 for none.
    int shm = -1;
    int pending = 0;
    int pulled = 0;
  };
  struct Exchange {
    CommGroup group;
    Time start = 0;
    std::vector<networks::PsServer> servers;
    std::vector<int> arrived;  // pushes per server
    std::vector<Pusher> pushers;
    int remaining = 0;  // pushers not yet done
    Time latency = 0;   // the exchange of one byte, for the breakdown
  };

  void start_exchange(CommGroup g) {
    exchanges_.push_back(std::make_unique<Exchange>());
    Exchange* x = exchanges_.back().get();
    x->group = std::move(g);
    x->start = kernel_.now();
    ++live_exchanges_;
    const auto req = planner_.request(x->group);
    x->servers = networks::ps_servers(req, s_.comm);
    x->arrived.assign(x->servers.size(), 0);
    x->latency = to_time(planner_.plan(x->group).latency.value());
    const auto& ps = x->group.ps;
    if (ps.aggregation == networks::PsAggregation::kNone) {
      for (int r = 0; r < s_.comm.size(); ++r) {
        const int v = s_.comm.rank_vertex[static_cast<std::size_t>(r)];
        x->pushers.push_back({v, v, {}});
      }
    } else {
      const auto nodes = s_.comm.ranks_by_node();
      if (!mirror_) {
        mirror_ = std::make_unique<NodeMirror>(s_, x->group.ps, x->servers, nodes);
        mirrors_ = mirror_->nodes();
      }
      // One node for all where they are alike (NodeMirror): node 0's exchange alone.
      const std::size_t simulated = mirrors_ > 1 ? 1 : nodes.size();
      for (std::size_t j = 0; j < simulated; ++j) {
        const auto& ranks = nodes[j];
        const auto a = networks::ps_aggregator(ps, s_.comm, ranks);
        Pusher p{a.vertex, a.pull_vertex, {}};
        for (int r : ranks) p.gpus.push_back(s_.comm.rank_vertex[static_cast<std::size_t>(r)]);
        if (ps.library_in_node) p.shm = shm_resource(j, ranks);
        x->pushers.push_back(std::move(p));
      }
    }
    x->remaining = static_cast<int>(x->pushers.size());
    for (std::size_t p = 0; p < x->pushers.size(); ++p) gather(x, p);
  }

  // A transfer between two vertices; `done` runs when it has arrived (at once for a vertex to
  // itself).
  // `socket` >= 0: a receiving-socket resource the transfer also crosses if it crosses the
  // network.
  void send(int src, int dst, double bytes, std::function<void()> done) {
    send(src, dst, bytes, -1, std::move(done));
  }
  // `latency` false: the transfer follows an earlier one on the same stream, whose latency it
  // does not pay again (its bytes leave right behind the earlier one's).
  void send(int src, int dst, double bytes, int socket, std::function<void()> done,
            bool latency = true) {
    if (src == dst || bytes <= 0) {
      done();
      return;
    }
    const auto& h = hop(src, dst);
    const std::vector<int>* route = h.route;
    if ((socket >= 0 || mirrors_ > 1) && h.network) {
      const auto key = std::make_tuple(src, dst, socket);
      auto it = socket_routes_.find(key);
      if (it == socket_routes_.end()) {
        std::vector<int> r = *h.route;
        if (mirrors_ > 1) {
          // Node 0's route as NodeMirror found it: its own links, copies of the server-side
          // ones, and no switch-to-switch link (none can bind).
          std::erase_if(r, [this](int l) { return mirror_->copies(l) == 0; });
          for (int& l : r) l = mirrored_link(l);
        }
        if (socket >= 0) r.push_back(socket);
        it = socket_routes_.emplace(key, &net_->intern(std::move(r))).first;
      }
      route = it->second;
    }
    net_->start_on(*route, bytes, latency ? to_time(h.alpha) : 0, h.cap, std::move(done));
  }
  // A message on the connection from `src` to `dst` that carries one message at a time, in the
  // order sent (PsOptions::ordered). The connection is a byte stream: a message queued behind
  // another follows it on the wire, so only a message that finds the connection idle pays the
  // route's latency and the transport's message overhead.
  void send_ordered(int src, int dst, double bytes, int socket, std::function<void()> done) {
    auto& c = connections_[{src, dst}];
    c.socket = socket;
    c.waiting.emplace_back(bytes, std::move(done));
    if (!c.busy) next_on_connection(src, dst, true);
  }
  // Sends the connection's oldest waiting message, if any, and the next when it has arrived.
  void next_on_connection(int src, int dst, bool idle) {
    auto& c = connections_[{src, dst}];
    c.busy = !c.waiting.empty();
    if (!c.busy) return;
    auto [bytes, done] = std::move(c.waiting.front());
    c.waiting.pop_front();
    send(
        src, dst, bytes, c.socket,
        [this, src, dst, done = std::move(done)] {
          done();
          next_on_connection(src, dst, false);
        },
        idle);
  }
  // `socket`: the receiving process (server s, or worker node servers + p), whose one socket
  // all its network messages share under PsOptions::shared_receive.
  void send_ps(const Exchange* x, int src, int dst, double bytes, int socket,
               std::function<void()> done) {
    if (x->group.ps.ordered) {
      send_ordered(src, dst, bytes, receive_socket(x, socket), std::move(done));
    } else {
      send(src, dst, bytes, receive_socket(x, socket), std::move(done));
    }
  }
  // The flow-network resource of receiving socket `socket`, or -1 where sockets do not bound
  // (no shared_receive, or a transport without a stream ceiling).
  int receive_socket(const Exchange* x, int socket) {
    const auto& stream = s_.topo->cluster().network.transport.stream_bandwidth;
    if (!x->group.ps.shared_receive || !stream) return -1;
    auto [it, added] = sockets_.try_emplace(socket, 0);
    if (added) {
      // A server's socket receives from every worker node: node 0's share where one stands
      // for all.
      const bool server = socket < static_cast<int>(x->servers.size());
      it->second = net_->add_resource(stream->value() / (server ? std::max(mirrors_, 1) : 1));
    }
    return it->second;
  }

  // One worker node for all (NodeMirror, docs/simulator.md): server-side link `l` as node 0
  // sees it, a copy at 1/W of its capacity; other links as they are.
  int mirrored_link(int l) {
    if (mirror_->copies(l) == 1) return l;
    auto [it, added] = shared_copy_.try_emplace(l, 0);
    if (added) {
      it->second = net_->add_resource(link_capacity_[static_cast<std::size_t>(l)] / mirrors_);
    }
    return it->second;
  }

  // Memory traffic of a sum in `vertex`'s memory.
  void sum(int vertex, double bytes, std::function<void()> done) {
    if (bytes <= 0) {
      done();
      return;
    }
    const auto it = memory_.find(vertex);
    net_->start(std::vector<int>{it->second}, bytes, 0, kInfinity, std::move(done));
  }

  // Node j's SHM transport as a resource of the flow network (created on first use); -1 where
  // NCCL's ring of the node does not go through host memory.
  int shm_resource(std::size_t j, const std::vector<int>& ranks) {
    if (j >= shm_.size()) shm_.resize(j + 1, -2);
    if (shm_[j] == -2) {
      const double rate = networks::node_shm_rate(s_.comm, ranks);
      shm_[j] = rate > 0 ? net_->add_resource(rate) : -1;
    }
    return shm_[j];
  }
  // The library's reduce-scatter (gather) or all-gather (scatter) of `bytes` over the node's
  // g GPUs through its SHM transport: (g - 1) / g x bytes of it. The node's collectives run one
  // at a time in the order they were issued (BytePS launches them from one thread on one NCCL
  // stream), each at the transport's rate (docs/networks.md, "BytePS").
  void through_shm(const Pusher& pu, double bytes, std::function<void()> done) {
    const double g = static_cast<double>(pu.gpus.size());
    auto& q = shm_queues_[pu.shm];
    q.waiting.emplace_back(bytes * (g - 1) / g, std::move(done));
    if (!q.busy) next_through_shm(pu.shm);
  }
  void next_through_shm(int resource) {
    auto& q = shm_queues_[resource];
    q.busy = !q.waiting.empty();
    if (!q.busy) return;
    auto [bytes, done] = std::move(q.waiting.front());
    q.waiting.pop_front();
    net_->start(std::vector<int>{resource}, bytes, 0, kInfinity,
                [this, resource, done = std::move(done)] {
                  done();
                  next_through_shm(resource);
                });
  }

  void gather(Exchange* x, std::size_t p) {
    auto& pu = x->pushers[p];
    if (pu.gpus.empty()) {
      push(x, p);
      return;
    }
    if (pu.shm >= 0) {
      through_shm(pu, x->group.bytes, [this, x, p] { push(x, p); });
      return;
    }
    pu.pending = static_cast<int>(pu.gpus.size());
    const double b = x->group.bytes;
    for (int gv : pu.gpus) {
      send(gv, pu.vertex, b, [this, x, p] {
        auto& q = x->pushers[p];
        if (--q.pending > 0) return;
        const int g = static_cast<int>(q.gpus.size());
        sum(q.vertex, g > 1 ? networks::reduce_traffic(x->group.bytes, g) : 0.0,
            [this, x, p] { push(x, p); });
      });
    }
  }

  void push(Exchange* x, std::size_t p) {
    const int W = static_cast<int>(x->pushers.size());  // pushes each server waits for
    const int workers = W * std::max(mirrors_, 1);      // pushes each server sums
    for (std::size_t s = 0; s < x->servers.size(); ++s) {
      const auto& sv = x->servers[s];
      if (sv.bytes <= 0) continue;
      send_ps(x, x->pushers[p].vertex, sv.vertex, sv.bytes, static_cast<int>(s),
              [this, x, s, p, W, workers] {
                const auto& server = x->servers[s];
                if (x->group.ps.apply_each) {
                  // This push alone: read the variable and the gradient, write the variable.
                  sum(server.vertex, networks::reduce_traffic(server.bytes),
                      [this, x, s, p] { pull_to(x, s, p); });
                  return;
                }
                if (++x->arrived[s] < W) return;
                sum(server.vertex, networks::reduce_traffic(server.bytes, workers),
                    [this, x, s] { pull(x, s); });
              });
    }
    if (std::none_of(x->servers.begin(), x->servers.end(),
                     [](const networks::PsServer& sv) { return sv.bytes > 0; })) {
      scatter(x, p);
    }
  }

  // Server s's new value to every pusher.
  void pull(Exchange* x, std::size_t s) {
    for (std::size_t p = 0; p < x->pushers.size(); ++p) pull_to(x, s, p);
  }
  // Server s's new value to pusher p, which scatters once every server holding a part has
  // answered.
  void pull_to(Exchange* x, std::size_t s, std::size_t p) {
    const auto& sv = x->servers[s];
    std::size_t holding = 0;
    for (const auto& other : x->servers) holding += other.bytes > 0 ? 1 : 0;
    const int socket = static_cast<int>(x->servers.size() + p);
    send_ps(x, sv.vertex, x->pushers[p].pull_vertex, sv.bytes, socket, [this, x, p, holding] {
      if (static_cast<std::size_t>(++x->pushers[p].pulled) == holding) scatter(x, p);
    });
  }

  void scatter(Exchange* x, std::size_t p) {
    auto& pu = x->pushers[p];
    if (pu.gpus.empty()) {
      pusher_done(x);
      return;
    }
    if (pu.shm >= 0) {
      // The pulled value is copied to the aggregating GPU, which spreads it.
      send(pu.pull_vertex, pu.vertex, x->group.bytes, [this, x, p] {
        through_shm(x->pushers[p], x->group.bytes, [this, x] { pusher_done(x); });
      });
      return;
    }
    pu.pending = static_cast<int>(pu.gpus.size());
    for (int gv : pu.gpus) {
      send(pu.pull_vertex, gv, x->group.bytes, [this, x, p] {
        if (--x->pushers[p].pending == 0) pusher_done(x);
      });
    }
  }

  void pusher_done(Exchange* x) {
    if (--x->remaining > 0) return;
    Span span{SpanKind::kCollective, iteration_,    -1, "PS_PUSH_PULL", x->start,
              kernel_.now(),         x->group.bytes};
    span.latency = x->latency;
    span.parameter_server = true;
    obs_.emit(span);
    reduced_ += x->group.tensors.size();
    // A tensor cut into partitions is counted by its first; the step's exchange ends when every
    // tensor is counted and no partition is still in flight (all of a tensor's start together).
    if (--live_exchanges_ == 0 && reduced_ == tensors_) {
      exchanges_.clear();
      all_reduced();
    }
  }

  struct Hop {
    const std::vector<int>* route = nullptr;
    double alpha = 0;  // s: the route's link latencies and, across nodes, the message overhead
    double cap = kInfinity;  // B/s: across nodes, the most one connection moves
    bool network = false;    // the route crosses the network
  };
  const Hop& hop(int src, int dst) {
    const auto key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32) |
                     static_cast<std::uint32_t>(dst);
    auto [it, added] = hops_.try_emplace(key);
    if (!added) return it->second;
    route_.clear();
    s_.topo->route(src, dst, -1, route_);
    auto& h = it->second;
    if (s_.topo->path_class(route_) == hardware::PathClass::kNetwork) {
      h.network = true;
      h.alpha = s_.topo->cluster().network.transport.message_overhead.value();
      if (const auto cap = s_.topo->per_flow_cap()) h.cap = cap->value();
    }
    for (int id : route_) h.alpha += s_.topo->link(id).latency.value();
    h.route = &net_->intern(route_);
    return h;
  }

  void group_done() {
    busy_ = false;
    reduced_ += group_.tensors.size();
    if (reduced_ < tensors_) {
      start_group();
      return;
    }
    all_reduced();
  }

  void all_reduced() {
    if (copy_out_pending_ > 0) {
      // finalize_backward copies every bucket out on the compute stream.
      const Time d = copy_out_pending_;
      copy_out_pending_ = 0;
      obs_.emit({SpanKind::kCopyOut, iteration_, -1, "MEMCPY_OUT_FUSION_BUFFER", kernel_.now(),
                 kernel_.now() + d});
      kernel_.after(d, [this] { all_reduced(); });
      return;
    }
    comm_done_ = true;
    for (int r = 0; r < n(); ++r) {
      if (gpus_[static_cast<std::size_t>(r)].backward_done) start_update(r);
    }
  }

  void start_update(int r) {
    const auto& g = gpus_[static_cast<std::size_t>(r)];
    const Time start = kernel_.now();
    const Time done = start + scaled(s_.compute.update.value(), g);
    obs_.emit({SpanKind::kUpdate, g.iteration, r, "update", start, done});
    // Its node's input pipeline delivers the next batch no sooner than the interval after this
    // step's began (docs/simulator.md, "Input pipeline"): the step ends waiting for it.
    natural_end_ = std::max(natural_end_, done);
    const Time end =
        s_.input_interval.empty()
            ? done
            : std::max(done,
                       g.forward_start + to_time(s_.input_interval[static_cast<std::size_t>(r)]));
    if (++updating_ == n() && iteration_ + 1 < s_.iterations) begin_iteration(iteration_ + 1);
    kernel_.at(end, [this, r] { update_done(r); });
  }

  // A synchronous step ends when the last GPU has applied the update; each GPU goes on to its
  // next forward pass as soon as its own update is done.
  void update_done(int r) {
    const int i = gpus_[static_cast<std::size_t>(r)].iteration;
    if (++updated_ == n()) {
      if (kernel_.now() > natural_end_) {
        obs_.emit({SpanKind::kInputWait, i, -1, "waiting for input", natural_end_, kernel_.now()});
      }
      natural_end_ = 0;
      obs_.emit({SpanKind::kIteration, i, -1, "step", iteration_start_, kernel_.now()});
      iteration_start_ = kernel_.now();
      updated_ = 0;
      updating_ = 0;
    }
    if (i + 1 < s_.iterations) start_forward(r);
  }

  static constexpr double kInfinity = std::numeric_limits<double>::infinity();

  const StepSetup& s_;
  const Observers& obs_;
  CollectivePlanner planner_;
  Normal normal_;
  std::vector<double> speed_scores_;  // by rank: its standard score of speed (speed_spread)
  EventKernel kernel_;
  double forward_ = 0, backward_ = 0;
  std::vector<Checkpoint> checkpoints_;
  std::vector<Gpu> gpus_;
  std::size_t tensors_ = 0;
  std::size_t live_exchanges_ = 0;  // parameter-server exchanges in flight
  struct Connection {
    bool busy = false;
    int socket = -1;  // the receiving socket's resource, or -1
    std::deque<std::pair<double, std::function<void()>>> waiting;
  };
  std::map<std::pair<int, int>, Connection> connections_;

  int iteration_ = 0;
  Time iteration_start_ = 0;
  Time natural_end_ = 0;        // the step's latest update end, before any wait for input
  std::vector<Time> ready_at_;  // per checkpoint: the latest rank reaching it
  std::vector<char> fired_;     // per checkpoint: its gradients are out
  std::uint64_t checkpoint_generation_ = 0;
  Time stolen_ = 0;            // compute this step has lost to the host's communication work
  Time copy_out_pending_ = 0;  // bucket copies the compute stream makes after the collectives
  int started_backward_ = 0;
  std::size_t reduced_ = 0;
  bool comm_done_ = false;
  int updating_ = 0, updated_ = 0;
  std::vector<double> factors_;  // the next step's slowdown of each GPU
  std::unique_ptr<GradientLauncher> launcher_;
  bool tick_pending_ = false;

  std::unique_ptr<FlowNetwork> net_;
  std::unique_ptr<CollectiveRun> run_;
  // The communicator's stream.
  std::deque<CommGroup> queue_;
  bool busy_ = false;
  CommGroup group_;
  Time collective_start_ = 0;
  Time shared_total_ = 0;        // compute NCCL's kernels have taken so far (charge_sharing)
  networks::Schedule schedule_;  // of the collective in progress
  std::map<GroupKey, Time> measured_;
  // Parameter servers.
  bool ps_ = false;
  std::map<int, int> memory_;  // vertex -> its memory's resource id in the network
  std::vector<std::unique_ptr<Exchange>> exchanges_;
  std::unordered_map<std::uint64_t, Hop> hops_;  // by (src << 32 | dst)
  std::map<int, int> sockets_;                   // receiving socket -> its resource id
  std::vector<int> shm_;                         // node -> its SHM resource (-2: not yet known)
  struct ShmQueue {
    bool busy = false;
    std::deque<std::pair<double, std::function<void()>>> waiting;
  };
  std::map<int, ShmQueue> shm_queues_;  // by SHM resource: the node's collectives, in order
  std::map<std::tuple<int, int, int>, const std::vector<int>*> socket_routes_;
  std::vector<int> route_;
  // One worker node for all (NodeMirror): the nodes node 0 stands for (0 until the first
  // exchange decides), and each server-side link's copy.
  int mirrors_ = 0;
  std::unique_ptr<NodeMirror> mirror_;
  std::unordered_map<int, int> shared_copy_;
  std::vector<double> link_capacity_;  // B/s, by link id and resource id
};

}  // namespace

EngineRun run_des(const StepSetup& setup, const Observers& observers, FlowObserver* flow_observer) {
  DesStep step(setup, observers, flow_observer);
  EngineRun run{step.run()};
  run.mirrored_nodes = step.mirrored_nodes();
  return run;
}

}  // namespace dlsim::simulator
