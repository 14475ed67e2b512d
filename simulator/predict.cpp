#include "simulator/predict.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "common/error.hpp"
#include "common/version.hpp"
#include "hardware/loader.hpp"
#include "hardware/render.hpp"
#include "model/analysis.hpp"
#include "model/loader.hpp"
#include "networks/placement.hpp"
#include "simulator/engine.hpp"
#include "simulator/flow_network.hpp"
#include "simulator/kernel.hpp"

namespace dlsim::simulator {
namespace {

// Collects per step what the efficiency breakdown needs (docs/simulator.md, "Where the
// efficiency goes"): step bounds, the last backward end, the channel's activities.
class Breakdown : public StepObserver {
 public:
  struct Step {
    Time begin = 0, end = 0;
    Time backward_end = 0;
    Time host_share = 0;  // compute lost to the host's communication work
    Time input_wait = 0;  // the step's end waiting for the input pipeline
    std::vector<Span> channel;
  };
  void on_span(const Span& s) override {
    auto& st = step(s.iteration);
    switch (s.kind) {
      case SpanKind::kIteration:
        st.begin = s.begin;
        st.end = s.end;
        break;
      case SpanKind::kBackward:
        st.backward_end = std::max(st.backward_end, s.end);
        break;
      case SpanKind::kNegotiate:
      case SpanKind::kCopyIn:
      case SpanKind::kCollective:
      case SpanKind::kCopyOut:
        st.channel.push_back(s);
        break;
      case SpanKind::kHostShare:
        st.host_share += s.end - s.begin;
        break;
      case SpanKind::kInputWait:
        st.input_wait += s.end - s.begin;
        break;
      default:
        break;
    }
  }
  const std::vector<Step>& steps() const { return steps_; }

 private:
  Step& step(int i) {
    if (static_cast<std::size_t>(i) >= steps_.size())
      steps_.resize(static_cast<std::size_t>(i) + 1);
    return steps_[static_cast<std::size_t>(i)];
  }
  std::vector<Step> steps_;
};

// Time after the last backward with nothing in flight (Horovod's next cycle, a bucket not yet
// full): waiting, not communication.
double idle_after_backward(const Prediction& p) {
  return p.after_backward_s - p.exposed_communication_s;
}

struct Means {
  double step = 0, backward_end = 0, communication = 0, exposed = 0, after_backward = 0;
  EfficiencyLoss loss;  // without stragglers and other
  int groups = 0;
};

Means summarize(const Breakdown& b) {
  Means m;
  const auto& steps = b.steps();
  for (const auto& st : steps) {
    m.step += to_seconds(st.end - st.begin);
    m.backward_end += to_seconds(st.backward_end - st.begin);
    m.loss.communication_on_compute += to_seconds(st.host_share);
    m.loss.input_pipeline += to_seconds(st.input_wait);
    Time comm_end = st.backward_end;
    for (const auto& c : st.channel) {
      comm_end = std::max(comm_end, c.end);
      if (c.kind == SpanKind::kCollective) ++m.groups;
    }
    // Parameter-server exchanges overlap one another: time is cut at every span boundary, and
    // each slice in which k activities run is shared among them (1/k each). Communication is
    // the time at least one runs; the exposed window, after the last GPU's backward until the
    // last activity ends, is charged to the causes of what runs in it, idle gaps to the policy
    // waiting.
    std::vector<Time> cuts;
    for (const auto& c : st.channel) {
      cuts.push_back(c.begin);
      cuts.push_back(c.end);
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const Time w0 = st.backward_end;
    const Time w1 = comm_end;
    m.after_backward += to_seconds(w1 - w0);
    Time covered = 0;
    std::vector<const Span*> running;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      const Time a = cuts[i], z = cuts[i + 1];
      running.clear();
      for (const auto& c : st.channel) {
        if (c.begin <= a && c.end >= z) running.push_back(&c);
      }
      if (running.empty()) continue;
      m.communication += to_seconds(z - a);
      const Time ov = std::max<Time>(0, std::min(z, w1) - std::max(a, w0));
      if (ov == 0) continue;
      covered += ov;
      const double share = to_seconds(ov) / static_cast<double>(running.size());
      for (const Span* c : running) {
        if (c->kind != SpanKind::kCollective) {
          m.loss.fusion_or_bucket_waiting += share;
          continue;
        }
        const double d = to_seconds(c->end - c->begin);
        const double lat = d > 0 ? std::min(1.0, to_seconds(c->latency) / d) : 1.0;
        m.loss.latency_and_small_messages += share * lat;
        (c->parameter_server ? m.loss.parameter_server_bottleneck : m.loss.exposed_bandwidth) +=
            share * (1 - lat);
      }
    }
    m.loss.fusion_or_bucket_waiting += to_seconds(std::max<Time>(0, (w1 - w0) - covered));
    m.exposed += to_seconds(covered);
  }
  const double n = std::max<double>(1, static_cast<double>(steps.size()));
  m.step /= n;
  m.backward_end /= n;
  m.communication /= n;
  m.exposed /= n;
  m.after_backward /= n;
  m.groups = static_cast<int>(std::lround(m.groups / n));
  for (double* v : {&m.loss.exposed_bandwidth, &m.loss.latency_and_small_messages,
                    &m.loss.fusion_or_bucket_waiting, &m.loss.parameter_server_bottleneck,
                    &m.loss.communication_on_compute, &m.loss.input_pipeline}) {
    *v /= n;
  }
  return m;
}

struct Resolved {
  model::LayerGraph graph;
  hardware::ClusterSpec cluster;
  ComputeOptions compute;
};

// Memory at batch b (one analysis of the graph).
MemoryUse memory_at(const model::LayerGraph& g, std::int64_t b, const ComputeOptions& c,
                    Bytes buffers) {
  const auto stats = model::analyze(g, b, activation_precision(c.precision));
  return memory_use(stats, c, buffers);
}

}  // namespace

std::optional<Engine> parse_engine(std::string_view text) {
  if (text == "des") return Engine::kDes;
  if (text == "analytic") return Engine::kAnalytic;
  return std::nullopt;
}

std::string_view to_string(Engine e) { return e == Engine::kDes ? "des" : "analytic"; }

bool set_batch(PredictOptions& o, std::string_view text) {
  if (text == "max") {
    o.batch_max = true;
    o.batch.reset();
    return true;
  }
  std::int64_t b = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), b);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || b < 1 ||
      b > kMaxBatch) {
    return false;
  }
  o.batch = b;
  o.batch_max = false;
  return true;
}

std::string batch_text(const PredictOptions& o) {
  if (o.batch_max) return "max";
  return std::to_string(o.batch.value_or(kDefaultBatch));
}

bool PredictInputs::matches(const PredictOptions& o) const {
  return o.model == model && o.model_params == model_params && o.cluster == cluster_ref &&
         o.library == library && o.network == network;
}

namespace {

// By rank, the least time between two step starts its node's input pipeline allows: the
// node's GPUs' samples of a step over the pipeline's rate (docs/simulator.md, "Input pipeline").
std::vector<double> input_intervals(const networks::Communicator& comm, std::int64_t batch,
                                    double rate) {
  std::vector<double> interval(static_cast<std::size_t>(comm.size()), 0.0);
  for (const auto& ranks : comm.ranks_by_node()) {
    const double t = static_cast<double>(batch) * static_cast<double>(ranks.size()) / rate;
    for (int r : ranks) interval[static_cast<std::size_t>(r)] = t;
  }
  return interval;
}

// What the options alone can tell, before any file is read.
void check_options(const PredictOptions& o) {
  if (o.gpus < 1) fail_at({}, "gpus", fmt::format("must be at least 1, got {}", o.gpus));
  if (o.iterations < 1 || o.iterations > kMaxIterations) {
    fail_at({}, "iterations",
            fmt::format("must be in 1..{}, got {}", kMaxIterations, o.iterations));
  }
  if (o.batch && (*o.batch < 1 || *o.batch > kMaxBatch)) {
    fail_at({}, "batch", fmt::format("must be in 1..{}, got {}", kMaxBatch, *o.batch));
  }
  if (o.anchor_throughput && !(*o.anchor_throughput >= kMinAnchorThroughput &&
                               *o.anchor_throughput <= kMaxAnchorThroughput)) {
    fail_at({}, "anchor_throughput",
            fmt::format("must be positive samples/s, at least {:g} and at most {:g}, got {}",
                        kMinAnchorThroughput, kMaxAnchorThroughput, *o.anchor_throughput));
  }
  if (o.input_rate && !(*o.input_rate > 0 && *o.input_rate <= kMaxInputRate)) {
    fail_at({}, "input_rate",
            fmt::format("must be positive samples/s per node, at most {:g}, got {}", kMaxInputRate,
                        *o.input_rate));
  }
  for (const auto& [rank, speed] : o.gpu_speed) {
    if (rank < 0 || rank >= o.gpus) {
      fail_at({}, "gpu_speed",
              fmt::format("rank {} is not in a job of {} GPU(s) (ranks 0..{})", rank, o.gpus,
                          o.gpus - 1));
    }
    if (!(speed >= kMinGpuSpeed && speed <= kMaxGpuSpeed)) {
      fail_at({}, "gpu_speed",
              fmt::format("rank {}'s speed must be in [{:g}, {:g}] of its profile's, got {}", rank,
                          kMinGpuSpeed, kMaxGpuSpeed, speed));
    }
  }
  static_cast<void>(framework_policies().at(o.framework, {}, "framework"));
  if (o.strategy) networks::collective_algorithms().at(*o.strategy, {}, "strategy");
}

}  // namespace

PredictInputs load_inputs(const PredictOptions& o) {
  check_options(o);
  auto graph = model::load_model(o.model, o.model_params);
  hardware::check_reference(o.cluster, "cluster", "cluster");
  if (o.library) hardware::check_reference(*o.library, "library", "library");
  if (o.network) hardware::check_reference(*o.network, "network", "network");
  auto cluster = hardware::load_cluster(o.cluster, o.library, o.network);
  return PredictInputs{std::move(graph), std::move(cluster), o.model,  o.cluster,
                       o.model_params,   o.library,          o.network};
}

Prediction predict(const PredictOptions& o, StepObserver* trace) {
  return predict(o, load_inputs(o), trace);
}

Prediction predict(const PredictOptions& o, const PredictInputs& inputs, StepObserver* trace) {
  if (!inputs.matches(o)) {
    throw std::logic_error("predict: the loaded model and cluster are not the options' own");
  }
  check_options(o);
  ComputeOptions copt;
  copt.precision = o.precision;
  copt.optimizer = o.optimizer;
  copt.anchor_throughput = o.anchor_throughput;
  const auto& policy_entry = framework_policies().at(o.framework, {}, "framework");

  const auto& graph = inputs.graph;
  const auto& cluster = inputs.cluster;
  networks::PlacementRequest pr;
  pr.gpus = o.gpus;
  pr.gpus_per_node = o.gpus_per_node;
  pr.nodelist = o.nodelist;
  const auto placement = networks::place(cluster, pr);

  StepSetup setup;
  setup.cluster = &cluster;
  const auto& node0 = networks::node_spec(cluster, placement.nodes.front());
  setup.gpu = &node0.gpu;
  setup.iterations = o.iterations;
  setup.seed = o.seed;
  setup.overlap = o.overlap;
  setup.mirror_nodes = o.mirror_nodes;
  if (!o.gpu_speed.empty()) {
    setup.rank_speed.assign(static_cast<std::size_t>(o.gpus), 1.0);
    for (const auto& [rank, speed] : o.gpu_speed) {
      setup.rank_speed[static_cast<std::size_t>(rank)] = speed;
    }
  }
  const auto policy = policy_entry.make();
  setup.policy = policy.get();

  // Gradients do not depend on the batch: size the job's tensors from a batch-1 analysis.
  const auto unit = model::analyze(graph, 1, activation_precision(copt.precision));
  JobInfo& job = setup.job;
  job.gpus = o.gpus;
  job.nodes = static_cast<int>(placement.nodes.size());
  job.gpus_per_node = o.gpus_per_node.value_or(node0.gpus);
  for (const auto& g : unit.gradients) {
    job.gradient_elems.push_back(g.elements);
    job.gradient_names.push_back(g.parameter);
    job.gradient_bytes.push_back(static_cast<double>(g.elements) *
                                 gradient_element(copt.precision).value());
  }
  setup.resolved = policy->resolve(o.framework_options, o.strategy, job);
  // Compression.fp16 (docs/simulator.md, "Gradient compression"): with more than one GPU the
  // optimizer wrapper casts each gradient wider than 2 bytes to float16 for the exchange, so
  // 2 bytes per element travel; one GPU exchanges nothing and casts nothing.
  const double wide = gradient_element(copt.precision).value();
  const bool casts = setup.resolved.compress_per_tensor && wide > 2 && o.gpus > 1;
  if (casts) {
    for (std::size_t t = 0; t < job.gradient_bytes.size(); ++t) {
      job.gradient_bytes[t] = static_cast<double>(job.gradient_elems[t]) * 2.0;
    }
  }
  if (setup.resolved.after_backward) {
    setup.overlap = false;
    setup.resolved.settings["exchange"] = "after the backward pass";
  }
  networks::collective_algorithms().at(setup.resolved.strategy, {});
  const Bytes buffers = policy->buffer_bytes(setup.resolved, job);

  // The batch: given, the default, or the largest that fits (memory is linear in the batch:
  // activations and workspace grow with it, everything else is fixed).
  const Bytes capacity = node0.gpu.memory_capacity;
  std::int64_t batch = kDefaultBatch;
  if (o.batch_max) {
    const auto m1 = memory_at(graph, 1, copt, buffers);
    const auto m2 = memory_at(graph, 2, copt, buffers);
    const double per_sample = (m2.total() - m1.total()).value();
    if (m1.total() > capacity) {
      fail_at({}, "batch",
              fmt::format("even batch 1 needs {} per GPU, more than the {} of a {}",
                          format_bytes(m1.total()), format_bytes(capacity), node0.gpu.about.name));
    }
    batch = 1 + static_cast<std::int64_t>(std::floor((capacity - m1.total()).value() / per_sample));
    // Settle rounding: the largest batch whose analysed footprint fits.
    while (batch > 1 && memory_at(graph, batch, copt, buffers).total() > capacity) --batch;
    while (memory_at(graph, batch + 1, copt, buffers).total() <= capacity) ++batch;
  } else if (o.batch) {
    batch = *o.batch;
  }
  auto stats = model::analyze(graph, batch, activation_precision(copt.precision));
  if (!node0.gpu.kernels.empty()) model::add_signatures(stats, graph);
  const auto memory = memory_use(stats, copt, buffers);
  if (memory.total() > capacity) {
    fail_at({}, "batch",
            fmt::format("batch {} needs {} per GPU (activations {}), more than the {} of a {}; "
                        "use a smaller --batch or --batch max",
                        batch, format_bytes(memory.total()), format_bytes(memory.activations),
                        format_bytes(capacity), node0.gpu.about.name));
  }
  setup.compute = compute_profile(stats, node0.gpu, copt);
  // The casts run on the compute stream: each cast to fp16 right after backward produces its
  // gradient, each cast back before the update; scaled with the rest of compute.
  const ComputeProfile base_compute = setup.compute;
  Seconds cast_before, cast_after;
  if (casts) {
    for (auto& layer : setup.compute.layers) {
      for (int t : layer.gradients) {
        const Seconds c = fp16_cast_time(node0.gpu, job.gradient_elems[static_cast<std::size_t>(t)],
                                         Bytes(wide)) *
                          setup.compute.scale;
        layer.backward += c;
        cast_before += c;
        cast_after += c;
      }
    }
    setup.compute.backward += cast_before;
    setup.compute.backward_memory_bound += cast_before;
    setup.compute.update += cast_after;
    for (auto& b : setup.compute.gradient_bytes) b = b * 2.0 / wide;
  }

  // The job's topology, with dedicated parameter-server nodes when the policy asks for them.
  const bool dedicated = setup.resolved.strategy == "ps" && !setup.resolved.ps.colocated;
  const auto job_nodes =
      networks::with_server_nodes(cluster, placement, dedicated ? setup.resolved.ps.servers : 0);
  setup.topo = std::make_unique<networks::Topology>(cluster, job_nodes.nodes, o.rails.value_or(0));
  setup.comm = networks::make_communicator(*setup.topo, placement, job_nodes.server_slots);
  double least_step = 0;  // s: the slowest node's interval between step starts
  if (o.input_rate) {
    setup.input_interval = input_intervals(setup.comm, batch, *o.input_rate);
    least_step = *std::max_element(setup.input_interval.begin(), setup.input_interval.end());
    // The steps the engine runs back to back must stay within the simulator's clock.
    const int steps = o.engine == Engine::kDes ? o.iterations : 1;
    if (least_step * steps > kMaxSimulatedSeconds) {
      fail_at({}, "input_rate",
              fmt::format("{:g} samples/s per node makes a step of at least {:.3g} s ({:.0f} "
                          "samples a node): {} step(s) pass the simulator's clock of {:g} s",
                          *o.input_rate, least_step, least_step * *o.input_rate, steps,
                          kMaxSimulatedSeconds));
    }
  }
  // Negotiation messages repeat every cycle with the same size: cost each size once.
  const auto once_per_size = [&setup](Seconds (*cost)(const networks::Communicator&, Bytes)) {
    return [&setup, cost, cache = std::make_shared<std::map<double, Seconds>>()](Bytes b) {
      auto [it, added] = cache->try_emplace(b.value());
      if (added) it->second = cost(setup.comm, b);
      return it->second;
    };
  };
  job.small_allreduce = once_per_size(small_allreduce_time);
  job.small_broadcast = once_per_size(small_broadcast_time);

  Observers observers;
  Breakdown breakdown;
  observers.add(&breakdown);
  if (trace) {
    std::vector<RankInfo> ranks;
    for (const auto& r : placement.ranks) {
      ranks.push_back(
          {r.node, networks::hostname(cluster, placement.nodes[static_cast<std::size_t>(r.node)]),
           r.gpu});
    }
    trace->on_layout(ranks);
    observers.add(trace);
  }
  EngineRun run;
  if (o.engine == Engine::kDes) {
    run = run_des(setup, observers);
  } else {
    run = run_analytic(setup, observers);
  }
  const Means m = summarize(breakdown);

  // The single-GPU step at the same per-GPU batch: the same engine on one GPU.
  double single = m.step;
  double single_backward_end = m.backward_end;
  double single_input_wait = m.loss.input_pipeline;
  if (o.gpus > 1 || !setup.rank_speed.empty()) {
    StepSetup one;
    one.cluster = setup.cluster;
    one.gpu = setup.gpu;
    one.compute = base_compute;
    networks::PlacementRequest p1;
    p1.gpus = 1;
    p1.nodelist = networks::hostname(cluster, placement.nodes.front());
    const auto pl1 = networks::place(cluster, p1);
    one.topo = std::make_unique<networks::Topology>(cluster, pl1.nodes, o.rails.value_or(0));
    one.comm = networks::make_communicator(*one.topo, pl1);
    if (o.input_rate) one.input_interval = input_intervals(one.comm, batch, *o.input_rate);
    one.policy = setup.policy;
    one.resolved = setup.resolved;
    one.job = setup.job;
    one.job.gpus = 1;
    one.job.nodes = 1;
    one.iterations = setup.iterations;
    one.seed = setup.seed;
    Observers obs1;
    Breakdown b1;
    obs1.add(&b1);
    if (o.engine == Engine::kDes) {
      run_des(one, obs1);
    } else {
      run_analytic(one, obs1);
    }
    const Means m1 = summarize(b1);
    single = m1.step;
    single_backward_end = m1.backward_end;
    single_input_wait = m1.loss.input_pipeline;
  }

  Prediction p;
  p.model = graph.name();
  p.cluster = cluster.about.name;
  p.framework = o.framework;
  p.strategy = setup.resolved.strategy;
  p.engine = std::string(to_string(o.engine));
  p.precision = to_string(copt.precision);
  p.optimizer = to_string(copt.optimizer);
  p.gpus = o.gpus;
  p.nodes = static_cast<int>(placement.nodes.size());
  p.iterations = o.iterations;
  p.seed = o.seed;
  p.batch_per_gpu = batch;
  check_within_clock(m.step);
  p.step_time_s = m.step;
  p.single_gpu_step_s = single;
  p.throughput = static_cast<double>(batch) * o.gpus / m.step;
  p.scaling_efficiency = single / m.step;
  p.forward_s = base_compute.forward.value();
  p.backward_s = base_compute.backward.value();
  p.update_s = base_compute.update.value();
  p.communication_s = m.communication;
  p.exposed_communication_s = m.exposed;
  p.after_backward_s = m.after_backward;
  p.loss = m.loss;
  p.loss.stragglers =
      m.backward_end - single_backward_end - p.loss.communication_on_compute - cast_before.value();
  p.loss.communication_on_compute += (cast_before + cast_after).value();
  if (std::abs(p.loss.stragglers) < 1e-12) p.loss.stragglers = 0;  // rounding of the subtraction
  // The wait beyond what the 1-GPU step already waits.
  p.loss.input_pipeline = m.loss.input_pipeline - single_input_wait;
  if (std::abs(p.loss.input_pipeline) < 1e-12) p.loss.input_pipeline = 0;
  if (o.input_rate) p.input_wait_s = m.loss.input_pipeline;
  const double parts = p.loss.exposed_bandwidth + p.loss.latency_and_small_messages +
                       p.loss.fusion_or_bucket_waiting + p.loss.parameter_server_bottleneck +
                       p.loss.communication_on_compute + p.loss.input_pipeline + p.loss.stragglers;
  p.loss.other = (m.step - single) - parts;
  p.memory = memory;
  p.memory_capacity_bytes = capacity.value();
  p.fits_in_memory = memory.total() <= capacity;
  p.groups = m.groups;
  // DDP's fp16 hook keeps the buckets in the gradients' bytes and sends 2 bytes per element.
  const bool bucket_casts = compresses_fp16(setup.resolved) &&
                            !setup.resolved.compress_per_tensor && wide > 2 && o.gpus > 1;
  const double wire = bucket_casts ? 2.0 / wide : 1.0;
  for (double b : job.gradient_bytes) p.gradient_bytes += b * wire;
  p.anchor_scale = setup.compute.scale;
  p.compute_measured_share =
      setup.compute.step().value() > 0 ? setup.compute.measured / setup.compute.step() : 0.0;
  p.policy_description = setup.resolved.description;
  p.policy_settings = setup.resolved.settings;
  p.events = run.events;
  p.mirrored_nodes = run.mirrored_nodes;
  if (o.gpus > 1 && !job.gradient_bytes.empty()) {
    // What bounds the largest exchange: its collective executed alone, phase by phase.
    // The largest of: the largest tensor (one above the fusion threshold or bucket cap travels
    // alone) and a full fusion buffer or bucket.
    networks::CollectiveRequest req;
    req.size =
        Bytes(*std::max_element(job.gradient_bytes.begin(), job.gradient_bytes.end()) * wire);
    if (const auto& buffer = setup.resolved.params.fusion_threshold
                                 ? setup.resolved.params.fusion_threshold
                                 : setup.resolved.params.bucket_cap) {
      req.size = std::max(req.size, std::min(*buffer * wire, Bytes(p.gradient_bytes)));
    }
    req.ps = setup.resolved.ps;
    if (const auto& part = setup.resolved.params.partition_bytes) {
      // BytePS sends a tensor as partitions, each whole to one server (policy_byteps.cpp): its
      // largest exchange is one partition on one server, not the tensor split over all of
      // them (which also cost W x S transfers to schedule: seconds past 4,096 GPUs).
      req.size = std::min(req.size, *part);
      req.ps.sharding = "round_robin";
      req.ps.tensors = {req.size.value()};
      req.ps.server_offset = 0;
    }
    const auto r = networks::run_collective(req, setup.comm, setup.resolved.strategy);
    const auto slowest =
        std::max_element(r.execution.phases.begin(), r.execution.phases.end(),
                         [](const auto& a, const auto& b) { return a.time < b.time; });
    p.largest_collective_bytes = req.size.value();
    p.largest_collective_s = r.time.value();
    p.collective_algorithm = r.cost.algorithm;
    p.collective_protocol = r.cost.protocol;
    p.collective_channels = r.cost.channels;
    p.collective_why = r.cost.why;
    CommGroup largest;
    largest.bytes = req.size.value();
    largest.ps = req.ps;
    p.collective_compute_share = CollectivePlanner(setup).compute_share(largest);
    if (slowest != r.execution.phases.end()) {
      p.bottleneck = fmt::format("{} ({} steps), bound by {}", slowest->label, slowest->steps,
                                 slowest->bottleneck.empty() ? "latency" : slowest->bottleneck);
    }
  }
  p.hardware = hardware::to_json(hardware::AnySpec(cluster));

  // Why, in words.
  auto ms = [](double s) { return fmt::format("{:.2f} ms", s * 1e3); };
  p.why.push_back(fmt::format(
      "compute per GPU: forward {} + backward {} + update {} at batch {} in {} on {}{}",
      ms(p.forward_s), ms(p.backward_s), ms(p.update_s), batch, p.precision, node0.gpu.about.name,
      p.anchor_scale != 1 ? fmt::format(" (scaled x{:.3f} to the anchor)", p.anchor_scale) : ""));
  if (setup.compute.measured_layers > 0 || setup.compute.measured_update) {
    p.why.push_back(fmt::format(
        "compute from measurement: {} of {} layers{} from the profile's layer table at {} "
        "thread(s) ({}), {:.1f} % of the compute time; the rest from the roofline",
        setup.compute.measured_layers, setup.compute.layers_with_work,
        setup.compute.measured_update ? " and the update" : "", node0.gpu.threads,
        node0.gpu.kernels_source, 100 * p.compute_measured_share));
  }
  if (o.gpus > 1) {
    p.why.push_back(fmt::format("gradients: {} in {} tensors, {} collectives per step; {}",
                                format_bytes(Bytes(p.gradient_bytes)), job.gradient_bytes.size(),
                                p.groups, p.policy_description));
    // BytePS's servers take what its key hash gives them, not an even share.
    if (o.framework == "byteps" && job.nodes > 1 && setup.resolved.ps.servers > 1) {
      std::vector<double> load(static_cast<std::size_t>(setup.resolved.ps.servers), 0.0);
      const auto launcher = setup.policy->launcher(setup.resolved, job);
      for (std::size_t t = 0; t < job.gradient_bytes.size(); ++t) {
        for (const auto& g : launcher->ready(static_cast<int>(t), 0)) {
          load.at(static_cast<std::size_t>(g.ps.server_offset)) += g.bytes;
        }
      }
      const double busiest = *std::max_element(load.begin(), load.end());
      p.why.push_back(fmt::format(
          "byteps: its key hash gives the busiest of the {} servers {:.2f} times the mean load "
          "({} of the {} each worker node pushes; docs/simulator.md, \"byteps\")",
          load.size(), busiest * static_cast<double>(load.size()) / p.gradient_bytes,
          format_bytes(Bytes(busiest)), format_bytes(Bytes(p.gradient_bytes))));
    }
    std::string waits;
    if (!o.overlap) {
      waits = " (no overlap: every exchange waits for the whole backward pass)";
    } else if (setup.resolved.after_backward) {
      waits = fmt::format(" (every exchange waits for the whole backward pass: {})",
                          *setup.resolved.after_backward);
    }
    const double idle = idle_after_backward(p);
    p.why.push_back(fmt::format(
        "communication: {} per step, {} of it exposed after the last backward{}{}",
        ms(p.communication_s), ms(p.exposed_communication_s),
        idle > 0.5e-6
            ? fmt::format(", where the step also waits {} with nothing in flight", ms(idle))
            : "",
        waits));
    if (!p.bottleneck.empty()) {
      p.why.push_back(fmt::format("largest collective: {} {}{} in {}; its longest phase is {}",
                                  format_bytes(Bytes(p.largest_collective_bytes)),
                                  p.collective_algorithm,
                                  p.collective_protocol.empty() ? "" : "/" + p.collective_protocol,
                                  ms(p.largest_collective_s), p.bottleneck));
      p.why.push_back(fmt::format("why {}: {}", p.collective_algorithm, p.collective_why));
    }
    if (p.loss.communication_on_compute > 0) {
      const auto& lib = cluster.library;
      std::vector<std::string> what;
      if (o.framework == "pytorch-ddp") {
        what.push_back(
            bucket_casts
                ? fmt::format("DDP copies each bucket in and out on the compute stream, and its "
                              "fp16_compress_hook casts the bucket to float16, divides it and "
                              "casts the result back, {} on the wire instead of {}",
                              format_bytes(Bytes(p.gradient_bytes)),
                              format_bytes(Bytes(p.gradient_bytes / wire)))
                : "DDP copies each bucket in and out on the compute stream");
      }
      if (casts) {
        what.push_back(fmt::format(
            "the fp16 compression casts {} gradients to float16 as backward produces them ({}) "
            "and back before the update ({}), {} on the wire instead of {}",
            job.gradient_bytes.size(), ms(cast_before.value()), ms(cast_after.value()),
            format_bytes(Bytes(p.gradient_bytes)),
            format_bytes(Bytes(p.gradient_bytes * wide / 2.0))));
      }
      const double shared_fraction = shared_cores(setup);
      if (shared_fraction > 0) {
        what.push_back(fmt::format(
            "{} ranks of {} thread(s) on a node's {} cores leave {:.0f} % of the library's host "
            "CPU work ({:.1f} us per call + {:.3g} ns/B, {}) to the compute's cores, taken while "
            "backward runs beside each collective",
            placement.nodes.empty() ? 0 : o.gpus / static_cast<int>(placement.nodes.size()),
            node0.gpu.threads, node0.host.cores, 100 * shared_fraction,
            lib.cpu_per_call.value() * 1e6, lib.cpu_per_byte.value() * 1e9, lib.about.name));
      }
      if (cluster.library.nccl() && setup.resolved.strategy != "ps") {
        const auto& c = setup.compute;
        what.push_back(fmt::format(
            "NCCL's kernel takes {} from the arithmetic-bound kernels and {:g} bytes of memory "
            "traffic per byte it sends from the memory-bound ones, {:.0f} % of backward; the "
            "largest collective takes {:.1f} % of the compute it overlaps",
            node0.gpu.sm_count > 0
                ? fmt::format("one of the GPU's {} SMs per channel", node0.gpu.sm_count)
                : std::string("no SM (the GPU profile gives no sm_count)"),
            kNcclMemoryPerBusByte,
            c.backward.value() > 0 ? 100 * c.backward_memory_bound.value() / c.backward.value()
                                   : 0.0,
            100 * p.collective_compute_share));
      }
      p.why.push_back(
          fmt::format("communication work on compute: backward ends {} later per step{} ({})",
                      ms(p.loss.communication_on_compute - cast_after.value()),
                      casts ? fmt::format(", the update {} later", ms(cast_after.value())) : "",
                      fmt::join(what, "; ")));
    }
    if (p.mirrored_nodes > 1) {
      p.why.push_back(fmt::format(
          "node 0's parameter-server exchanges stood for all {} worker nodes (alike nodes, "
          "servers on their own nodes; docs/simulator.md, \"One worker node for all\")",
          p.mirrored_nodes));
    }
    p.why.push_back(fmt::format(
        "stragglers: the slowest of {} GPUs ends backward {} after one GPU alone would "
        "(step_jitter {:g}{})",
        o.gpus, ms(p.loss.stragglers), node0.gpu.step_jitter,
        node0.gpu.speed_spread > 0 ? fmt::format(", speed_spread {:g}", node0.gpu.speed_spread)
                                   : ""));
  } else {
    p.why.push_back("one GPU: no gradient exchange");
  }
  if (o.input_rate) {
    p.why.push_back(fmt::format(
        "input pipeline: {:g} samples/s per node; a node's {:.0f} samples a step take it {}, the "
        "least a step can take; the step waits {} for its batches{} (docs/simulator.md, \"Input "
        "pipeline\")",
        *o.input_rate, least_step * *o.input_rate, ms(least_step), ms(*p.input_wait_s),
        o.gpus > 1 ? fmt::format(", one GPU alone {}", ms(single_input_wait)) : ""));
  }
  if (!o.gpu_speed.empty()) {
    std::vector<std::string> given;
    for (const auto& [rank, speed] : o.gpu_speed) {
      given.push_back(fmt::format("rank {} at {:g}", rank, speed));
    }
    p.why.push_back(fmt::format(
        "GPU speeds given (--gpu-speed): {} of the profile's; the step waits for the slowest, "
        "{} of backward beyond a GPU of the profile's speed, counted with the stragglers",
        fmt::join(given, ", "), ms(p.loss.stragglers)));
  }
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : o.model_params) params[k] = v;
  p.inputs = {
      {"model", o.model},
      {"set", params},
      {"gpus", o.gpus},
      {"gpus_per_node", o.gpus_per_node ? nlohmann::json(*o.gpus_per_node) : nlohmann::json()},
      {"nodelist", o.nodelist},
      {"batch", batch_text(o)},
      {"cluster", o.cluster},
      {"library", o.library ? nlohmann::json(*o.library) : nlohmann::json()},
      {"network", o.network ? nlohmann::json(*o.network) : nlohmann::json()},
      {"rails", o.rails ? nlohmann::json(*o.rails) : nlohmann::json()},
      {"framework", o.framework},
      {"strategy", o.strategy ? nlohmann::json(*o.strategy) : nlohmann::json()},
      {"precision", to_string(o.precision)},
      {"optimizer", to_string(o.optimizer)},
      {"iterations", o.iterations},
      {"seed", o.seed},
      {"overlap", o.overlap},
      {"xla", o.framework_options.xla},
      {"host_staging", o.framework_options.host_staging},
      {"engine", to_string(o.engine)},
      {"anchor_throughput_samples_per_s",
       o.anchor_throughput ? nlohmann::json(*o.anchor_throughput) : nlohmann::json()}};
  if (o.input_rate) p.inputs["input_rate_samples_per_s"] = *o.input_rate;
  if (!o.gpu_speed.empty()) {
    nlohmann::json speeds = nlohmann::json::object();
    for (const auto& [rank, speed] : o.gpu_speed) speeds[std::to_string(rank)] = speed;
    p.inputs["gpu_speed"] = speeds;
  }
  return p;
}

nlohmann::json to_json(const Prediction& p) {
  nlohmann::json j;
  j["model"] = p.model;
  j["gpus"] = p.gpus;
  j["nodes"] = p.nodes;
  j["batch_per_gpu"] = p.batch_per_gpu;
  j["global_batch"] = p.batch_per_gpu * p.gpus;
  j["cluster"] = p.cluster;
  j["framework"] = p.framework;
  j["strategy"] = p.strategy;
  j["engine"] = p.engine;
  j["precision"] = p.precision;
  j["optimizer"] = p.optimizer;
  j["step_time_s"] = p.step_time_s;
  j["single_gpu_step_time_s"] = p.single_gpu_step_s;
  j["throughput_samples_per_s"] = p.throughput;
  j["scaling_efficiency"] = p.scaling_efficiency;
  j["compute_s"] = {{"forward", p.forward_s}, {"backward", p.backward_s}, {"update", p.update_s}};
  j["communication_s"] = p.communication_s;
  j["exposed_communication_s"] = p.exposed_communication_s;
  j["after_backward_s"] = p.after_backward_s;
  if (p.input_wait_s) j["input_wait_s"] = *p.input_wait_s;
  j["collectives_per_step"] = p.groups;
  j["gradient_bytes"] = p.gradient_bytes;
  j["memory_per_gpu_bytes"] = p.memory.total().value();
  j["memory_breakdown_bytes"] = {{"weights", p.memory.weights.value()},
                                 {"gradients", p.memory.gradients.value()},
                                 {"optimizer_state", p.memory.optimizer_state.value()},
                                 {"activations", p.memory.activations.value()},
                                 {"buffers", p.memory.buffers.value()},
                                 {"workspace", p.memory.workspace.value()},
                                 {"runtime", p.memory.runtime.value()}};
  j["memory_capacity_bytes"] = p.memory_capacity_bytes;
  j["fits_in_memory"] = p.fits_in_memory;
  // Fractions of the step: they add up to 1 - scaling_efficiency.
  const double t = p.step_time_s;
  j["efficiency_loss"] = {{"exposed_bandwidth", p.loss.exposed_bandwidth / t},
                          {"latency_and_small_messages", p.loss.latency_and_small_messages / t},
                          {"fusion_or_bucket_waiting", p.loss.fusion_or_bucket_waiting / t},
                          {"parameter_server_bottleneck", p.loss.parameter_server_bottleneck / t},
                          {"communication_on_compute", p.loss.communication_on_compute / t},
                          {"input_pipeline", p.loss.input_pipeline / t},
                          {"stragglers", p.loss.stragglers / t},
                          {"other", p.loss.other / t}};
  j["policy"] = {{"description", p.policy_description}, {"settings", p.policy_settings}};
  if (!p.bottleneck.empty()) {
    j["largest_collective"] = {{"bytes", p.largest_collective_bytes},
                               {"time_s", p.largest_collective_s},
                               {"bottleneck", p.bottleneck},
                               {"algorithm", p.collective_algorithm},
                               {"protocol", p.collective_protocol},
                               {"channels", p.collective_channels},
                               {"compute_share", p.collective_compute_share},
                               {"why", p.collective_why}};
  }
  j["why"] = p.why;
  j["context"] = {{"dlsim_version", kVersion},
                  {"engine_events", p.events},
                  {"engine_mirrored_nodes", p.mirrored_nodes},
                  {"anchor_scale", p.anchor_scale},
                  {"compute_measured_share", p.compute_measured_share},
                  {"hardware", p.hardware},
                  {"inputs", p.inputs}};
  return j;
}

std::string to_table(const Prediction& p) {
  std::ostringstream o;
  auto ms = [](double s) { return fmt::format("{:.3f} ms", s * 1e3); };
  auto pct = [](double f) { return fmt::format("{:.1f} %", f * 100); };
  o << fmt::format("{} on {} GPUs ({} nodes of {}), {} / {}, batch {} per GPU, {}, {} engine\n",
                   p.model, p.gpus, p.nodes, p.cluster, p.framework, p.strategy, p.batch_per_gpu,
                   p.precision, p.engine);
  o << fmt::format("  {:<34} {}\n", "step time", ms(p.step_time_s));
  o << fmt::format("  {:<34} {:.1f} samples/s\n", "throughput", p.throughput);
  o << fmt::format("  {:<34} {} (1 GPU: {} per step)\n", "scaling efficiency",
                   pct(p.scaling_efficiency), ms(p.single_gpu_step_s));
  o << fmt::format("  {:<34} forward {}, backward {}, update {}\n", "compute per GPU",
                   ms(p.forward_s), ms(p.backward_s), ms(p.update_s));
  const double idle = idle_after_backward(p);
  o << fmt::format("  {:<34} {} ({} exposed{})\n", "communication", ms(p.communication_s),
                   ms(p.exposed_communication_s),
                   idle > 0.5e-6 ? fmt::format(", {} waiting after backward", ms(idle)) : "");
  o << fmt::format("  {:<34} {} of {} ({})\n", "memory per GPU", format_bytes(p.memory.total()),
                   format_bytes(Bytes(p.memory_capacity_bytes)),
                   p.fits_in_memory ? "fits" : "does not fit");
  const double t = p.step_time_s;
  o << "  where the efficiency goes (fractions of the step):\n";
  for (const auto& [name, v] : std::vector<std::pair<std::string, double>>{
           {"exposed bandwidth", p.loss.exposed_bandwidth},
           {"latency and small messages", p.loss.latency_and_small_messages},
           {"fusion or bucket waiting", p.loss.fusion_or_bucket_waiting},
           {"parameter-server bottleneck", p.loss.parameter_server_bottleneck},
           {"communication on compute", p.loss.communication_on_compute},
           {"input pipeline", p.loss.input_pipeline},
           {"stragglers", p.loss.stragglers},
           {"other", p.loss.other}}) {
    // The input pipeline is a part only where its rate was given.
    if (name == "input pipeline" && !p.input_wait_s) continue;
    o << fmt::format("    {:<32} {}\n", name, pct(v / t));
  }
  o << "  why:\n";
  for (const auto& w : p.why) o << "    - " << w << "\n";
  return o.str();
}

std::string csv_header() {
  return "model,gpus,nodes,batch_per_gpu,framework,strategy,engine,step_time_s,"
         "throughput_samples_per_s,scaling_efficiency,communication_s,exposed_communication_s,"
         "memory_per_gpu_bytes,fits_in_memory\n";
}

std::string to_csv_row(const Prediction& p) {
  return fmt::format("{},{},{},{},{},{},{},{:.9g},{:.9g},{:.6f},{:.9g},{:.9g},{:.0f},{}\n", p.model,
                     p.gpus, p.nodes, p.batch_per_gpu, p.framework, p.strategy, p.engine,
                     p.step_time_s, p.throughput, p.scaling_efficiency, p.communication_s,
                     p.exposed_communication_s, p.memory.total().value(),
                     p.fits_in_memory ? "true" : "false");
}

}  // namespace dlsim::simulator
