#include "validate/collective_commands.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "calibrate/import.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/json_text.hpp"
#include "common/output.hpp"
#include "common/units.hpp"
#include "common/version.hpp"
#include "hardware/loader.hpp"
#include "networks/collective.hpp"
#include "networks/placement.hpp"
#include "networks/topology.hpp"

namespace dlsim::validate {
namespace {

struct CollectiveLogOptions {
  std::vector<std::string> logs;
  std::string format = "nccl-tests";
  calibrate::ImportOptions import;
  std::string cluster;
  std::optional<std::string> library;
  std::string algo = "auto";
  int rails = 0;
  int gpus_per_thread = 1;
  std::string out = "-", json;
};

// One size of one run: what the log says and what dlsim gives.
struct Point {
  double bytes = 0;      // B, nccl-tests' size column
  double measured = 0;   // s
  double predicted = 0;  // s
  std::string algorithm, protocol;
  int channels = 0;
  double error() const { return predicted / measured - 1; }
};

// The size bands the report summarizes: latency, the channels' ramp, the middle, bandwidth.
struct Band {
  const char* name;
  double below;  // B: sizes under this, and at least the previous band's bound
};
constexpr Band kBands[] = {{"under 32 KiB", 32.0 * 1024},
                           {"32 KiB - 1 MiB", 1024.0 * 1024},
                           {"1 - 32 MiB", 32.0 * 1024 * 1024},
                           {"32 MiB and up", INFINITY}};

struct Run {
  std::string log, op;
  int ranks = 0, nodes = 0;
  std::string nccl_version;  // as the log printed it, or ""
  std::vector<Point> points;
  // Sizes dlsim gives no time for (0 B, or one rank: nothing exchanged), left out of the errors.
  std::vector<double> left_out;
};

std::size_t band_of(double bytes) {
  std::size_t i = 0;
  while (i + 1 < std::size(kBands) && !(bytes < kBands[i].below)) ++i;
  return i;
}

double median_abs_error(const std::vector<Point>& ps) {
  if (ps.empty()) return 0;
  std::vector<double> e;
  for (const auto& p : ps) e.push_back(std::abs(p.error()));
  std::sort(e.begin(), e.end());
  const auto n = e.size();
  return n % 2 == 1 ? e[n / 2] : (e[n / 2 - 1] + e[n / 2]) / 2;
}

// "-31 to -12 %" over the run's sizes in band `b`, or "" where it has none.
std::string band_range(const Run& r, std::size_t b) {
  std::optional<double> lo, hi;
  for (const auto& p : r.points) {
    if (band_of(p.bytes) != b) continue;
    lo = std::min(lo.value_or(p.error()), p.error());
    hi = std::max(hi.value_or(p.error()), p.error());
  }
  if (!lo) return "";
  if (*lo == *hi) return fmt::format("{:+.1f} %", *lo * 100);
  return fmt::format("{:+.1f} to {:+.1f} %", *lo * 100, *hi * 100);
}

// Every size of every run of the logs, predicted on the cluster as the runs placed their ranks:
// `ranks / nodes` GPUs on each of the cluster's first `nodes` nodes.
std::vector<Run> compare(const CollectiveLogOptions& o, const hardware::ClusterSpec& cluster) {
  std::vector<Run> runs;
  for (const auto& path : o.logs) {
    const auto results = o.format == "osu" ? calibrate::import_osu(path, o.import)
                                           : calibrate::import_nccl_tests(path, o.import);
    // The runs of a log in the order it printed them: one per operation, rank and node count.
    std::map<std::tuple<std::string, int, int>, std::size_t> index;
    const auto first = runs.size();
    for (const auto& m : results.measurements) {
      const auto key = std::make_tuple(m.op, m.ranks, m.nodes);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, runs.size()).first;
        Run r;
        r.log = path;
        r.op = m.op;
        r.ranks = m.ranks;
        r.nodes = m.nodes;
        const auto v = results.provenance.versions.find("nccl");
        if (v != results.provenance.versions.end()) r.nccl_version = v->second;
        runs.push_back(std::move(r));
      }
      Point p;
      p.bytes = m.bytes;
      p.measured = m.median_s();
      if (!(p.measured > 0)) {
        fail_at({path}, "time",
                fmt::format("the {} of {:.0f} B took {} s: no time to compare with", m.op, m.bytes,
                            p.measured));
      }
      runs[it->second].points.push_back(p);
    }
    if (runs.size() == first) fail_at({path}, "", "no collective measurement to compare");
  }
  for (auto& r : runs) {
    const auto op = parse_op(r.op);
    if (!op) fail_at({r.log}, "operation", fmt::format("'{}' is no collective dlsim runs", r.op));
    if (r.ranks % r.nodes != 0) {
      fail_at({r.log}, "--nodes",
              fmt::format("{} ranks do not spread evenly over {} nodes", r.ranks, r.nodes));
    }
    const int per_node = r.ranks / r.nodes;
    if (r.nodes > cluster.node_count()) {
      fail_at({r.log}, "--cluster",
              fmt::format("the run used {} nodes; cluster '{}' has {}", r.nodes, cluster.about.name,
                          cluster.node_count()));
    }
    int most = 0;
    for (const auto& g : cluster.groups) most = std::max(most, g.node.gpus);
    if (per_node > most) {
      fail_at({r.log}, "--nodes",
              fmt::format("{} ranks on {} node{} put {} on each, but the nodes of cluster '{}' "
                          "hold at most {} GPUs (where a log does not say its node count, give "
                          "--nodes)",
                          r.ranks, r.nodes, r.nodes == 1 ? "" : "s", per_node, cluster.about.name,
                          most));
    }
    if (o.gpus_per_thread > 1 && r.ranks % o.gpus_per_thread != 0) {
      fail_at({r.log}, "--gpus-per-thread",
              fmt::format("{} ranks do not split into threads of {}", r.ranks, o.gpus_per_thread));
    }
    networks::PlacementRequest pr;
    pr.gpus = r.ranks;
    pr.gpus_per_node = per_node;
    const auto placement = naming_flags({{"gpus", "--cluster"}, {"gpus_per_node", "--cluster"}},
                                        [&] { return networks::place(cluster, pr); });
    const auto job = networks::with_server_nodes(cluster, placement, 0);
    const auto topo = naming_flags({{"rails", "--rails"}},
                                   [&] { return networks::Topology(cluster, job.nodes, o.rails); });
    const auto comm = networks::make_communicator(topo, placement, job.server_slots);
    networks::CollectiveRequest req;
    req.op = *op;
    req.gpus_per_thread = o.gpus_per_thread;
    for (auto& p : r.points) {
      req.size = Bytes(p.bytes);
      const auto res = naming_flags({{"algorithm", "--algo"}},
                                    [&] { return networks::run_collective(req, comm, o.algo); });
      p.predicted = res.time.value();
      p.algorithm = res.cost.algorithm;
      p.protocol = res.cost.protocol;
      p.channels = res.cost.channels;
    }
    const auto none = [](const Point& p) { return !(p.predicted > 0); };
    for (const auto& p : r.points) {
      if (none(p)) r.left_out.push_back(p.bytes);
    }
    r.points.erase(std::remove_if(r.points.begin(), r.points.end(), none), r.points.end());
  }
  return runs;
}

std::string markdown(const std::vector<Run>& runs, const hardware::ClusterSpec& cluster,
                     const CollectiveLogOptions& o) {
  std::string s = "# Collective logs against dlsim\n\n";
  s += fmt::format(
      "`dlsim collective` on cluster `{}` (library `{}`{}), algorithm {}{}{}, against each "
      "log's out-of-place times. Error = dlsim / measured - 1 (negative: dlsim is faster).\n\n",
      cluster.about.name, cluster.library.about.name,
      cluster.library.tuner.version.empty() ? "" : ", version " + cluster.library.tuner.version,
      o.algo, o.rails > 0 ? fmt::format(", {} rails", o.rails) : "",
      o.gpus_per_thread > 1 ? fmt::format(", {} GPUs per thread", o.gpus_per_thread) : "");
  s += "| log | operation | ranks | nodes | NCCL | sizes | median abs error |";
  for (const auto& b : kBands) s += fmt::format(" {} |", b.name);
  s += "\n|---|---|--:|--:|---|--:|--:|";
  for (std::size_t i = 0; i < std::size(kBands); ++i) s += "---|";
  s += "\n";
  for (const auto& r : runs) {
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} |", r.log, r.op, r.ranks, r.nodes,
                     r.nccl_version.empty() ? "not printed" : r.nccl_version, r.points.size(),
                     r.points.empty() ? std::string("-")
                                      : fmt::format("{:.1f} %", median_abs_error(r.points) * 100));
    for (std::size_t b = 0; b < std::size(kBands); ++b) s += fmt::format(" {} |", band_range(r, b));
    s += "\n";
  }
  for (const auto& r : runs) {
    s += fmt::format("\n## {}: {}, {} rank{} on {} node{}\n\n", r.log, r.op, r.ranks,
                     r.ranks == 1 ? "" : "s", r.nodes, r.nodes == 1 ? "" : "s");
    if (!r.left_out.empty()) {
      s += fmt::format(
          "{} size{} left out ({:.0f} B{}): dlsim gives no time where nothing is exchanged (0 B, "
          "or one rank).\n\n",
          r.left_out.size(), r.left_out.size() == 1 ? "" : "s", r.left_out.front(),
          r.left_out.size() == 1 ? "" : fmt::format(" .. {:.0f} B", r.left_out.back()));
    }
    if (r.points.empty()) continue;
    s += "| size (B) | measured (us) | dlsim (us) | error | dlsim's choice |\n";
    s += "|--:|--:|--:|--:|---|\n";
    for (const auto& p : r.points) {
      s += fmt::format("| {:.0f} | {:.2f} | {:.2f} | {:+.1f} % | {}{}, {} channel{} |\n", p.bytes,
                       p.measured * 1e6, p.predicted * 1e6, p.error() * 100, p.algorithm,
                       p.protocol.empty() ? "" : "/" + p.protocol, p.channels,
                       p.channels == 1 ? "" : "s");
    }
  }
  return s;
}

std::string json(const std::vector<Run>& runs, const hardware::ClusterSpec& cluster,
                 const CollectiveLogOptions& o) {
  nlohmann::json j;
  j["cluster"] = cluster.about.name;
  j["library"] = cluster.library.about.name;
  j["algorithm"] = o.algo;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& p : r.points) {
      pts.push_back({{"size_bytes", static_cast<long long>(std::llround(p.bytes))},
                     {"measured_s", p.measured},
                     {"predicted_s", p.predicted},
                     {"error", p.error()},
                     {"algorithm", p.algorithm},
                     {"protocol", p.protocol},
                     {"channels", p.channels}});
    }
    j["runs"].push_back(
        {{"log", r.log},
         {"op", r.op},
         {"ranks", r.ranks},
         {"nodes", r.nodes},
         {"nccl_version", r.nccl_version},
         {"median_abs_error",
          r.points.empty() ? nlohmann::json() : nlohmann::json(median_abs_error(r.points))},
         {"left_out_sizes_bytes", r.left_out},
         {"points", pts}});
  }
  j["context"] = {{"dlsim_version", kVersion},
                  {"command", "dlvalidate collective"},
                  {"inputs",
                   {{"logs", o.logs},
                    {"format", o.format},
                    {"cluster", o.cluster},
                    {"library", o.library ? nlohmann::json(*o.library) : nlohmann::json()},
                    {"algo", o.algo},
                    {"rails", o.rails > 0 ? nlohmann::json(o.rails) : nlohmann::json()},
                    {"gpus_per_thread", o.gpus_per_thread}}}};
  return json_text(j, 2) + "\n";
}

}  // namespace

void add_collective_command(CLI::App& app) {
  auto* c = app.add_subcommand(
      "collective",
      "A cluster's nccl-tests or OSU collective logs against `dlsim collective`, size by size");
  auto o = std::make_shared<CollectiveLogOptions>();
  c->add_option("logs", o->logs, "Benchmark logs (any nccl-tests version, or OSU)")->required();
  c->add_option("--format", o->format, "Which benchmark printed the logs")
      ->check(CLI::IsMember({"nccl-tests", "osu"}))
      ->capture_default_str();
  c->add_option("--op", o->import.op, "The operation, where a log does not name it");
  c->add_option("--ranks", o->import.ranks, "Ranks of the run, where a log does not say")
      ->check(CLI::Range(1, kMaxRanks));
  c->add_option("--nodes", o->import.nodes, "Nodes of the run, where a log does not say")
      ->check(CLI::Range(1, kMaxRanks));
  c->add_option("--cluster", o->cluster,
                "Cluster preset or YAML file like the one that ran the logs")
      ->required();
  c->add_option("--library", o->library,
                "Collective library preset or YAML file instead of the cluster's");
  c->add_option("--algo", o->algo, "auto (the library's own choice), ring, tree, nvls, ...")
      ->capture_default_str();
  c->add_option("--rails", o->rails, "NICs per node the runs used, the first ones (default: all)")
      ->check(CLI::Range(1, kMaxGpusPerNode));
  c->add_option("--gpus-per-thread", o->gpus_per_thread,
                "GPUs one host thread drove (nccl-tests -g)")
      ->check(CLI::Range(1, kMaxGpusPerNode))
      ->capture_default_str();
  c->add_option("-o,--output", o->out, "The Markdown report (- for stdout)");
  c->add_option("--json", o->json, "Also write every point as JSON here");
  c->callback([o] {
    refuse_repeated_inputs(o->logs, "logs", "its runs would count twice");
    networks::collective_algorithms().at(o->algo, {}, "--algo");
    hardware::check_reference(o->cluster, "cluster", "--cluster");
    if (o->library) hardware::check_reference(*o->library, "library", "--library");
    const auto cluster = hardware::load_cluster(o->cluster, o->library);
    // Everything is read and predicted before any file is written.
    const auto runs = compare(*o, cluster);
    std::vector<std::pair<std::string, std::string>> files;
    if (!o->json.empty()) files.emplace_back(o->json, json(runs, cluster, *o));
    files.emplace_back(o->out, markdown(runs, cluster, *o));
    auto inputs = o->logs;
    for (const auto& f : file_references({o->cluster, o->library.value_or("")})) {
      inputs.push_back(f);
    }
    write_outputs(files, inputs);
  });
}

}  // namespace dlsim::validate
