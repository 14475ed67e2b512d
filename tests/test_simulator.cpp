// The training-step simulator: event kernel, flow network, compute model, engines and
// predictions (docs/simulator.md).

#include <doctest/doctest.h>

#include <fmt/format.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "hardware/loader.hpp"
#include "model/analysis.hpp"
#include "model/loader.hpp"
#include "networks/collective.hpp"
#include "networks/placement.hpp"
#include "simulator/compare.hpp"
#include "simulator/compute.hpp"
#include "simulator/engine.hpp"
#include "simulator/flow_network.hpp"
#include "simulator/framework.hpp"
#include "simulator/framework_flags.hpp"
#include "simulator/kernel.hpp"
#include "simulator/predict.hpp"

namespace sim = dlsim::simulator;
using dlsim::Bandwidth;
using dlsim::Bytes;
using dlsim::FlopRate;
using dlsim::Flops;
using dlsim::Seconds;

namespace {

const std::string kHw = DLSIM_TEST_HARDWARE_DIR;

sim::PredictOptions options(const std::string& model, int gpus) {
  sim::PredictOptions o;
  o.model = model;
  o.gpus = gpus;
  return o;
}

double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }

}  // namespace

TEST_CASE("kernel_runs_events_by_time_then_by_the_order_they_were_scheduled") {
  sim::EventKernel k;
  std::vector<int> order;
  k.at(5, [&] { order.push_back(3); });
  k.at(3, [&] { order.push_back(1); });
  k.at(3, [&] {
    order.push_back(2);
    k.after(0, [&] { order.push_back(4); });  // same instant, scheduled later: runs after 5?
  });
  CHECK(k.run() == 4);
  CHECK(order == std::vector<int>{1, 2, 4, 3});
  CHECK(k.now() == 5);
  CHECK_THROWS_AS(k.at(4, [] {}), std::logic_error);
}

TEST_CASE("flows_share_a_link_max_min_and_the_survivor_speeds_up_when_one_ends") {
  sim::EventKernel k;
  sim::FlowNetwork net(k, {100.0});  // one link of 100 B/s
  double done_a = -1, done_b = -1;
  net.start({0}, 100, 0, INFINITY, [&] { done_a = sim::to_seconds(k.now()); });
  net.start({0}, 300, 0, INFINITY, [&] { done_b = sim::to_seconds(k.now()); });
  k.run();
  // 50 B/s each until A's 100 B are done at 2 s; B then has 200 B left at 100 B/s: 4 s.
  CHECK(done_a == dlsim_test::approx(2.0).epsilon(1e-9));
  CHECK(done_b == dlsim_test::approx(4.0).epsilon(1e-9));
}

TEST_CASE("a_flow_waits_its_latency_then_moves_at_the_lesser_of_link_and_cap") {
  sim::EventKernel k;
  sim::FlowNetwork net(k, {100.0});
  double done = -1;
  net.start({0}, 100, sim::to_time(0.5), 25.0, [&] { done = sim::to_seconds(k.now()); });
  k.run();
  CHECK(done == dlsim_test::approx(4.5).epsilon(1e-9));
}

TEST_CASE("collectives_as_flows_take_their_cost_without_contention") {
  // Point-to-point schedules (MPI test library) and NCCL's channels (nccl preset) executed as
  // max-min flows on an idle network take exactly the time their cost says.
  for (const char* file : {"/switched.yaml", "/switched-nccl.yaml"}) {
    const auto cluster = dlsim::hardware::load_cluster(kHw + file);
    for (int n : {2, 5, 8}) {
      dlsim::networks::PlacementRequest pr;
      pr.gpus = n;
      const auto placement = dlsim::networks::place(cluster, pr);
      const dlsim::networks::Topology topo(cluster, placement.nodes);
      const auto comm = dlsim::networks::make_communicator(topo, placement);
      for (const char* name : {"auto", "ring", "tree", "hd"}) {
        const auto algo = dlsim::networks::collective_algorithms().at(name).make();
        if (!algo->supports(dlsim::networks::CollectiveOp::kAllReduce, cluster.library)) continue;
        for (double bytes : {8.0, 8e6}) {
          dlsim::networks::CollectiveRequest req;
          req.size = Bytes(bytes);
          const auto schedule = algo->schedule(req, comm);
          sim::EventKernel k;
          sim::FlowNetwork net(k, sim::link_capacities(topo));
          sim::CollectiveRun run(k, net, topo, cluster.network.transport);
          double end = -1;
          run.run(schedule, [&] { end = sim::to_seconds(k.now()); });
          k.run();
          CAPTURE(file);
          CAPTURE(n);
          CAPTURE(name);
          CAPTURE(bytes);
          CHECK(end == dlsim_test::approx(algo->cost(req, comm).time.value()).epsilon(1e-6));
        }
      }
    }
  }
}

TEST_CASE("kernel_time_is_the_roofline_with_efficiency_curves_plus_launch") {
  const dlsim::hardware::EfficiencyCurve c{0.5, 1e9};  // 50 % at most, half of that at 1 GFLOP
  const dlsim::hardware::EfficiencyCurve m{0.8, 1e6};
  // 1 GFLOP at 10 TFLOP/s x 0.5 x (1e9 / 2e9): (1e9 + 1e9) / (1e13 x 0.5) = 0.4 ms;
  // 1 MB at 1 TB/s x 0.8: (1e6 + 1e6) / 8e11 = 2.5 us; the larger wins, plus 5 us.
  const auto t = sim::kernel_time(Flops(1e9), Bytes(1e6), FlopRate(1e13), c, Bandwidth(1e12), m,
                                  Seconds(5e-6));
  CHECK(t.value() == dlsim_test::approx(4e-4 + 5e-6).epsilon(1e-12));
  CHECK(sim::kernel_time(Flops(0), Bytes(0), FlopRate(1e13), c, Bandwidth(1e12), m, Seconds(5e-6))
            .value() == 0);
}

TEST_CASE("every_framework_policy_is_registered") {
  const auto names = sim::framework_policies().names();
  for (const char* n :
       {"byteps", "horovod", "keras", "mxnet-kvstore", "pytorch-ddp", "tf-ps", "tf-replicated"}) {
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  }
}

TEST_CASE("one_gpu_has_efficiency_one_and_no_communication") {
  for (const char* engine : {"des", "analytic"}) {
    auto o = options("googlenet", 1);
    o.engine = *sim::parse_engine(engine);
    const auto p = sim::predict(o);
    CHECK(p.scaling_efficiency == 1.0);
    CHECK(p.communication_s == 0.0);
    CHECK(p.exposed_communication_s == 0.0);
    CHECK(p.step_time_s ==
          dlsim_test::approx(p.forward_s + p.backward_s + p.update_s).epsilon(1e-9));
  }
}

TEST_CASE("efficiency_loss_parts_add_up_to_one_minus_the_efficiency") {
  for (const char* fw : {"horovod", "pytorch-ddp", "tf-ps"}) {
    auto o = options("vgg16", 16);
    o.framework = fw;
    const auto p = sim::predict(o);
    const auto& l = p.loss;
    const double sum = l.exposed_bandwidth + l.latency_and_small_messages +
                       l.fusion_or_bucket_waiting + l.parameter_server_bottleneck +
                       l.communication_on_compute + l.stragglers + l.other;
    CAPTURE(fw);
    CHECK(sum / p.step_time_s == dlsim_test::approx(1 - p.scaling_efficiency).epsilon(1e-9));
    CHECK(p.scaling_efficiency < 1.0);
  }
}

TEST_CASE("input_pipeline_bounds_each_step_at_its_nodes_samples_over_the_rate") {
  // docs/simulator.md, "Input pipeline": 16 GPUs on 4 nodes of 4, batch 32: a node needs 128
  // samples a step; at 1,000 samples/s per node no step is shorter than 128 ms, and a job that
  // computes faster runs at exactly that, 4 nodes x 1,000 samples/s.
  for (const auto engine : {sim::Engine::kDes, sim::Engine::kAnalytic}) {
    CAPTURE(sim::to_string(engine));
    auto o = options("resnet50", 16);
    o.engine = engine;
    const auto free = sim::predict(o);
    REQUIRE(free.step_time_s < 0.128);
    REQUIRE(!free.input_wait_s);
    o.input_rate = 1000;
    const auto bound = sim::predict(o);
    CHECK(bound.step_time_s == dlsim_test::approx(0.128).epsilon(1e-9));
    CHECK(bound.throughput == dlsim_test::approx(4000.0).epsilon(1e-9));
    // One GPU alone needs 32 samples (32 ms): not bound, so all of the wait is the job's loss.
    CHECK(bound.single_gpu_step_s == dlsim_test::approx(free.single_gpu_step_s).epsilon(1e-12));
    REQUIRE(bound.input_wait_s);
    CHECK(bound.loss.input_pipeline == dlsim_test::approx(*bound.input_wait_s).epsilon(1e-12));
    CHECK(bound.loss.input_pipeline > 0.0);
    const auto& l = bound.loss;
    const double sum = l.exposed_bandwidth + l.latency_and_small_messages +
                       l.fusion_or_bucket_waiting + l.parameter_server_bottleneck +
                       l.communication_on_compute + l.input_pipeline + l.stragglers + l.other;
    CHECK(sum / bound.step_time_s ==
          dlsim_test::approx(1 - bound.scaling_efficiency).epsilon(1e-9));
    // A pipeline that keeps up changes nothing.
    o.input_rate = 1e6;
    const auto fast = sim::predict(o);
    CHECK(fast.step_time_s == free.step_time_s);
    CHECK(fast.loss.input_pipeline == 0.0);
    // One GPU bound by its node's pipeline: 32 samples at 100 samples/s.
    auto one = options("resnet50", 1);
    one.engine = engine;
    one.input_rate = 100;
    CHECK(sim::predict(one).step_time_s == dlsim_test::approx(0.32).epsilon(1e-9));
  }
}

TEST_CASE("more_network_bandwidth_is_never_slower") {
  // Line rates on the same transport (kernel TCP without a per-stream limit). The 100gbe preset
  // is left out: one TCP stream there moves 15 Gbit/s, so a rank's traffic can be slower than
  // on 25GbE, as on real 100GbE hosts.
  double last = 0;
  for (const char* net : {"1gbe", "10gbe", "25gbe", "50gbe"}) {
    const auto path =
        std::filesystem::temp_directory_path() / (std::string("dlsim-net-") + net + ".yaml");
    std::ofstream(path) << "kind: cluster\nname: dlsim-net-" << net << "\ndescription: default on "
                        << net << "\nsource: tests\n"
                        << "extends: default\nnetwork: " << net << "\n";
    auto o = options("vgg16", 16);
    o.cluster = path.string();
    const auto p = sim::predict(o);
    CAPTURE(net);
    CHECK(p.throughput >= last);
    last = p.throughput;
    std::filesystem::remove(path);
  }
}

TEST_CASE("parameter_server_loses_to_ring_as_workers_per_server_grow") {
  // One server: its NIC takes every node's summed gradient, N M bytes, while a ring moves about
  // 2M per node. The step can be no shorter than N M / B, and the PS/ring ratio falls with N.
  // While the server's NIC does not bind (8-16 GPUs) both steps are compute and the ratio stays
  // within 1 % (the ring's NCCL kernels take a little of the compute they overlap).
  double last_ratio = INFINITY;
  for (int gpus : {8, 16, 32, 64}) {
    auto ps = options("resnet50", gpus);
    ps.framework = "tf-ps";
    ps.framework_options.ps_servers = 1;
    auto ring = options("resnet50", gpus);
    ring.framework = "horovod";
    const auto p = sim::predict(ps);
    const double ratio = p.throughput / sim::predict(ring).throughput;
    const auto c = dlsim::hardware::load_cluster("default");
    const double nic = c.network.port.bandwidth.value() * c.network.transport.efficiency;
    CAPTURE(gpus);
    CHECK(ratio < last_ratio * (gpus <= 16 ? 1.01 : 1.0));
    CHECK(p.step_time_s >= p.nodes * p.gradient_bytes / nic);
    last_ratio = ratio;
  }
  CHECK(last_ratio < 0.7);
}

TEST_CASE("more_parameter_servers_help_until_the_nics_balance") {
  // resnet50 on 8 nodes of 4 GPUs: one server's NIC takes 8 copies of the summed gradient in
  // the backward pass's 74 ms, more than it can (67 ms of pushes, then the pulls); two share it
  // and hide behind backward; 16 on 8 nodes are as fast as 8.
  auto o = options("resnet50", 32);
  o.framework = "tf-ps";
  std::map<int, double> step;
  for (int s : {1, 2, 4, 8, 16}) {
    o.framework_options.ps_servers = s;
    step[s] = sim::predict(o).step_time_s;
  }
  CHECK(step[1] > step[2] * 1.05);
  CHECK(step[4] <= step[2] * 1.001);
  CHECK(step[8] <= step[4] * 1.001);
  CHECK(step[16] == dlsim_test::approx(step[8]).epsilon(0.01));
}

TEST_CASE("byteps_bulk_synchronous_exchange_is_the_busiest_nic_plus_one_partition_each_way") {
  // n = 4 worker nodes of one GPU (no sum inside the node), k dedicated server hosts, every
  // NIC at B: each worker pushes its M gradient bytes and pulls them back, server s takes the
  // n L_s bytes of the partitions BytePS's key hash gives it (docs/simulator.md, "byteps").
  // With ordered connections the pulls of early partitions overlap later pushes, so after the
  // backward pass the exchange takes the busier side, max(M / B, n max_s L_s / B), plus at most
  // the last partition P going out and coming back on one connection at min(B / k, B / n)
  // (docs/networks.md, "BytePS"). With one server the pushes keep its NIC busy to the end and
  // the pulls, a byte stream behind them, lag by one partition: the time is the busier side
  // plus P coming back (1 %). Relative tolerances throughout (scale 0).
  const auto c = dlsim::hardware::load_cluster("default");
  const double B = c.network.port.bandwidth.value() * c.network.transport.efficiency;
  const double P = 4'096'000;
  const int n = 4;
  const auto stats =
      dlsim::model::analyze(dlsim::model::load_model("resnet50"), 1, dlsim::Precision::kFp32);
  std::vector<std::pair<std::string, double>> declared;
  for (const auto& g : stats.gradients) {
    declared.emplace_back(g.parameter, static_cast<double>(g.elements) * 4);
  }
  std::sort(declared.begin(), declared.end());
  for (int k : {1, 2, 4}) {
    std::vector<double> load(static_cast<std::size_t>(k), 0.0);
    for (std::uint64_t d = 0; d < declared.size(); ++d) {
      double left = declared[d].second;
      for (std::uint64_t i = 0; left > 0; ++i, left -= P) {
        load[sim::byteps_key_hash((d << 16) + i) % static_cast<std::uint64_t>(k)] +=
            std::min(P, left);
      }
    }
    auto o = options("resnet50", n);
    o.gpus_per_node = 1;
    o.framework = "byteps";
    o.overlap = false;
    o.framework_options.ps_servers = k;
    const auto p = sim::predict(o);
    const double M = p.gradient_bytes;
    const double busiest = std::max(M / B, n * *std::max_element(load.begin(), load.end()) / B);
    const double fill = 2 * P / std::min(B / k, B / n);
    CAPTURE(k);
    CHECK(p.communication_s >= busiest);
    CHECK(p.communication_s <= (busiest + fill) * 1.03);
    // The analytic engine: its servers serve push, sum and pull in turn (docs/simulator.md,
    // "The analytic engine"), so it keeps the pull's lag too.
    o.engine = sim::Engine::kAnalytic;
    const auto a = sim::predict(o);
    CHECK(a.communication_s >= busiest);
    CHECK(a.communication_s <= (busiest + fill) * 1.03);
    CAPTURE(a.communication_s);
    if (k == 1) {
      CHECK(p.communication_s == dlsim_test::approx(busiest + fill / 2).epsilon(0.01));
      CHECK(a.communication_s == dlsim_test::approx(busiest + fill / 2).epsilon(0.01));
    } else {
      // predict says how uneven the hash left the servers.
      const auto share = fmt::format("the busiest of the {} servers {:.2f} times the mean load", k,
                                     *std::max_element(load.begin(), load.end()) * k / M);
      CHECK(std::any_of(p.why.begin(), p.why.end(),
                        [&](const std::string& w) { return w.find(share) != std::string::npos; }));
    }
    // Without overlap nothing of the exchange hides behind the backward pass.
    CHECK(p.exposed_communication_s == doctest::Approx(p.communication_s).epsilon(1e-6).scale(0));
  }
}

TEST_CASE("byteps_sends_each_key_to_the_server_its_djb2_hash_names") {
  // BytePSGlobal::Hash_DJB2: h = 33 h + c over the key's decimal digits from h = 5381, mod 2^64.
  // "0": 5381 x 33 + 48 = 177,621. For a power-of-two server count k, 33 = 1 (mod k) and '0' = 48
  // = 0 (mod 16), so the server is (5381 + the digits' sum) mod k: key 65,536 (digit sum 25) on
  // 8 servers goes to (5381 + 25) mod 8 = 6.
  CHECK(sim::byteps_key_hash(0) == 177621);
  CHECK(sim::byteps_key_hash(65536) % 8 == 6);
  CHECK(sim::byteps_key_hash(65536) % 16 == (5381 + 25) % 16);
  CHECK(sim::byteps_key_hash(18446744073709551615ULL) % 4 == (5381 + 87) % 4);
}

TEST_CASE("byteps_on_pcie_nodes_sums_and_spreads_through_host_memory") {
  // docs/networks.md, "BytePS": on hkbu-ib's nodes (4 PCIe GPUs, two sockets, NCCL's ring
  // through host memory at host.shm_bandwidth = 3.9 GB/s with both directions busy), each
  // partition's reduce-scatter and all-gather move (g - 1) / g of it through that transport,
  // one collective at a time. Over RDMA the network is far faster, so a
  // bulk-synchronous exchange of M bytes takes 2 (g - 1) / g x M / 3.9 GB/s in both engines.
  const double shm = 3.9e9;
  const double g = 4;
  for (const auto engine : {sim::Engine::kDes, sim::Engine::kAnalytic}) {
    CAPTURE(static_cast<int>(engine));
    auto o = options("bert_base", 8);
    o.engine = engine;
    o.cluster = "hkbu-ib";
    o.framework = "byteps";
    o.overlap = false;
    const auto p = sim::predict(o);
    const double closed = 2 * (g - 1) / g * p.gradient_bytes / shm;
    CHECK(p.communication_s == dlsim_test::approx(closed).epsilon(0.01));
  }
  // With the exchange overlapping backward and the network the bound (IPoIB's 20 Gbit/s
  // streams), the collectives taking their turns on the transport keep the DES within 3 % of
  // the analytic engine's fluid queues.
  auto o = options("bert_large", 32);
  REQUIRE(sim::set_batch(o, "8"));
  o.cluster = "hkbu-ipoib";
  o.framework = "byteps";
  o.model_params = {{"seq_len", "64"}};
  const auto des = sim::predict(o);
  o.engine = sim::Engine::kAnalytic;
  const auto analytic = sim::predict(o);
  CHECK(des.step_time_s == dlsim_test::approx(analytic.step_time_s).epsilon(0.03));
}

TEST_CASE("horovod_with_a_cycle_time_of_zero_negotiates_each_tensor_as_it_is_ready") {
  // HOROVOD_CYCLE_TIME=0 (docs/simulator.md, "horovod"): the background loop does not sleep,
  // so nothing waits for a tick; without fusion every tensor is its own allreduce, started when
  // it is ready. The bulk-synchronous step of one fused buffer has no tick to wait for either.
  for (const auto engine : {sim::Engine::kDes, sim::Engine::kAnalytic}) {
    CAPTURE(static_cast<int>(engine));
    auto o = options("resnet50", 16);
    o.engine = engine;
    o.framework_options.fusion_threshold = Bytes(0);
    o.framework_options.cycle_time = Seconds(0);
    const auto eager = sim::predict(o);
    CHECK(eager.policy_description.find("no cycle wait") != std::string::npos);
    o.framework_options.cycle_time = Seconds(5e-3);
    const auto ticking = sim::predict(o);
    CHECK(eager.step_time_s < ticking.step_time_s);
    // What waiting is left is the negotiations' own time (tens of microseconds a step).
    CHECK(eager.loss.fusion_or_bucket_waiting < 1e-3 * eager.step_time_s);
    CHECK(ticking.loss.fusion_or_bucket_waiting > 10 * eager.loss.fusion_or_bucket_waiting);
  }
  auto o = options("resnet50", 16);
  o.framework_options.cycle_time = Seconds(-1e-3);
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("cycle_time"), dlsim::InputError);
}

TEST_CASE("horovod_without_the_response_cache_negotiates_through_rank_0") {
  // --negotiation gather (HOROVOD_CACHE_CAPACITY=0; docs/simulator.md, "horovod"): a cycle's
  // negotiation is an MPI_Gather of 4 bytes, an MPI_Gatherv of the requests, and two MPI_Bcast
  // (4 bytes, the responses), binomial trees from rank 0; a gather of m bytes a rank costs a
  // broadcast of (p - 1) m / ceil(log2 p). Without overlap and without fusion every tensor is
  // ready at once: one negotiation of all T tensors, T responses. Requests 64 bytes, responses
  // 48 bytes and 16 per tensor, each name "allreduce." + the parameter's name.
  const auto cluster = dlsim::hardware::load_cluster("default");
  dlsim::networks::PlacementRequest pr;
  pr.gpus = 16;
  const auto placement = dlsim::networks::place(cluster, pr);
  const dlsim::networks::Topology topo(cluster, placement.nodes);
  const auto comm = dlsim::networks::make_communicator(topo, placement);
  const auto stats =
      dlsim::model::analyze(dlsim::model::load_model("resnet50"), 1, dlsim::Precision::kFp32);
  const auto T = static_cast<double>(stats.gradients.size());
  double names = 0;
  for (const auto& g : stats.gradients) names += 10 + static_cast<double>(g.parameter.size());
  const double p = 16, rounds = 4;
  const auto bcast = [&](double b) { return sim::small_broadcast_time(comm, Bytes(b)).value(); };
  const double want = bcast((p - 1) * 4 / rounds) + bcast((p - 1) * (64 * T + names) / rounds) +
                      bcast(4) + bcast(48 * T + 16 * T + names);

  struct Negotiations : sim::StepObserver {
    std::vector<double> seconds;
    void on_span(const sim::Span& s) override {
      if (s.iteration == 0 && s.kind == sim::SpanKind::kNegotiate) {
        seconds.push_back(sim::to_seconds(s.end - s.begin));
      }
    }
  };
  auto o = options("resnet50", 16);
  o.overlap = false;
  o.framework_options.fusion_threshold = Bytes(0);
  o.framework_options.negotiation = sim::Negotiation::kGather;
  Negotiations seen;
  const auto gathered = sim::predict(o, &seen);
  REQUIRE(seen.seconds.size() == 1);
  CHECK(seen.seconds.front() == dlsim_test::approx(want).epsilon(1e-9));
  CHECK(gathered.policy_description.find("gather and broadcast") != std::string::npos);
  // With the cache, the same cycle is one bit-vector allreduce, far cheaper.
  o.framework_options.negotiation = sim::Negotiation::kCache;
  Negotiations cached;
  sim::predict(o, &cached);
  REQUIRE(cached.seconds.size() == 1);
  CHECK(cached.seconds.front() < want / 2);
  // A cache of fewer entries than tensors (least recently used out) misses every tensor of
  // every step: its bit vector (one bit per entry) and the coordination through rank 0.
  o.framework_options.cache_capacity = 100;
  Negotiations small;
  sim::predict(o, &small);
  REQUIRE(small.seconds.size() == 1);
  CHECK(small.seconds.front() ==
        dlsim_test::approx(want + sim::small_allreduce_time(comm, Bytes(13)).value())
            .epsilon(1e-6));  // the engine's time grid
  // HOROVOD_CACHE_CAPACITY=0 is the gather negotiation.
  o.framework_options.negotiation.reset();
  o.framework_options.cache_capacity = 0;
  Negotiations off;
  const auto uncached = sim::predict(o, &off);
  REQUIRE(off.seconds.size() == 1);
  CHECK(off.seconds.front() == dlsim_test::approx(want).epsilon(1e-9));
  CHECK(uncached.policy_settings.at("negotiation") == "gather");
  o.framework_options.negotiation = sim::Negotiation::kCache;
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("cache_capacity"), dlsim::InputError);
  // A cache size with the gather negotiation, which has no cache, would be ignored: refused.
  o.framework_options.negotiation = sim::Negotiation::kGather;
  o.framework_options.cache_capacity = 100;
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("gather negotiation does not have"),
                       dlsim::InputError);
  o.framework_options.negotiation.reset();
  o.framework_options.cache_capacity.reset();
  sim::FrameworkFlags flags;
  flags.negotiation = "p2p";
  CHECK_THROWS_WITH_AS(sim::parse_framework_flags(flags), doctest::Contains("negotiation"),
                       dlsim::InputError);
}

TEST_CASE("fp16_compression_halves_the_bytes_on_the_wire_and_casts_on_the_compute_stream") {
  // --compression fp16 (Compression.fp16 of Horovod and BytePS; docs/simulator.md, "Gradient
  // compression"): with amp's 4-byte gradients, 2 bytes per element travel, and each gradient
  // is cast to float16 after backward produces it and back before the update, each cast a
  // memory-bound kernel of 6 bytes per element. Without overlap no collective shares the
  // compute, so the communication work on compute is exactly the casts.
  const auto cluster = dlsim::hardware::load_cluster("default");
  const auto& gpu = dlsim::networks::node_spec(cluster, 0).gpu;
  const auto stats =
      dlsim::model::analyze(dlsim::model::load_model("resnet50"), 1, dlsim::Precision::kFp16);
  double casts = 0, elements = 0;
  for (const auto& g : stats.gradients) {
    casts += 2 * sim::fp16_cast_time(gpu, g.elements, Bytes(4)).value();
    elements += static_cast<double>(g.elements);
  }
  // One tensor's cast, by hand: launch + (6 e + h_m) / (M e_m).
  const std::int64_t e = 25'000'000;
  const double by_hand =
      gpu.kernel_launch.value() +
      (6.0 * e + gpu.memory.half) / (gpu.memory_bandwidth.value() * gpu.memory.max);
  CHECK(sim::fp16_cast_time(gpu, e, Bytes(4)).value() == dlsim_test::approx(by_hand));

  auto o = options("resnet50", 16);
  o.framework = "horovod";
  o.precision = sim::TrainingPrecision::kAmp;
  o.overlap = false;
  const auto plain = sim::predict(o);
  o.framework_options.compression = sim::GradientCompression::kFp16;
  const auto compressed = sim::predict(o);
  CHECK(plain.gradient_bytes == dlsim_test::approx(4 * elements));
  CHECK(compressed.gradient_bytes == dlsim_test::approx(2 * elements));
  CHECK(plain.loss.communication_on_compute == 0);
  CHECK(compressed.loss.communication_on_compute == dlsim_test::approx(casts));
  CHECK(compressed.single_gpu_step_s == dlsim_test::approx(plain.single_gpu_step_s));
  CHECK(compressed.policy_settings.at("compression") == "fp16");

  // Gradients already in 2 bytes (fp16) and one GPU (no exchange) cast nothing.
  o.precision = sim::TrainingPrecision::kFp16;
  const auto half = sim::predict(o);
  o.framework_options.compression.reset();
  CHECK(half.step_time_s == dlsim_test::approx(sim::predict(o).step_time_s).epsilon(1e-12));
  o.precision = sim::TrainingPrecision::kAmp;
  o.gpus = 1;
  o.framework_options.compression = sim::GradientCompression::kFp16;
  CHECK(sim::predict(o).step_time_s == dlsim_test::approx(plain.single_gpu_step_s));

  o.gpus = 16;
  sim::FrameworkFlags flags;
  flags.compression = "fp8";
  CHECK_THROWS_WITH_AS(sim::parse_framework_flags(flags), doctest::Contains("compression"),
                       dlsim::InputError);
  o.framework_options.compression = sim::GradientCompression::kFp16;
  o.framework = "mxnet-kvstore";
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("compression"), dlsim::InputError);
}

TEST_CASE("ddp_fp16_compress_hook_casts_each_bucket_on_the_compute_stream") {
  // --compression fp16 under pytorch-ddp is the communication hook fp16_compress_hook: the
  // buckets keep their fp32 bytes (and their sizes), 2 bytes per element travel, and each bucket
  // of e elements costs three memory-bound kernels on the compute stream: the cast to float16
  // (6 e bytes), the division by the world size (4 e) and the cast back into the bucket (6 e).
  const auto cluster = dlsim::hardware::load_cluster("default");
  const auto& gpu = dlsim::networks::node_spec(cluster, 0).gpu;
  const auto stats =
      dlsim::model::analyze(dlsim::model::load_model("resnet50"), 1, dlsim::Precision::kFp16);
  // DDP's buckets in backward order: the first closes at 1 MiB, the others at 25 MiB.
  std::vector<double> buckets;
  double limit = 1024.0 * 1024.0, elements = 0;
  for (const auto& g : stats.gradients) {
    if (buckets.empty() || buckets.back() * 4 >= limit) {
      if (!buckets.empty()) limit = 25 * 1024.0 * 1024.0;
      buckets.push_back(0);
    }
    buckets.back() += static_cast<double>(g.elements);
    elements += static_cast<double>(g.elements);
  }
  // Backward still runs while the hook compresses every bucket but the last, which its last
  // gradient closes: those casts and divisions are what backward loses.
  double casts = 0;
  for (std::size_t b = 0; b + 1 < buckets.size(); ++b) {
    const auto n = static_cast<std::int64_t>(buckets[b]);
    casts += sim::fp16_cast_time(gpu, n, Bytes(4)).value() +
             sim::fp16_cast_time(gpu, n, Bytes(2)).value();
  }
  // MPI has no kernels on the GPU, so nothing else takes compute from backward.
  auto o = options("resnet50", 16);
  o.framework = "pytorch-ddp";
  o.library = "mpi";
  o.precision = sim::TrainingPrecision::kAmp;
  const auto plain = sim::predict(o);
  o.framework_options.compression = sim::GradientCompression::kFp16;
  const auto hooked = sim::predict(o);
  CHECK(hooked.groups == plain.groups);
  CHECK(hooked.gradient_bytes == dlsim_test::approx(2 * elements));
  CHECK(plain.gradient_bytes == dlsim_test::approx(4 * elements));
  CHECK(hooked.loss.communication_on_compute - plain.loss.communication_on_compute ==
        dlsim_test::approx(casts));
  CHECK(hooked.memory.buffers == plain.memory.buffers);
  CHECK(hooked.policy_description.find("fp16_compress_hook") != std::string::npos);
}

TEST_CASE("a_scheme_with_fp16_is_the_same_scheme_with_fp16_compression") {
  // "auto+fp16" is Horovod's allreduce with Compression.fp16: half the bytes, its own contender;
  // a scheme whose framework has no such compression is refused, naming --strategy.
  sim::CompareOptions c;
  c.base = options("resnet50", 16);
  c.base.network = "10gbe";
  c.schemes = {"auto", "auto+fp16"};
  c.crossover = false;
  const auto r = sim::compare(c);
  REQUIRE(r.results.size() == 2);
  CHECK(r.results[1].prediction.policy_settings.at("compression") == "fp16");
  CHECK(r.results[1].prediction.gradient_bytes ==
        dlsim_test::approx(r.results[0].prediction.gradient_bytes / 2));
  CHECK(r.contender[0] != r.contender[1]);
  c.schemes = {"auto", "tf-ps+fp16"};
  CHECK_THROWS_WITH_AS(sim::compare(c), doctest::Contains("strategy"), dlsim::InputError);
}

TEST_CASE("compare_keeps_the_training_scripts_compression_for_byteps") {
  // BytePS's DistributedOptimizer takes Horovod's Compression: a comparison of Horovod against
  // BytePS keeps the script's fp16 compression for both; tf-ps has none.
  sim::CompareOptions c;
  c.base = options("resnet50", 16);
  c.base.network = "10gbe";
  c.base.precision = sim::TrainingPrecision::kAmp;
  c.base.framework_options.compression = sim::GradientCompression::kFp16;
  c.schemes = {"auto", "byteps", "tf-ps"};
  c.crossover = false;
  const auto r = sim::compare(c);
  REQUIRE(r.results.size() == 3);
  CHECK(r.results[0].prediction.policy_settings.at("compression") == "fp16");
  CHECK(r.results[1].prediction.policy_settings.at("compression") == "fp16");
  CHECK(r.results[2].prediction.policy_settings.count("compression") == 0);
  CHECK(r.results[1].prediction.gradient_bytes ==
        dlsim_test::approx(r.results[2].prediction.gradient_bytes / 2));
}

TEST_CASE("predict_says_when_fp16_compression_would_pay") {
  // A bandwidth-bound multi-node job (ResNet-50 DDP on 32 GPUs over 10GbE) runs much faster with
  // half the bytes on the wire: predict's "why" says so; not where compression is already on,
  // where gradients are 2 bytes, nor on one node.
  auto o = options("resnet50", 32);
  o.network = "10gbe";
  o.framework = "pytorch-ddp";
  const auto hint = sim::faster_with_compression(o);
  REQUIRE(hint.has_value());
  CHECK(hint->find("--compression fp16 would be") == 0);
  o.framework_options.compression = sim::GradientCompression::kFp16;
  CHECK_FALSE(sim::faster_with_compression(o).has_value());
  o.framework_options.compression.reset();
  o.precision = sim::TrainingPrecision::kFp16;
  CHECK_FALSE(sim::faster_with_compression(o).has_value());
  o.precision = sim::TrainingPrecision::kFp32;
  o.gpus = 4;
  CHECK_FALSE(sim::faster_with_compression(o).has_value());
  o.framework = "tf-ps";
  o.gpus = 32;
  CHECK_FALSE(sim::faster_with_compression(o).has_value());
}

TEST_CASE("one_worker_node_stands_for_every_alike_node_in_the_des") {
  // docs/simulator.md, "One worker node for all": where the worker nodes are alike and reach
  // the dedicated servers over their own links and the servers', node 0's exchanges over the
  // servers' links at 1/W give every node's. On one switch (or one leaf) that is the step of
  // simulating every node, to rounding; with workers under two leaves of a fat tree, node 0's
  // switch latencies stand for every node's, a microsecond per message: within 1e-3.
  struct Case {
    std::string cluster;
    const char* model;
    int gpus;
    int servers;
    bool overlap;
    double tolerance;
  };
  for (const auto& c : {Case{"default", "resnet50", 32, 4, true, 1e-12},
                        Case{"default", "bert_base", 16, 2, false, 1e-12},
                        Case{"hkbu-10gbe", "bert_base", 16, 4, true, 1e-12},
                        Case{"hkbu-ib", "bert_large", 32, 8, true, 1e-12},
                        Case{kHw + "/fat-tree-40.yaml", "resnet50", 96, 16, true, 1e-3}}) {
    CAPTURE(c.cluster);
    CAPTURE(c.model);
    for (const auto engine : {sim::Engine::kDes, sim::Engine::kAnalytic}) {
      CAPTURE(static_cast<int>(engine));
      auto o = options(c.model, c.gpus);
      o.engine = engine;
      o.cluster = c.cluster;
      o.framework = "byteps";
      o.overlap = c.overlap;
      o.framework_options.ps_servers = c.servers;
      const auto mirrored = sim::predict(o);
      o.mirror_nodes = false;
      const auto every = sim::predict(o);
      // The analytic engine's queues have no route latencies: the same to rounding everywhere.
      const double tolerance = engine == sim::Engine::kDes ? c.tolerance : 1e-12;
      CHECK(mirrored.mirrored_nodes == c.gpus / 4);
      CHECK(every.mirrored_nodes == 1);
      CHECK(mirrored.step_time_s == dlsim_test::approx(every.step_time_s).epsilon(tolerance));
      CHECK(mirrored.communication_s ==
            dlsim_test::approx(every.communication_s).epsilon(tolerance));
      // The exposed part is small (0.2 ms of a 120 ms step on the fat tree): held to the step.
      CHECK(std::abs(mirrored.exposed_communication_s - every.exposed_communication_s) <=
            tolerance * every.step_time_s);
    }
  }
  // Servers on the workers' nodes: every node is simulated.
  auto o = options("resnet50", 32);
  o.framework = "byteps";
  o.framework_options.ps_servers = 8;
  o.framework_options.ps_colocated = true;
  CHECK(sim::predict(o).mirrored_nodes == 1);
  // Leaf uplinks oversubscribed 2:1 can bind: every node is simulated there too.
  o = options("resnet50", 96);
  o.cluster = kHw + "/fat-tree-40-2to1.yaml";
  o.framework = "byteps";
  o.framework_options.ps_servers = 16;
  CHECK(sim::predict(o).mirrored_nodes == 1);
}

TEST_CASE("without_overlap_every_exchange_waits_for_the_whole_backward_pass") {
  for (const char* engine : {"des", "analytic"}) {
    auto o = options("resnet50", 16);
    o.engine = *sim::parse_engine(engine);
    const auto wfbp = sim::predict(o);
    o.overlap = false;
    const auto bsp = sim::predict(o);
    CAPTURE(engine);
    CHECK(bsp.step_time_s > wfbp.step_time_s);
    CHECK(bsp.exposed_communication_s == dlsim_test::approx(bsp.communication_s).epsilon(0.01));
    CHECK(bsp.inputs["overlap"] == false);
  }
}

TEST_CASE("under_xla_horovod_and_byteps_exchange_after_the_backward_pass") {
  // docs/simulator.md, "XLA": TensorFlow's XLA auto-clustering hands the gradients to the
  // framework's ops only when the compiled backward pass has run, so the step is exactly the
  // step without overlap, and the output says why; frameworks without TensorFlow's custom ops
  // refuse the flag, naming it.
  for (const auto engine : {sim::Engine::kDes, sim::Engine::kAnalytic}) {
    CAPTURE(static_cast<int>(engine));
    for (const char* framework : {"horovod", "keras", "byteps"}) {
      CAPTURE(framework);
      auto o = options("bert_base", 16);
      o.engine = engine;
      o.framework = framework;
      const auto wfbp = sim::predict(o);
      o.framework_options.xla = true;
      const auto xla = sim::predict(o);
      o.framework_options.xla = false;
      o.overlap = false;
      const auto bsp = sim::predict(o);
      CHECK(xla.step_time_s == dlsim_test::approx(bsp.step_time_s).epsilon(1e-12));
      CHECK(xla.step_time_s > wfbp.step_time_s);
      bool said = false;
      for (const auto& w : xla.why) said |= w.find("XLA compiles the backward pass") != w.npos;
      CHECK(said);
      CHECK(xla.policy_settings.at("xla") == "on");
    }
  }
  for (const char* framework : {"pytorch-ddp", "tf-ps", "tf-replicated", "mxnet-kvstore"}) {
    CAPTURE(framework);
    auto o = options("resnet50", 8);
    o.framework = framework;
    o.framework_options.xla = true;
    CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("xla"), dlsim::InputError);
  }
}

TEST_CASE("horovod_with_host_staging_copies_every_buffer_through_the_nodes_pcie") {
  // docs/simulator.md, "horovod": Horovod built without HOROVOD_GPU_ALLREDUCE allreduces GPU
  // tensors with MPI in host memory. On pascal-4gpu-25gbe the node's 4 GPUs share one PCIe
  // switch uplink (15.75 GB/s line rate, 0.762 of it for a copy: the mpi preset's pcie
  // efficiency), so a buffer of S bytes from every GPU reaches the host in 4 S / 12 GB/s, and
  // comes back as long: both engines add that and agree.
  const double uplink = 15.75e9 * 0.762;
  std::vector<double> steps;
  for (const auto engine : {sim::Engine::kDes, sim::Engine::kAnalytic}) {
    CAPTURE(static_cast<int>(engine));
    auto o = options("vgg16", 16);
    o.engine = engine;
    o.cluster = "horovod-pascal-25gbe-tcp";
    o.library = "mpi";
    o.overlap = false;
    const auto device = sim::predict(o);
    o.framework_options.host_staging = true;
    const auto staged = sim::predict(o);
    CHECK(staged.policy_settings.at("host_staging") == "on");
    // At least one buffer's round trip through the uplink, at most every byte's.
    CHECK(staged.step_time_s - device.step_time_s >= 2 * 4 * 64.0 * 1024 * 1024 / uplink * 0.99);
    CHECK(staged.step_time_s - device.step_time_s <= 2 * 4 * staged.gradient_bytes / uplink * 1.01);
    steps.push_back(staged.step_time_s);
  }
  CHECK(steps[0] == dlsim_test::approx(steps[1]).epsilon(0.01));
  auto o = options("vgg16", 16);
  o.framework_options.host_staging = true;  // with NCCL
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("host_staging"), dlsim::InputError);
  o.framework = "pytorch-ddp";
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("host_staging"), dlsim::InputError);
}

TEST_CASE("the_same_seed_gives_byte_identical_json_and_another_seed_other_stragglers") {
  auto o = options("resnet50", 64);
  const auto a = sim::to_json(sim::predict(o)).dump();
  const auto b = sim::to_json(sim::predict(o)).dump();
  CHECK(a == b);
  o.seed = 2;
  CHECK(sim::predict(o).step_time_s != nlohmann::json::parse(a)["step_time_s"].get<double>());
}

TEST_CASE("batch_max_just_fits_and_one_more_sample_does_not") {
  auto o = options("resnet50", 4);
  o.batch_max = true;
  const auto p = sim::predict(o);
  CHECK(p.fits_in_memory);
  CHECK(p.memory.total().value() <= p.memory_capacity_bytes);
  o.batch_max = false;
  o.batch = p.batch_per_gpu + 1;
  CHECK_THROWS_AS(sim::predict(o), dlsim::InputError);
  o.batch = p.batch_per_gpu;
  CHECK(sim::predict(o).fits_in_memory);
}

TEST_CASE("des_and_analytic_agree_within_2_percent_where_no_link_is_shared") {
  // One GPU per node on one switch: a ring step's flows each have their own links.
  for (const char* fw : {"pytorch-ddp", "horovod", "tf-ps"}) {
    for (const char* model : {"resnet50", "vgg16", "googlenet"}) {
      auto o = options(model, 16);
      o.cluster = kHw + "/steady.yaml";
      o.framework = fw;
      const double des = sim::predict(o).step_time_s;
      o.engine = sim::Engine::kAnalytic;
      const double analytic = sim::predict(o).step_time_s;
      CAPTURE(fw);
      CAPTURE(model);
      CHECK(rel(des, analytic) < 0.02);
    }
  }
}

// A cluster file of one-GPU V100 nodes on a switch, with no step jitter and GPUs `spread` apart
// (speed_spread), for closed forms of the stragglers.
std::filesystem::path one_gpu_nodes_without_jitter(const std::string& name, double spread) {
  const auto path = std::filesystem::temp_directory_path() / (name + ".yaml");
  std::ofstream(path) << fmt::format(
      "kind: cluster\nname: {1}\ndescription: steady GPUs (tests)\nsource: tests\n"
      "extends: {0}/switched.yaml\nnode:\n  extends: {0}/one-gpu-node.yaml\n"
      "  gpu: {{extends: v100-sxm2-16gb, step_jitter: 0, speed_spread: {2}}}\n",
      kHw, name, spread);
  return path;
}

TEST_CASE("each_gpu_keeps_its_own_speed_and_the_step_waits_for_the_expected_slowest") {
  // docs/simulator.md, "Stragglers": with speed_spread s and no step jitter, the k-th slowest of
  // N GPUs computes at 1 + s Phi^-1((k - 0.375) / (N + 0.25)) in every step (Blom's scores), so
  // backward ends s Phi^-1((N - 0.375) / (N + 0.25)) (t_f + t_b) after one GPU's, in both
  // engines. Phi^-1(1.625 / 2.25) = 0.589456, Phi^-1(15.625 / 16.25) = 1.768825 (the inverse of
  // the normal distribution function, Python's statistics.NormalDist.inv_cdf).
  const auto path = one_gpu_nodes_without_jitter("dlsim-spread", 0.02);
  struct Expected {
    int gpus;
    double score;
  };
  for (const auto& e : {Expected{2, 0.589456}, Expected{16, 1.768825}}) {
    const int gpus = e.gpus;  // lambdas below use them (clang < 16: no bindings)
    const double score = e.score;
    for (const char* engine : {"des", "analytic"}) {
      CAPTURE(gpus);
      CAPTURE(engine);
      auto o = options("resnet50", gpus);
      o.cluster = path.string();
      o.engine = *sim::parse_engine(engine);
      const auto p = sim::predict(o);
      CHECK(p.loss.communication_on_compute == 0);
      CHECK(p.loss.stragglers ==
            dlsim_test::approx(0.02 * score * (p.forward_s + p.backward_s)).epsilon(1e-5));
    }
  }
  // The scores go to the ranks in an order drawn from the seed; the slowest is the same.
  auto o = options("resnet50", 16);
  o.cluster = path.string();
  const double one = sim::predict(o).loss.stragglers;
  o.seed = 7;
  CHECK(sim::predict(o).loss.stragglers == dlsim_test::approx(one).epsilon(1e-9));
}

TEST_CASE("a_gpu_known_to_be_slow_sets_the_step_and_the_baseline_stays_the_profiles") {
  // docs/simulator.md, "A GPU known to be slow": rank r at speed f computes everything 1/f as
  // long, so with no jitter and no spread backward ends (1/f - 1)(t_f + t_b) after a GPU of the
  // profile's speed, in both engines; the 1-GPU step efficiencies are measured by stays the
  // profile's. f = 0.6: 2/3 (t_f + t_b); f = 1.25 (a faster GPU) changes nothing.
  const auto path = one_gpu_nodes_without_jitter("dlsim-slow-gpu", 0);
  for (const char* engine : {"des", "analytic"}) {
    CAPTURE(engine);
    auto o = options("resnet50", 8);
    o.cluster = path.string();
    o.engine = *sim::parse_engine(engine);
    const auto nominal = sim::predict(o);
    CHECK(nominal.loss.stragglers == 0);
    o.gpu_speed = {{5, 0.6}};
    const auto slow = sim::predict(o);
    CHECK(slow.loss.stragglers ==
          dlsim_test::approx((1 / 0.6 - 1) * (slow.forward_s + slow.backward_s)).epsilon(1e-6));
    CHECK(slow.single_gpu_step_s == dlsim_test::approx(nominal.single_gpu_step_s).epsilon(1e-12));
    CHECK(slow.step_time_s > nominal.step_time_s);
    o.gpu_speed = {{5, 1.25}};
    CHECK(sim::predict(o).step_time_s == dlsim_test::approx(nominal.step_time_s).epsilon(1e-9));
    // One GPU at half speed: twice the step, half the efficiency.
    auto one = options("resnet50", 1);
    one.cluster = path.string();
    one.engine = o.engine;
    one.gpu_speed = {{0, 0.5}};
    const auto half = sim::predict(one);
    CHECK(half.step_time_s == dlsim_test::approx(2 * half.single_gpu_step_s).epsilon(1e-9));
  }
  auto o = options("resnet50", 8);
  o.gpu_speed = {{8, 0.5}};
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("gpu_speed: rank 8 is not in a job"),
                       dlsim::InputError);
  o.gpu_speed = {{1, 0.0}};
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("gpu_speed"), dlsim::InputError);
}

TEST_CASE("des_and_analytic_agree_where_a_pcie_nodes_nic_shares_its_gpus_uplink") {
  // hkbu-10gbe's PCIe node on InfiniBand: each ring channel crosses one switch uplink twice;
  // NCCL's search charges it (the tuner's channel speed halves), and the DES's flows share
  // that link. Both engines then agree (388 ms analytic against 600 ms DES while the search
  // charged the link once).
  for (const char* model : {"bert_base", "resnet50"}) {
    auto o = options(model, 16);
    o.cluster = "hkbu-10gbe";
    o.network = "ib-edr";
    o.framework = "horovod";
    const double des = sim::predict(o).step_time_s;
    o.engine = sim::Engine::kAnalytic;
    const double analytic = sim::predict(o).step_time_s;
    CAPTURE(model);
    CHECK(rel(des, analytic) < 0.03);
  }
}

TEST_CASE("bad_framework_inputs_name_the_flag") {
  auto o = options("resnet50", 16);
  o.framework = "horovd";
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("did you mean 'horovod'"),
                       dlsim::InputError);
  o.framework = "tf-replicated";
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("runs inside one node"),
                       dlsim::InputError);
  o.framework = "pytorch-ddp";
  o.framework_options.cycle_time = Seconds(1e-3);
  CHECK_THROWS_WITH_AS(sim::predict(o), doctest::Contains("cycle_time"), dlsim::InputError);
  o = options("resnet50", 0);
  CHECK_THROWS_AS(sim::predict(o), dlsim::InputError);
  o = options("resnet50", 65);
  CHECK_THROWS_AS(sim::predict(o), dlsim::InputError);
}

TEST_CASE("exposed_communication_is_activity_and_the_wait_after_backward_is_not") {
  // With XLA every exchange starts after the compiled backward pass, and Horovod takes it up at
  // its next cycle: the step waits with nothing in flight before the collectives run. That wait
  // is in after_backward_s (and fusion_or_bucket_waiting), not in the exposed communication,
  // which can never exceed the communication itself (it did: 3.05 of 2.52 ms).
  sim::PredictOptions o;
  o.model = "resnet50";
  o.gpus = 16;
  o.batch = 16;
  o.cluster = "dgx1-v100";
  o.precision = sim::TrainingPrecision::kFp16;
  o.optimizer = sim::Optimizer::kAdam;
  o.framework_options.xla = true;
  for (const char* engine : {"des", "analytic"}) {
    o.engine = *sim::parse_engine(engine);
    const auto p = sim::predict(o);
    CAPTURE(engine);
    CHECK(p.exposed_communication_s <= p.communication_s * (1 + 1e-9));
    CHECK(p.after_backward_s >= p.exposed_communication_s);
    // Every collective waits for backward, so all of it is exposed.
    CHECK(p.exposed_communication_s == dlsim_test::approx(p.communication_s).epsilon(1e-6));
    CHECK(p.loss.fusion_or_bucket_waiting >=
          p.after_backward_s - p.exposed_communication_s - 1e-12);
  }
}

TEST_CASE("golden_predictions_hold_to_one_part_in_a_million") {
  // tests/golden/*.json: whole predictions of a handful of configurations with the inputs that
  // made them. The simulator is deterministic; 1e-6 relative leaves room for floating-point
  // differences between compilers only. Regenerate with `dlsim predict ... --format json`
  // when a model change is intended, and say why in the commit.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DLSIM_GOLDEN_DIR)) {
    std::ifstream in(entry.path());
    const auto golden = nlohmann::json::parse(in);
    const auto& in_ = golden["inputs"];
    sim::PredictOptions o;
    o.model = in_["model"];
    o.gpus = in_["gpus"];
    REQUIRE(sim::set_batch(o, in_["batch"].get<std::string>()));
    o.cluster = in_["cluster"];
    o.framework = in_["framework"];
    if (!in_["strategy"].is_null()) o.strategy = in_["strategy"].get<std::string>();
    o.precision = *sim::parse_training_precision(in_["precision"].get<std::string>());
    o.optimizer = *sim::parse_optimizer(in_["optimizer"].get<std::string>());
    o.iterations = in_["iterations"];
    o.seed = in_["seed"];
    o.engine = *sim::parse_engine(in_["engine"].get<std::string>());
    if (in_.contains("overlap")) o.overlap = in_["overlap"].get<bool>();
    if (in_.contains("xla")) o.framework_options.xla = in_["xla"].get<bool>();
    if (in_.contains("host_staging")) {
      o.framework_options.host_staging = in_["host_staging"].get<bool>();
    }
    const auto got = sim::to_json(sim::predict(o));
    CAPTURE(entry.path().filename().string());
    for (const char* key :
         {"step_time_s", "throughput_samples_per_s", "scaling_efficiency", "communication_s",
          "exposed_communication_s", "after_backward_s", "memory_per_gpu_bytes"}) {
      CAPTURE(key);
      CHECK(got[key].get<double>() == dlsim_test::approx(golden[key].get<double>()).epsilon(1e-6));
    }
    for (const auto& item : golden["efficiency_loss"].items()) {
      const std::string part = item.key();  // CAPTURE needs a variable, not a binding
      const auto& value = item.value();
      CAPTURE(part);
      CHECK(got["efficiency_loss"][part].get<double>() ==
            doctest::Approx(value.get<double>()).epsilon(1e-6).scale(1e-3));
    }
    ++files;
  }
  CHECK(files == 6);
}

TEST_CASE("measured_layer_times_come_from_the_table_at_the_profiles_threads_and_precision") {
  // A layer measured at batch 8 (forward 1 ms, backward 2 ms) and 16 (1.8 ms, 3.8 ms): batch 12
  // lies on the straight line through them (1.4 ms, 2.9 ms), batch 32 on its continuation
  // (3.4 ms, 7.4 ms); a layer measured at one batch scales with the batch; another signature,
  // another thread count or another precision has no entry, and an amp entry serves amp only.
  auto gpu = dlsim::hardware::load_gpu("v100-sxm2-16gb");
  const std::string sig = "relu {} in=[64]g out=[64]";
  gpu.kernels.push_back({sig, 8, 1, "fp32", dlsim::Seconds(1e-3), dlsim::Seconds(2e-3)});
  gpu.kernels.push_back({sig, 16, 1, "fp32", dlsim::Seconds(1.8e-3), dlsim::Seconds(3.8e-3)});
  gpu.kernels.push_back({sig, 8, 2, "fp32", dlsim::Seconds(0.6e-3), dlsim::Seconds(1.1e-3)});
  gpu.kernels.push_back({sig, 8, 1, "amp", dlsim::Seconds(0.4e-3), dlsim::Seconds(0.9e-3)});
  gpu.kernels.push_back(
      {"tanh {} in=[64]g out=[64]", 4, 1, "fp32", dlsim::Seconds(1e-3), dlsim::Seconds(3e-3)});
  const auto at = [&](const std::string& s, std::int64_t b) {
    return sim::measured_layer(gpu, s, b);
  };
  REQUIRE(at(sig, 8));
  CHECK(at(sig, 8)->first.value() == dlsim_test::approx(1e-3));
  CHECK(at(sig, 12)->first.value() == dlsim_test::approx(1.4e-3));
  CHECK(at(sig, 12)->second.value() == dlsim_test::approx(2.9e-3));
  CHECK(at(sig, 32)->first.value() == dlsim_test::approx(3.4e-3));
  CHECK(at(sig, 32)->second.value() == dlsim_test::approx(7.4e-3));
  CHECK(at("tanh {} in=[64]g out=[64]", 8)->second.value() == dlsim_test::approx(6e-3));
  CHECK_FALSE(at("gelu {} in=[64]g out=[64]", 8));
  const auto amp = sim::measured_layer(gpu, sig, 16, sim::TrainingPrecision::kAmp);
  REQUIRE(amp);
  CHECK(amp->second.value() == dlsim_test::approx(1.8e-3));  // 0.9 ms x 16 / 8
  CHECK_FALSE(sim::measured_layer(gpu, sig, 8, sim::TrainingPrecision::kFp16));
  gpu.threads = 2;
  CHECK(at(sig, 8)->first.value() == dlsim_test::approx(0.6e-3));
  CHECK_FALSE(at("tanh {} in=[64]g out=[64]", 4));
}

TEST_CASE("tf32_and_bf16_are_training_precisions_with_their_own_rates_tables_and_memory") {
  // docs/simulator.md, "Precisions": tf32 keeps fp32 tensors and runs GEMMs and convolutions at
  // the GPU's tf32 peak; bf16 is mixed precision with bfloat16 (fp32 master weights and
  // gradients, 16-bit activations) at the bf16 peak. Each reads only its own layer-table entries.
  for (const auto* name : {"fp32", "tf32", "fp16", "amp", "bf16"}) {
    const auto p = sim::parse_training_precision(name);
    REQUIRE(p);
    CHECK(sim::to_string(*p) == name);
  }
  CHECK_FALSE(sim::parse_training_precision("fp8"));
  CHECK(sim::activation_precision(sim::TrainingPrecision::kTf32) == dlsim::Precision::kFp32);
  CHECK(sim::activation_precision(sim::TrainingPrecision::kBf16) == dlsim::Precision::kBf16);
  CHECK(sim::gradient_element(sim::TrainingPrecision::kTf32).value() == 4.0);
  CHECK(sim::gradient_element(sim::TrainingPrecision::kBf16).value() == 4.0);

  // A 4096 x 4096 x 4096 GEMM is compute-bound on an H100 in every precision: its roofline
  // time scales with 1 / peak (fp32 67, tf32 494.5, bf16 989.5 TFLOP/s, the preset's figures).
  const auto gpu = dlsim::hardware::load_gpu("h100-sxm5");
  const auto graph = dlsim::model::load_model("bert_base");
  const auto stats = dlsim::model::analyze(graph, 16, dlsim::Precision::kFp32);
  const auto step = [&](sim::TrainingPrecision p) {
    sim::ComputeOptions o;
    o.precision = p;
    return sim::compute_profile(stats, gpu, o);
  };
  const auto fp32 = step(sim::TrainingPrecision::kFp32);
  const auto tf32 = step(sim::TrainingPrecision::kTf32);
  const auto bf16 = step(sim::TrainingPrecision::kBf16);
  const auto amp = step(sim::TrainingPrecision::kAmp);
  CHECK(tf32.forward < fp32.forward);
  CHECK(bf16.forward < tf32.forward);
  CHECK(bf16.forward.value() == dlsim_test::approx(amp.forward.value()));  // same peak on H100

  // Memory: tf32 holds fp32 weights (4 B per parameter), bf16 an fp32 master copy plus a 16-bit
  // working copy (6 B), as amp does.
  sim::ComputeOptions o;
  o.precision = sim::TrainingPrecision::kTf32;
  const double params = static_cast<double>(stats.params);
  CHECK(sim::memory_use(stats, o, dlsim::Bytes(0)).weights.value() ==
        dlsim_test::approx(4 * params));
  o.precision = sim::TrainingPrecision::kBf16;
  CHECK(sim::memory_use(stats, o, dlsim::Bytes(0)).weights.value() ==
        dlsim_test::approx(6 * params));

  // Layer tables: a tf32 or bf16 entry serves its own precision only.
  auto tabled = gpu;
  const std::string sig = "relu {} in=[64]g out=[64]";
  tabled.kernels.push_back({sig, 8, 1, "tf32", dlsim::Seconds(1e-3), dlsim::Seconds(2e-3)});
  tabled.kernels.push_back({sig, 8, 1, "bf16", dlsim::Seconds(0.5e-3), dlsim::Seconds(1e-3)});
  const auto t = sim::measured_layer(tabled, sig, 8, sim::TrainingPrecision::kTf32);
  const auto b = sim::measured_layer(tabled, sig, 8, sim::TrainingPrecision::kBf16);
  REQUIRE(t);
  REQUIRE(b);
  CHECK(t->first.value() == dlsim_test::approx(1e-3));
  CHECK(b->second.value() == dlsim_test::approx(1e-3));
  CHECK_FALSE(sim::measured_layer(tabled, sig, 8, sim::TrainingPrecision::kFp32));
  CHECK_FALSE(sim::measured_layer(tabled, sig, 8, sim::TrainingPrecision::kAmp));
}

TEST_CASE(
    "tensorflow_replicas_updated_by_copies_exchange_after_backward_parameter_servers_do_not") {
  // docs/simulator.md, "TensorFlow's GPU replicas": where TensorFlow sums a variable on one GPU
  // by copies and copies the sum back to every replica (tf-replicated copy, tf-ps
  // distributed_replicated with several GPUs per node), every exchange waits for the backward
  // pass, exactly as --no-overlap would have it; a parameter server (on the host or on GPU 0),
  // NCCL's allreduce and distributed_replicated with one GPU per node keep overlapping it.
  auto step = [](sim::PredictOptions o, bool overlap) {
    o.overlap = overlap;
    return sim::predict(o);
  };
  for (const auto engine : {sim::Engine::kDes, sim::Engine::kAnalytic}) {
    CAPTURE(static_cast<int>(engine));
    auto o = options("vgg16", 8);
    o.engine = engine;
    o.cluster = "aws-p2.8xlarge";
    o.framework = "tf-replicated";
    o.framework_options.mode = "copy";
    const auto copy = step(o, true);
    CHECK(copy.step_time_s == dlsim_test::approx(step(o, false).step_time_s).epsilon(1e-12));
    bool said = false;
    for (const auto& w : copy.why) said |= w.find("copies the sum to every replica") != w.npos;
    CHECK(said);

    o.cluster = "aws-p2.8xlarge-distributed";
    o.gpus = 16;
    o.framework = "tf-ps";
    o.framework_options.mode = "distributed_replicated";
    CHECK(step(o, true).step_time_s ==
          dlsim_test::approx(step(o, false).step_time_s).epsilon(1e-12));
    o.gpus = 8;
    o.gpus_per_node = 1;  // one GPU per worker: nothing to sum on a GPU
    CHECK(step(o, true).step_time_s < step(o, false).step_time_s);

    o = options("vgg16", 8);
    o.engine = engine;
    o.cluster = "aws-p2.8xlarge";
    o.framework = "tf-ps";
    o.framework_options.ps_on_gpu = true;
    CHECK(step(o, true).step_time_s < step(o, false).step_time_s);
    o.framework_options.ps_on_gpu = false;
    CHECK(step(o, true).step_time_s < step(o, false).step_time_s);
    o.cluster = "dgx1-p100";
    o.framework = "tf-replicated";
    CHECK(step(o, true).step_time_s < step(o, false).step_time_s);
  }
}

namespace {

// A cluster file in the temporary folder: `name`, a description, and the rest of the YAML;
// its path.
std::string test_cluster(const std::string& name, const std::string& description,
                         const std::string& body) {
  const auto path = std::filesystem::temp_directory_path() / (name + ".yaml");
  std::ofstream(path) << fmt::format(
      "kind: cluster\nname: {}\ndescription: {} (tests)\nsource: tests\nextends: default\n{}", name,
      description, body);
  return path.string();
}

// A cluster file of one node with two one-thread ranks on `cores` cores and an mpi library with
// `host_cpu` (a YAML flow map, or empty for none), for the shared-cores tests.
std::string two_ranks_on_cores(const std::string& tag, int cores, const std::string& host_cpu) {
  const auto name = fmt::format("dlsim-{}-{}-{}", tag, cores, host_cpu.empty() ? "none" : "cpu");
  return test_cluster(
      name, fmt::format("two ranks on {} cores", cores),
      fmt::format(
          "nodes: 1\n"
          "node:\n  extends: iris-v100x4\n  gpus: 2\n  host: {{cores: {0}}}\n"
          "  switches: []\n  links: [[gpu*, cpu0, pcie], [nic0, cpu0, pcie]]\n"
          "  gpu: {{extends: v100-sxm2-16gb, threads: 1, step_jitter: 0, speed_spread: 0}}\n"
          "library:\n  extends: mpi\n  name: {2}-mpi\n{1}",
          cores, host_cpu.empty() ? "" : "  host_cpu: " + host_cpu + "\n", name));
}

}  // namespace

TEST_CASE("on_shared_cores_a_collective_started_during_backward_waits_for_the_cores") {
  // docs/simulator.md, "Shared cores": a library whose calls take W = 50 ms longer beside a busy
  // compute thread (wait_per_call) and take nothing from it. With a core to spare the step is
  // the same; without, a collective of planned time D that starts b before the end of backward
  // runs at D / (D + W) of its pace until then: it ends min(W, b W / (D + W)) later, and one
  // that starts after backward not at all. The waits lie before the end of backward, one after
  // another on the stream, so the step grows by less than backward; compute is untouched.
  struct Collectives : sim::StepObserver {
    std::vector<sim::Span> spans;
    sim::Time backward_end = 0;
    void on_span(const sim::Span& s) override {
      if (s.iteration != 0) return;
      if (s.kind == sim::SpanKind::kCollective) spans.push_back(s);
      if (s.kind == sim::SpanKind::kBackward && s.rank == 0) backward_end = s.end;
    }
  };
  const auto write = [](int cores, bool wait) {
    return two_ranks_on_cores(
        "wait", cores,
        wait ? "{per_call: \"0us\", per_byte: \"0ns\", wait_per_call: \"50ms\"}" : "");
  };
  constexpr double kWait = 0.050;
  for (const char* engine : {"des", "analytic"}) {
    CAPTURE(engine);
    auto o = options("resnet18", 2);
    o.framework = "horovod";
    o.engine = *sim::parse_engine(engine);
    o.cluster = write(2, false);
    Collectives alone;
    const auto quiet = sim::predict(o, &alone);
    o.cluster = write(4, true);
    CHECK(sim::predict(o).step_time_s == dlsim_test::approx(quiet.step_time_s).epsilon(1e-12));
    o.cluster = write(2, true);
    Collectives beside;
    const auto waiting = sim::predict(o, &beside);
    CHECK(waiting.loss.communication_on_compute ==
          doctest::Approx(quiet.loss.communication_on_compute).epsilon(1e-12).scale(1e-12));
    // Each collective's own time, from the quiet run's of the same size.
    std::map<double, double> own;  // by bytes
    for (const auto& c : alone.spans) own[c.bytes] = sim::to_seconds(c.end - c.begin);
    int checked = 0, partial = 0, after = 0;
    for (const auto& c : beside.spans) {
      const auto d = own.find(c.bytes);
      if (d == own.end()) continue;
      ++checked;
      const double b = sim::to_seconds(beside.backward_end - c.begin);
      const double wait = b <= 0 ? 0.0 : std::min(kWait, b * kWait / (d->second + kWait));
      if (b <= 0) ++after;
      if (b > 0 && b < d->second + kWait) ++partial;
      CHECK(sim::to_seconds(c.end - c.begin) == doctest::Approx(d->second + wait).epsilon(1e-3));
    }
    CHECK(checked >= 3);
    CHECK(partial >= 1);
    CHECK(after >= 1);
    const double backward = waiting.backward_s;
    CHECK(waiting.step_time_s > quiet.step_time_s + 0.002);
    CHECK(waiting.step_time_s < quiet.step_time_s + backward);
  }
}

TEST_CASE("shared_cores_take_the_librarys_host_cpu_time_from_compute_only_without_spare_cores") {
  // docs/simulator.md, "Shared cores": two ranks of one thread on a node of C cores, a library
  // spending 1 ms of host CPU per call. sigma = clamp(1 - (C - 2) / 2, 0, 1): C = 2 takes all of
  // it (1 ms for every collective that starts while backward runs), C = 3 half, C = 4 none.
  // DDP's bucket copies on the compute stream are there in every case alike.
  const auto write = [](int cores, bool host_cpu) {
    return two_ranks_on_cores("shared", cores,
                              host_cpu ? "{per_call: \"1ms\", per_byte: \"0ns\"}" : "");
  };
  for (const char* engine : {"des", "analytic"}) {
    CAPTURE(engine);
    auto o = options("resnet18", 2);
    o.framework = "pytorch-ddp";
    o.engine = *sim::parse_engine(engine);
    o.cluster = write(4, false);
    const auto quiet = sim::predict(o);
    CHECK(quiet.loss.communication_on_compute > 0);  // the bucket copies
    o.cluster = write(4, true);
    const auto spare = sim::predict(o);
    CHECK(spare.loss.communication_on_compute ==
          dlsim_test::approx(quiet.loss.communication_on_compute).epsilon(1e-12));
    CHECK(spare.step_time_s == dlsim_test::approx(quiet.step_time_s).epsilon(1e-12));
    o.cluster = write(2, true);
    const auto full = sim::predict(o);
    // Whole milliseconds: one per collective started during backward; the last bucket starts
    // when backward has ended and costs nothing.
    const double calls =
        (full.loss.communication_on_compute - quiet.loss.communication_on_compute) / 1e-3;
    CHECK(calls == dlsim_test::approx(std::round(calls)).epsilon(1e-6));
    CHECK(calls >= 1);
    CHECK(calls <= full.groups - 1);
    CHECK(full.step_time_s > quiet.step_time_s);
    CHECK(full.loss.stragglers == doctest::Approx(0).scale(1e-9));
    o.cluster = write(3, true);
    const auto half = sim::predict(o);
    CHECK(half.loss.communication_on_compute - quiet.loss.communication_on_compute ==
          dlsim_test::approx(calls * 1e-3 / 2).epsilon(1e-6));
    const auto& l = full.loss;
    CHECK(l.exposed_bandwidth + l.latency_and_small_messages + l.fusion_or_bucket_waiting +
              l.parameter_server_bottleneck + l.communication_on_compute + l.stragglers + l.other ==
          dlsim_test::approx(full.step_time_s - full.single_gpu_step_s).epsilon(1e-9));
  }
}

namespace {

// A cluster file of 2 default nodes whose V100s have `sms` SMs and a memory 1,000
// times faster (few kernels memory-bound, an allreduce's traffic a few 1e-5 of it), on NCCL
// limited to one channel.
std::string one_channel_on_sms(int sms) {
  const auto name = fmt::format("dlsim-sm-share-{}", sms);
  return test_cluster(
      name, fmt::format("NCCL on {} SMs", sms),
      fmt::format(
          "nodes: 2\nnode:\n  extends: iris-v100x4\n"
          "  gpu: {{extends: v100-sxm2-16gb, step_jitter: 0, speed_spread: 0, sm_count: {1}, "
          "memory: {{bandwidth: \"900TB/s\"}}}}\n"
          "library:\n  extends: nccl\n  name: {0}-nccl\n  max_channels: 1\n",
          name, sms));
}

// Collective spans and the backward pass, from a prediction's trace.
struct Spans : sim::StepObserver {
  std::vector<std::pair<sim::Time, sim::Time>> collectives;
  sim::Time backward_begin = 0, backward_end = 0;
  void on_span(const sim::Span& s) override {
    if (s.iteration != 0) return;
    if (s.kind == sim::SpanKind::kCollective) collectives.emplace_back(s.begin, s.end);
    if (s.kind == sim::SpanKind::kBackward && s.rank == 0) {
      backward_begin = s.begin;
      backward_end = s.end;
    }
  }
};

}  // namespace

TEST_CASE("an_nccl_collective_takes_its_channels_sms_from_the_backward_pass_it_overlaps") {
  // docs/simulator.md, "NCCL on the compute's SMs": r = (1 - m) c / S + m x (memory share, here
  // under 1e-4), and backward ends r x (the time collectives overlapped it) later. One channel
  // of S = 10 and of S = 80 SMs. The analytic engine's charge equals the identity over its own
  // spans; the DES agrees within 2 %.
  auto gpu = dlsim::hardware::load_gpu("v100-sxm2-16gb");
  gpu.memory_bandwidth = dlsim::Bandwidth(900e12);
  const auto compute = sim::compute_profile(
      dlsim::model::analyze(dlsim::model::load_model("resnet50"), 32, dlsim::Precision::kFp32), gpu,
      {});
  const double m = compute.backward_memory_bound.value() / compute.backward.value();
  CHECK(m < 0.05);
  double last_step = 0;
  for (int sms : {80, 10}) {
    CAPTURE(sms);
    auto o = options("resnet50", 8);
    o.framework = "horovod";
    o.cluster = one_channel_on_sms(sms);
    o.engine = sim::Engine::kAnalytic;
    Spans spans;
    const auto analytic = sim::predict(o, &spans);
    REQUIRE(!spans.collectives.empty());
    double overlapped = 0;
    for (const auto& [b, e] : spans.collectives) {
      overlapped += sim::to_seconds(std::max<sim::Time>(
          0, std::min(e, spans.backward_end) - std::max(b, spans.backward_begin)));
    }
    CHECK(overlapped > 0.01);
    CHECK(analytic.loss.communication_on_compute ==
          dlsim_test::approx((1 - m) / sms * overlapped).epsilon(1e-3));
    CHECK(analytic.collective_compute_share == dlsim_test::approx((1 - m) / sms).epsilon(1e-3));
    CHECK(analytic.step_time_s > last_step);
    last_step = analytic.step_time_s;
    o.engine = sim::Engine::kDes;
    const auto des = sim::predict(o);
    CHECK(rel(des.loss.communication_on_compute, analytic.loss.communication_on_compute) < 0.02);
    CHECK(rel(des.step_time_s, analytic.step_time_s) < 0.02);
  }
}

TEST_CASE("the_librarys_host_cpu_is_taken_only_while_backward_runs_beside_the_collective") {
  // docs/simulator.md, "Shared cores": a collective of planned time D that takes D + W beside
  // compute (W its full wait for the cores), whose library spends c of host CPU, takes
  // r = c / (D + W) of the core while both run. Backward outlasts it: all of c; backward ends
  // during it, at B: r (B - s). Two ranks of one thread on two cores (sigma = 1), 0.05 ns/B of
  // host CPU and 20 ns/B of wait; each engine's charges against its own spans, D from each span:
  // span - W where backward outlasts it, else the root of span = D + b W / (D + W) with b the
  // time from its start to the end of backward before its own charge.
  struct Charges : sim::StepObserver {
    std::vector<std::pair<sim::Time, sim::Time>> host;
    std::vector<sim::Span> collectives;
    sim::Time backward_end = 0;
    void on_span(const sim::Span& s) override {
      if (s.iteration != 0) return;
      if (s.kind == sim::SpanKind::kHostShare && s.name == "HOST_CPU_COMMUNICATION") {
        host.emplace_back(s.begin, s.end);
      }
      if (s.kind == sim::SpanKind::kCollective) collectives.push_back(s);
      if (s.kind == sim::SpanKind::kBackward && s.rank == 0) backward_end = s.end;
    }
  };
  auto o = options("alexnet", 2);
  o.framework = "horovod";
  // Each collective also waits for the cores (20 ns/B beside compute), so that the one during
  // which backward ends outlasts it.
  o.cluster = two_ranks_on_cores(
      "overlap", 2, "{per_call: \"0us\", per_byte: \"0.05ns\", wait_per_byte: \"20ns\"}");
  std::vector<double> steps;
  for (const char* engine : {"analytic", "des"}) {
    CAPTURE(engine);
    o.engine = *sim::parse_engine(engine);
    Charges charges;
    steps.push_back(sim::predict(o, &charges).step_time_s);
    REQUIRE(!charges.host.empty());
    int partial = 0;
    for (const auto& share : charges.host) {
      // Named copies: a lambda cannot capture a structured binding (clang 14).
      const sim::Time begin = share.first, end = share.second;
      const auto c = std::find_if(charges.collectives.begin(), charges.collectives.end(),
                                  [&](const sim::Span& s) { return s.begin == begin; });
      REQUIRE(c != charges.collectives.end());
      const double cpu = 0.05e-9 * c->bytes, w = 20e-9 * c->bytes;
      const double span = sim::to_seconds(c->end - c->begin);
      const double overlap = sim::to_seconds(std::min(c->end, charges.backward_end) - begin);
      const double b = sim::to_seconds(charges.backward_end - end);
      double d = span - w;
      if (overlap < span) {
        ++partial;
        // (span - D)(D + W) = b W
        d = 0.5 * ((span - w) + std::sqrt((w - span) * (w - span) + 4 * w * (span - b)));
      }
      // The DES charges from the planned time; its collective's span is the flow network's.
      CHECK(sim::to_seconds(end - begin) == doctest::Approx(cpu * overlap / (d + w)).epsilon(2e-3));
    }
    CHECK(partial == 1);  // the collective during which backward ends
  }
  // The engines agree. While the wait did not end with backward, at 3 ns/B of host CPU the DES
  // gave 1.162 s and the analytic engine 1.699 s: the DES's Horovod cycles grouped the tensors
  // differently from one step to the next, and a 16 MB group starting 1 ms before the end of
  // backward waited 0.33 s (now 37.85 and 37.78 ms).
  CHECK(steps[1] == doctest::Approx(steps[0]).epsilon(0.02));
}

TEST_CASE("the_memory_bound_share_of_backward_follows_the_roofline") {
  // ComputeProfile::backward_memory_bound: the backward kernels whose traffic term is the larger.
  // ResNet-50 on a V100 has both kinds; a memory a million times faster leaves only kernels
  // without arithmetic (their launch), and no memory bandwidth at all is not a profile.
  const auto stats =
      dlsim::model::analyze(dlsim::model::load_model("resnet50"), 32, dlsim::Precision::kFp32);
  auto gpu = dlsim::hardware::load_gpu("v100-sxm2-16gb");
  const auto p = sim::compute_profile(stats, gpu, {});
  const double m = p.backward_memory_bound.value() / p.backward.value();
  CHECK(m > 0.05);
  CHECK(m < 0.5);
  gpu.memory_bandwidth = dlsim::Bandwidth(gpu.memory_bandwidth.value() * 1e6);
  const auto fast = sim::compute_profile(stats, gpu, {});
  CHECK(fast.backward_memory_bound.value() / fast.backward.value() < 0.01);
}

TEST_CASE("the_measured_share_of_compute_is_the_time_from_table_entries") {
  // ComputeProfile::measured: one layer of AlexNet measured (forward 1 ms, backward 2 ms at the
  // batch) puts 3 ms of the step on the table, the rest on the roofline; a measured update adds
  // its own time; an anchor scales both sides alike, so the share stays.
  const auto graph = dlsim::model::load_model("alexnet");
  auto stats = dlsim::model::analyze(graph, 32, dlsim::Precision::kFp32);
  dlsim::model::add_signatures(stats, graph);
  auto gpu = dlsim::hardware::load_gpu("v100-sxm2-16gb");
  CHECK(sim::compute_profile(stats, gpu, {}).measured.value() == 0);
  // A layer whose shape no other layer has.
  std::map<std::string, int> count;
  for (const auto& l : stats.layers) ++count[l.signature];
  const auto layer = std::find_if(stats.layers.begin(), stats.layers.end(), [&](const auto& l) {
    return l.op != "input" && count[l.signature] == 1;
  });
  REQUIRE(layer != stats.layers.end());
  gpu.kernels.push_back(
      {layer->signature, 32, 1, "fp32", dlsim::Seconds(1e-3), dlsim::Seconds(2e-3)});
  gpu.threads = 1;
  auto p = sim::compute_profile(stats, gpu, {});
  CHECK(p.measured_layers == 1);
  CHECK(p.measured.value() == dlsim_test::approx(3e-3));
  std::int64_t elements = 0;
  for (const auto& g : stats.gradients) elements += g.elements;
  gpu.updates.push_back({elements, static_cast<std::int64_t>(stats.gradients.size()), 1, "fp32",
                         dlsim::Seconds(5e-3)});
  p = sim::compute_profile(stats, gpu, {});
  CHECK(p.measured_update);
  CHECK(p.update.value() == dlsim_test::approx(5e-3));
  CHECK(p.measured.value() == dlsim_test::approx(8e-3));
  const double share = p.measured / p.step();
  sim::ComputeOptions anchored;
  anchored.anchor_throughput = 1000.0;
  const auto a = sim::compute_profile(stats, gpu, anchored);
  CHECK(a.measured / a.step() == dlsim_test::approx(share));
  CHECK(a.step().value() == dlsim_test::approx(32.0 / 1000.0));
}
