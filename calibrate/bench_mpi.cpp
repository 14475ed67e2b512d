#include "calibrate/bench_mpi.hpp"

#include <fmt/format.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "calibrate/busy_thread.hpp"
#include "calibrate/driver.hpp"
#include "calibrate/results.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace dlsim::calibrate {
namespace {

constexpr int kWindow = 64;  // OSU osu_bw's default window of outstanding sends

struct MpiOptions {
  std::vector<std::string> ops;
  double from = 4, to = 256.0 * 1024 * 1024, factor = 2;
  int iters = 10, warmup = 3, max_pairs = 16;
  double min_time_s = 1e-3;
  bool resume = false;
  bool cpu_cost = false;  // also measure the compute each allreduce takes from a busy thread
  std::string out;
};

double now() { return MPI_Wtime(); }

class Runner {
 public:
  Runner(const MpiOptions& o, const std::string& command) : o_(o), command_(command) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    // Every rank's host, gathered: nodes = distinct hosts.
    std::vector<char> all(static_cast<std::size_t>(size_) * MPI_MAX_PROCESSOR_NAME, 0);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                  MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < size_; ++r) {
      hosts_.emplace_back(&all[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    }
    nodes_ = static_cast<int>(std::set<std::string>(hosts_.begin(), hosts_.end()).size());
    std::map<std::string, int> per_host;
    for (const auto& h : hosts_) ranks_per_node_ = std::max(ranks_per_node_, ++per_host[h]);
    cpu_set_t set;
    CPU_ZERO(&set);
    rank_cores_ = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    if (rank_cores_ <= 0) rank_cores_ = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    MPI_Allreduce(MPI_IN_PLACE, &rank_cores_, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }

  void run() {
    std::unique_ptr<ResultsWriter> writer;
    std::set<std::string> done;
    // Rank 0 checks the file and writes it; the others follow its decisions.
    int ok = 1;
    std::string error;
    if (rank_ == 0) {
      try {
        DriverOptions d;
        d.resume = o_.resume;
        check_options(d, o_.out);
        if (std::error_code ec; o_.resume && std::filesystem::exists(o_.out, ec)) {
          for (const auto& m : read_results(o_.out, true).measurements) {
            done.insert(resume_key(m.op, m.backend, m.ranks, m.bytes, m.shape));
          }
        }
        auto prov = host_provenance(command_);
        const std::set<std::string> distinct(hosts_.begin(), hosts_.end());
        prov.hosts.assign(distinct.begin(), distinct.end());
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int vlen = 0;
        MPI_Get_library_version(version, &vlen);
        std::string v(version, static_cast<std::size_t>(vlen));
        if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
        prov.versions["mpi"] = v;
        for (const char* e : {"OMPI_MCA_btl", "OMPI_MCA_pml", "OMPI_MCA_btl_tcp_if_include",
                              "UCX_TLS", "UCX_NET_DEVICES"}) {
          if (const char* value = std::getenv(e)) prov.environment[e] = value;
        }
        prov.notes.push_back(fmt::format(
            "{} MPI ranks on {} node(s); a sample is the slowest rank's mean over its inner loop",
            size_, nodes_));
        writer = std::make_unique<ResultsWriter>(o_.out, prov, o_.resume);
      } catch (const InputError& e) {
        ok = 0;
        error = e.what();
      }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
      if (rank_ == 0) throw InputError(error);
      return;
    }
    auto emit = [&](Measurement m) {
      if (rank_ == 0) writer->add(m);
      ++measured_;
    };
    auto skip = [&](const std::string& op, int ranks, double bytes, const std::string& shape) {
      int s = rank_ == 0 && done.count(resume_key(op, "mpi", ranks, bytes, shape)) ? 1 : 0;
      MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
      if (s) ++skipped_;
      return s != 0;
    };
    const auto sizes = geometric_sizes(o_.from, o_.to, o_.factor);
    for (const auto& op : o_.ops) {
      if (op == "p2p") {
        p2p(sizes, emit, skip);
      } else {
        collective(op, sizes, emit, skip);
      }
    }
    if (rank_ == 0) {
      Provenance end;
      end.load_after = load_average();
      writer->finish(end);
      std::cerr << fmt::format("dlcalibrate: {} points measured into {}{}\n", measured_, o_.out,
                               skipped_ ? fmt::format(" ({} already there)", skipped_) : "");
    }
  }

 private:
  // The same inner-loop count on every rank: rank 0's estimate for `min_time_s`, broadcast.
  long agree_inner(const std::function<void()>& call, double min_time_s) {
    const double t0 = now();
    call();
    double one = now() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long inner = std::max(1L, static_cast<long>(min_time_s / std::max(one, 1e-9)));
    inner = std::min(inner, 100000L);
    MPI_Bcast(&inner, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return inner;
  }

  // Samples of `call` on every rank (they all take part), each the slowest rank's mean.
  std::vector<double> time_all(const std::function<void()>& call) {
    for (int i = 0; i < o_.warmup; ++i) call();
    const long inner = agree_inner(call, o_.min_time_s);
    std::vector<double> samples;
    for (int s = 0; s < o_.iters; ++s) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      for (long i = 0; i < inner; ++i) call();
      double t = (now() - t0) / static_cast<double>(inner);
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      samples.push_back(t);
    }
    return samples;
  }

  // Seconds of compute one call takes from a busy thread of each rank (the slowest rank's,
  // median of the samples): the thread's rate alone is counted while the rank sleeps, then its
  // units are counted over a loop of calls; what it did not do at its own rate is what the calls
  // took from it (docs/simulator.md, "Shared cores").
  // Also the call's own time beside the busy thread (the slowest rank's, median).
  std::pair<double, double> compute_taken(const std::function<void()>& call) {
    BusyThread busy;
    const long inner = agree_inner(call, std::max(o_.min_time_s, kBesideLoopSeconds));
    std::vector<double> samples, beside;
    for (int s = 0; s < o_.iters; ++s) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double a0 = now();
      const auto u0 = busy.units();
      std::this_thread::sleep_for(std::chrono::duration<double>(kBesideLoopSeconds));
      const double rate = static_cast<double>(busy.units() - u0) / (now() - a0);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now();
      const auto c0 = busy.units();
      for (long i = 0; i < inner; ++i) call();
      const double wall = now() - t0;
      const double done = static_cast<double>(busy.units() - c0);
      // Per call: compute lost, and the call's own time; the slowest rank's of each.
      double worst[2] = {rate > 0 ? std::max(0.0, wall - done / rate) : 0.0, wall};
      for (double& w : worst) w /= static_cast<double>(inner);
      MPI_Allreduce(MPI_IN_PLACE, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      samples.push_back(worst[0]);
      beside.push_back(worst[1]);
    }
    std::sort(samples.begin(), samples.end());
    std::sort(beside.begin(), beside.end());
    return {samples[samples.size() / 2], beside[beside.size() / 2]};
  }

  template <class Emit, class Skip>
  void collective(const std::string& op, const std::vector<double>& sizes, Emit& emit, Skip& skip) {
    for (const double bytes : sizes) {
      // nccl-tests' size: the per-rank buffer (allreduce, broadcast) or the whole gathered one
      // (allgather, reducescatter); float32 elements.
      const bool whole = op == "allgather" || op == "reducescatter";
      auto count = static_cast<std::size_t>(bytes / 4);
      if (whole) count /= static_cast<std::size_t>(size_);
      if (count == 0) continue;
      const double moved =
          whole ? static_cast<double>(count * 4) * size_ : static_cast<double>(count * 4);
      if (skip(op, size_, moved, "")) continue;
      const std::size_t total = whole ? count * static_cast<std::size_t>(size_) : count;
      // Written once before timing: first-touch page faults stay out of the samples.
      std::vector<float> send(total, 1.0f), recv(total, 0.0f);
      const int n = static_cast<int>(count);
      std::function<void()> call;
      if (op == "allreduce") {
        call = [&] {
          MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
      } else if (op == "allgather") {
        call = [&] {
          MPI_Allgather(send.data(), n, MPI_FLOAT, recv.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
        };
      } else if (op == "reducescatter") {
        call = [&] {
          MPI_Reduce_scatter_block(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        };
      } else {
        call = [&] { MPI_Bcast(send.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD); };
      }
      Measurement m;
      m.op = op;
      m.backend = "mpi";
      m.ranks = size_;
      m.nodes = nodes_;
      m.bytes = moved;
      m.samples_s = time_all(call);
      if (o_.cpu_cost && op == "allreduce") {
        const auto [taken, beside] = compute_taken(call);
        m.params["cpu_s_per_call"] = fmt::format("{:.6g}", taken);
        m.params["s_per_call_beside_compute"] = fmt::format("{:.6g}", beside);
        // What the ranks could run on: the fewest cores any rank's affinity allows, and the
        // most ranks on one node (a node's cores for the profile, docs/calibrate.md).
        m.params["rank_cores"] = std::to_string(rank_cores_);
        m.params["ranks_per_node"] = std::to_string(ranks_per_node_);
        m.params["cpu_cost"] =
            "compute a busy thread of the rank loses per call, beside the calls on the rank's "
            "cores (slowest rank, median sample)";
      }
      emit(m);
    }
  }

  // Pairs of ranks to test: one rank per node (the first), every pair of nodes (or a seeded
  // sample of `max_pairs` of them); on one node, ranks 0 and 1.
  std::vector<std::pair<int, int>> pairs() const {
    std::vector<int> leaders;
    std::set<std::string> seen;
    for (int r = 0; r < size_; ++r) {
      if (seen.insert(hosts_[static_cast<std::size_t>(r)]).second) leaders.push_back(r);
    }
    std::vector<std::pair<int, int>> out;
    if (leaders.size() < 2) {
      if (size_ >= 2) out.push_back({0, 1});
      return out;
    }
    for (std::size_t i = 0; i < leaders.size(); ++i) {
      for (std::size_t j = i + 1; j < leaders.size(); ++j) out.push_back({leaders[i], leaders[j]});
    }
    if (static_cast<int>(out.size()) > o_.max_pairs) {
      std::mt19937_64 rng(1);
      std::shuffle(out.begin(), out.end(), rng);
      out.resize(static_cast<std::size_t>(o_.max_pairs));
      std::sort(out.begin(), out.end());
    }
    return out;
  }

  template <class Emit, class Skip>
  void p2p(const std::vector<double>& sizes, Emit& emit, Skip& skip) {
    for (const auto& pair : pairs()) {
      // Named copies: lambdas below use them (clang before 16 cannot capture a binding).
      const int a = pair.first, b = pair.second;
      const std::string peer = fmt::format("{}-{}", hosts_[static_cast<std::size_t>(a)],
                                           hosts_[static_cast<std::size_t>(b)]);
      const std::string shape = fmt::format("ranks {}-{}", a, b);
      const int nodes =
          hosts_[static_cast<std::size_t>(a)] == hosts_[static_cast<std::size_t>(b)] ? 1 : 2;
      const bool in = rank_ == a || rank_ == b;
      const int other = rank_ == a ? b : a;
      for (const double bytes : sizes) {
        const auto n = static_cast<std::size_t>(bytes);
        std::vector<char> buf(n, 1), ack(1, 0);
        std::vector<MPI_Request> reqs(kWindow);
        // Latency: ping-pong, half the round trip (osu_latency).
        if (!skip("p2p_latency", 2, bytes, shape)) {
          auto pingpong = [&] {
            if (!in) return;
            if (rank_ == a) {
              MPI_Send(buf.data(), static_cast<int>(n), MPI_CHAR, other, 1, MPI_COMM_WORLD);
              MPI_Recv(buf.data(), static_cast<int>(n), MPI_CHAR, other, 1, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE);
            } else {
              MPI_Recv(buf.data(), static_cast<int>(n), MPI_CHAR, other, 1, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE);
              MPI_Send(buf.data(), static_cast<int>(n), MPI_CHAR, other, 1, MPI_COMM_WORLD);
            }
          };
          auto samples = time_all(pingpong);
          for (auto& s : samples) s /= 2;
          Measurement m;
          m.op = "p2p_latency";
          m.backend = "mpi";
          m.ranks = 2;
          m.nodes = nodes;
          m.bytes = bytes;
          m.shape = shape;
          m.dtype = "byte";
          m.params = {{"peer", peer}, {"osu_metric", "one-way latency"}};
          m.samples_s = samples;
          emit(m);
        }
        // Bandwidth: a window of sends, then one acknowledgement (osu_bw); time per message.
        if (!skip("p2p_bandwidth", 2, bytes, shape)) {
          auto window = [&] {
            if (!in) return;
            for (int w = 0; w < kWindow; ++w) {
              if (rank_ == a) {
                MPI_Isend(buf.data(), static_cast<int>(n), MPI_CHAR, other, 2, MPI_COMM_WORLD,
                          &reqs[static_cast<std::size_t>(w)]);
              } else {
                MPI_Irecv(buf.data(), static_cast<int>(n), MPI_CHAR, other, 2, MPI_COMM_WORLD,
                          &reqs[static_cast<std::size_t>(w)]);
              }
            }
            MPI_Waitall(kWindow, reqs.data(), MPI_STATUSES_IGNORE);
            if (rank_ == a) {
              MPI_Recv(ack.data(), 1, MPI_CHAR, other, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
              MPI_Send(ack.data(), 1, MPI_CHAR, other, 3, MPI_COMM_WORLD);
            }
          };
          auto samples = time_all(window);
          for (auto& s : samples) s /= kWindow;
          Measurement m;
          m.op = "p2p_bandwidth";
          m.backend = "mpi";
          m.ranks = 2;
          m.nodes = nodes;
          m.bytes = bytes;
          m.shape = shape;
          m.dtype = "byte";
          m.params = {{"peer", peer}, {"window", std::to_string(kWindow)}};
          m.samples_s = samples;
          emit(m);
        }
      }
    }
  }

  const MpiOptions& o_;
  std::string command_;
  int rank_ = 0, size_ = 1, nodes_ = 1;
  int ranks_per_node_ = 0, rank_cores_ = 1;
  std::vector<std::string> hosts_;
  std::size_t measured_ = 0, skipped_ = 0;
};

}  // namespace

void add_run_mpi(CLI::App& run, const std::string& command_line) {
  auto* c = run.add_subcommand(
      "mpi",
      "MPI point-to-point latency/bandwidth between nodes and collective sweeps (run under "
      "mpirun or srun, one rank per GPU or per node)");
  auto o = std::make_shared<MpiOptions>();
  auto text = std::make_shared<std::map<std::string, std::string>>();
  (*text)["ops"] = "p2p,allreduce,allgather,reducescatter,broadcast";
  (*text)["from"] = "4B";
  (*text)["to"] = "256MiB";
  (*text)["min_time"] = "1ms";
  c->add_option("--ops", (*text)["ops"],
                "Comma-separated: p2p, allreduce, allgather, reducescatter, broadcast")
      ->capture_default_str();
  c->add_option("-b,--minbytes", (*text)["from"], "Smallest message")->capture_default_str();
  c->add_option("-e,--maxbytes", (*text)["to"], "Largest message")->capture_default_str();
  c->add_option("-f,--stepfactor", o->factor, "Size multiplier between steps")
      ->capture_default_str();
  c->add_option("-n,--iters", o->iters, "Timed samples per point")->capture_default_str();
  c->add_option("-w,--warmup", o->warmup, "Untimed calls per point")->capture_default_str();
  c->add_option("--min-time", (*text)["min_time"], "Least time of one sample's inner loop")
      ->capture_default_str();
  c->add_option("--max-pairs", o->max_pairs,
                "Node pairs measured point to point (a seeded sample above this)")
      ->capture_default_str();
  c->add_flag("--cpu-cost", o->cpu_cost,
              "Also record the compute each allreduce call takes from a busy thread on the "
              "rank's cores (params.cpu_s_per_call; the library's host CPU cost)");
  c->add_flag("--resume", o->resume, "Continue an existing results file");
  c->add_option("-o,--output", o->out, "Results file (JSON Lines), written by rank 0")->required();
  c->callback([o, text, command_line] {
    o->ops = split_list((*text)["ops"]);
    static const std::set<std::string> known = {"p2p", "allreduce", "allgather", "reducescatter",
                                                "broadcast"};
    for (const auto& op : o->ops) {
      if (!known.count(op)) {
        fail_at({}, "--ops",
                fmt::format("unknown operation '{}'{}", op,
                            did_you_mean(op, {known.begin(), known.end()})));
      }
    }
    o->from = parse_size_flag("--minbytes", (*text)["from"]);
    o->to = parse_size_flag("--maxbytes", (*text)["to"]);
    geometric_sizes(o->from, o->to, o->factor);  // checks the sweep
    o->min_time_s = parse_seconds((*text)["min_time"]).value();
    if (o->iters < 1) fail_at({}, "--iters", "must be at least 1");
    if (o->warmup < 0) fail_at({}, "--warmup", "must not be negative");
    if (o->max_pairs < 1) fail_at({}, "--max-pairs", "must be at least 1");
    if (o->out == "-") fail_at({}, "--output", "needs a file (results are appended as measured)");
    int provided = 0;
    // --cpu-cost runs a compute thread that never calls MPI beside the main thread.
    MPI_Init_thread(nullptr, nullptr, o->cpu_cost ? MPI_THREAD_FUNNELED : MPI_THREAD_SINGLE,
                    &provided);
    try {
      Runner r(*o, command_line);
      r.run();
    } catch (...) {
      // Rank 0 reports; every rank leaves MPI cleanly so mpirun does not hang.
      MPI_Finalize();
      throw;
    }
    MPI_Finalize();
  });
}

}  // namespace dlsim::calibrate
