#include "simulator/hardware_commands.hpp"
#include "common/json_text.hpp"

#include <fmt/format.h>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/output.hpp"
#include "common/version.hpp"
#include "hardware/loader.hpp"
#include "hardware/render.hpp"
#include "networks/collective.hpp"

namespace dlsim::cli {
namespace {

struct ShowOptions {
  std::string name;
  std::string kind;
  std::string format = "table";
  std::string output;
};

void run_list(const std::string& kind) {
  std::ostringstream o;
  o << fmt::format("{:<8} {:<28} {}\n", "kind", "name", "description");
  for (const auto& p : hardware::list_presets()) {
    if (!kind.empty() && p.kind != kind) continue;
    std::string d = p.description;
    if (d.size() > 80) d = d.substr(0, 77) + "...";
    o << fmt::format("{:<8} {:<28} {}\n", p.kind, p.name, d);
  }
  write_output("", o.str());
}

void run_show(const ShowOptions& opt) {
  const auto spec = hardware::load_any(opt.name, opt.kind);
  std::string text;
  if (opt.format == "json") {
    auto j = hardware::to_json(spec);
    j["context"] = {{"dlsim_version", kVersion},
                    {"command", "hardware show"},
                    {"inputs", {{"name", opt.name}, {"kind", opt.kind}}}};
    text = json_text(j, 2) + "\n";
  } else {
    text = hardware::to_text(spec);
  }
  write_output(opt.output, text, file_references({opt.name}));
}

// ---- dlsim collective -----------------------------------------------------------------------

struct CollectiveOptions {
  std::string op = "allreduce";
  std::string algo = "auto";
  std::string bytes = "8B:1GiB";
  int gpus = 0;
  std::optional<int> gpus_per_node;
  std::string nodelist;
  std::string cluster = "default";
  int root = 0;
  int gpus_per_thread = 1;
  std::optional<std::string> library;
  int rails = 0;
  int ps_servers = 1;
  std::string ps_placement = "dedicated";
  std::string ps_device = "cpu";
  std::string ps_sharding = "split";
  std::string format = "table";
  std::string output;
  std::vector<std::string> given;  // the options given on the command line (CLI11's count)
};

// "1MiB", or "MIN:MAX" doubling, or "MIN:MAX:xF" multiplying by F (as nccl-tests -b -e -f).
std::vector<Bytes> parse_sizes(const std::string& text) {
  std::vector<std::string> parts;  // every field, empty ones too ("1KiB:" is two)
  for (std::size_t start = 0;;) {
    const auto colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  auto size = [&](const std::string& s) {
    // A whole number of bytes, nonzero ones at least 1 B (parse_whole_bytes): only 0 is left.
    const Bytes b = parse_flag(s, "--bytes", parse_whole_bytes);
    if (!(b.value() > 0)) fail_at({}, "--bytes", fmt::format("'{}': a size must be positive", s));
    return b;
  };
  if (parts.empty() || parts.size() > 3) {
    fail_at({}, "--bytes",
            fmt::format("expected SIZE, MIN:MAX or MIN:MAX:xFACTOR, got '{}'", text));
  }
  if (parts.size() == 1) return {size(parts[0])};
  const Bytes lo = size(parts[0]);
  const Bytes hi = size(parts[1]);
  double factor = 2;
  if (parts.size() == 3) {
    const auto& f = parts[2];
    char* end = nullptr;
    factor = f.size() > 1 && f[0] == 'x' ? std::strtod(f.c_str() + 1, &end) : 0;
    if (!end || *end != '\0' || !(factor > 1)) {
      fail_at({}, "--bytes", fmt::format("step '{}' must be xF with F > 1 (e.g. x2)", f));
    }
  }
  if (hi < lo) fail_at({}, "--bytes", "MAX is smaller than MIN");
  std::vector<Bytes> out;
  for (double v = lo.value(); v <= hi.value() * (1 + 1e-12); v *= factor) {
    out.emplace_back(std::round(v));
    if (out.size() > 4096) fail_at({}, "--bytes", "more than 4096 sizes");
  }
  return out;
}

// The smallest size nccl-tests counts one 4-byte element per rank in.
Bytes smallest_size(networks::CollectiveOp op, int gpus) {
  return Bytes(dlsim::count_is_share(op) ? 4.0 * gpus : 4.0);
}

void run_collective_cmd(const CollectiveOptions& opt) {
  const auto op = networks::parse_op(opt.op);
  if (!op) {
    std::vector<std::string> names;
    for (auto o : networks::all_ops()) names.push_back(networks::to_string(o));
    fail_at({}, "--op",
            fmt::format("unknown operation '{}'{}", opt.op, did_you_mean(opt.op, names)));
  }
  // Unknown names fail here, with hints.
  networks::collective_algorithms().at(opt.algo, {}, "--algo");
  if (opt.format != "table" && opt.format != "json" && opt.format != "csv") {
    fail_at({}, "--format", fmt::format("unknown format '{}' (table, json, csv)", opt.format));
  }
  const auto requested_sizes = parse_sizes(opt.bytes);
  hardware::check_reference(opt.cluster, "cluster", "--cluster");
  if (opt.library) hardware::check_reference(*opt.library, "library", "--library");
  const auto cluster = hardware::load_cluster(opt.cluster, opt.library);
  networks::PlacementRequest pr;
  pr.gpus = opt.gpus;
  pr.gpus_per_node = opt.gpus_per_node;
  pr.nodelist = opt.nodelist;
  const auto placement = networks::place(cluster, pr);
  // Dedicated servers take the next nodes of the cluster that hold no worker.
  if (opt.ps_placement != "colocated" && opt.ps_placement != "dedicated") {
    fail_at({}, "--ps-placement",
            fmt::format("unknown placement '{}' (colocated, dedicated)", opt.ps_placement));
  }
  if (opt.ps_device != "cpu" && opt.ps_device != "gpu") {
    fail_at({}, "--ps-device", fmt::format("unknown device '{}' (cpu, gpu)", opt.ps_device));
  }
  if (opt.ps_sharding != "split" && opt.ps_sharding != "round_robin" &&
      opt.ps_sharding != "greedy") {
    fail_at({}, "--ps-sharding",
            fmt::format("unknown sharding '{}' (split, round_robin, greedy)", opt.ps_sharding));
  }
  const auto given = [&](const char* flag) {
    return std::find(opt.given.begin(), opt.given.end(), flag) != opt.given.end();
  };
  // Flags that shape one algorithm or operation only, given for another, would be ignored.
  if (opt.algo != "ps") {
    for (const char* flag : {"--ps-servers", "--ps-placement", "--ps-device", "--ps-sharding"}) {
      if (given(flag)) {
        fail_at({}, flag, fmt::format("applies to --algo ps only, not '{}'", opt.algo));
      }
    }
  }
  if (given("--root") && *op != networks::CollectiveOp::kBroadcast &&
      *op != networks::CollectiveOp::kReduce) {
    fail_at({}, "--root",
            fmt::format("applies to broadcast and reduce only, not {}", networks::to_string(*op)));
  }
  const bool colocated = opt.ps_placement == "colocated";
  const bool dedicated = opt.algo == "ps" && !colocated;
  const auto job = networks::with_server_nodes(cluster, placement, dedicated ? opt.ps_servers : 0);
  const networks::Topology topo(cluster, job.nodes, opt.rails);
  const auto comm = networks::make_communicator(topo, placement, job.server_slots);
  networks::CollectiveRequest req;
  req.op = *op;
  req.root = opt.root;
  if (opt.root < 0 || opt.root >= opt.gpus) {
    fail_at({}, "--root", fmt::format("rank {} is not in 0..{}", opt.root, opt.gpus - 1));
  }
  req.ps.servers = opt.ps_servers;
  req.ps.colocated = colocated;
  req.ps.on_gpu = opt.ps_device == "gpu";
  req.ps.sharding = opt.ps_sharding;
  req.gpus_per_thread = opt.gpus_per_thread;
  if (opt.gpus_per_thread > 1 && opt.gpus % opt.gpus_per_thread != 0) {
    fail_at({}, "--gpus-per-thread",
            fmt::format("{} GPUs do not split into threads of {}", opt.gpus, opt.gpus_per_thread));
  }

  // A size that holds less than one 4-byte element per rank is no operation nccl-tests runs
  // (its count column would be 0): a range leaves it out and says so, a single size is refused.
  std::vector<Bytes> left_out;
  std::vector<Bytes> sizes;
  for (const auto& s : requested_sizes) {
    (dlsim::count_elements(*op, s.value(), opt.gpus) >= 1 ? sizes : left_out).push_back(s);
  }
  if (sizes.empty()) {
    fail_at({}, "--bytes",
            fmt::format("{} holds less than one 4-byte element per rank for {} on {} GPUs (sizes "
                        "are nccl-tests': the smallest here is {})",
                        format_bytes(left_out.back()), networks::to_string(*op), opt.gpus,
                        format_bytes(smallest_size(*op, opt.gpus))));
  }
  std::vector<networks::CollectiveResult> results;
  for (const auto& s : sizes) {
    req.size = s;
    results.push_back(networks::run_collective(req, comm, opt.algo));
    if (!(results.back().time.value() <= kMaxSeconds.value())) {
      fail_at({}, "--bytes",
              fmt::format("{} takes {:.3g} s here, past the {:g} s of any time dlsim reports",
                          format_bytes(s), results.back().time.value(), kMaxSeconds.value()));
    }
  }
  const bool reduces = *op == networks::CollectiveOp::kAllReduce ||
                       *op == networks::CollectiveOp::kReduce ||
                       *op == networks::CollectiveOp::kReduceScatter;
  const bool rooted =
      *op == networks::CollectiveOp::kBroadcast || *op == networks::CollectiveOp::kReduce;
  std::ostringstream o;
  if (opt.format == "json") {
    nlohmann::json j;
    j["op"] = opt.op;
    j["algorithm"] = opt.algo;
    j["ranks"] = opt.gpus;
    j["nodes"] = placement.nodes.size();
    j["cluster"] = cluster.about.name;
    j["library"] = cluster.library.about.name;
    j["busbw_factor"] = networks::busbw_factor(*op, opt.gpus);
    j["left_out_sizes_bytes"] = nlohmann::json::array();
    for (const auto& s : left_out) j["left_out_sizes_bytes"].push_back(s.value());
    j["results"] = nlohmann::json::array();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto& r = results[i];
      nlohmann::json phases = nlohmann::json::array();
      for (const auto& p : r.execution.phases) {
        phases.push_back({{"label", p.label},
                          {"steps", p.steps},
                          {"step_time_s", p.step_time.value()},
                          {"time_s", p.time.value()},
                          {"bottleneck", p.bottleneck}});
      }
      j["results"].push_back(
          {{"size_bytes", sizes[i].value()},
           {"count_elements", dlsim::count_elements(*op, sizes[i].value(), opt.gpus)},
           {"time_s", r.time.value()},
           {"algbw_bytes_per_s", r.algbw},
           {"busbw_bytes_per_s", r.busbw},
           {"algorithm", r.cost.algorithm},
           {"protocol", r.cost.protocol},
           {"channels", r.cost.channels},
           {"closed_form_time_s", r.cost.time.value()},
           {"closed_form", r.cost.formula},
           {"why", r.cost.why},
           {"steps", r.steps},
           {"phases", phases}});
    }
    j["context"] = {{"dlsim_version", kVersion},
                    {"command", "collective"},
                    {"inputs",
                     {{"op", opt.op},
                      {"algo", opt.algo},
                      {"bytes", opt.bytes},
                      {"gpus", opt.gpus},
                      {"gpus_per_node",
                       opt.gpus_per_node ? nlohmann::json(*opt.gpus_per_node) : nlohmann::json()},
                      {"nodelist", opt.nodelist},
                      {"cluster", opt.cluster},
                      {"library", opt.library ? nlohmann::json(*opt.library) : nlohmann::json()},
                      {"rails", opt.rails > 0 ? nlohmann::json(opt.rails) : nlohmann::json()},
                      {"root", opt.root},
                      {"gpus_per_thread", opt.gpus_per_thread},
                      {"ps_servers", opt.ps_servers},
                      {"ps_placement", opt.ps_placement},
                      {"ps_device", opt.ps_device},
                      {"ps_sharding", opt.ps_sharding}}}};
    o << json_text(j, 2) << "\n";
  } else if (opt.format == "csv") {
    o << "size_bytes,count_elements,time_us,algbw_GBps,busbw_GBps,algorithm,protocol,"
         "closed_form_us,channels,steps\n";
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto& r = results[i];
      o << fmt::format("{:.0f},{:.0f},{:.3f},{:.3f},{:.3f},{},{},{:.3f},{},{}\n", sizes[i].value(),
                       dlsim::count_elements(*op, sizes[i].value(), opt.gpus), r.time.value() * 1e6,
                       r.algbw / 1e9, r.busbw / 1e9, r.cost.algorithm, r.cost.protocol,
                       r.cost.time.value() * 1e6, r.cost.channels, r.steps);
    }
  } else {
    o << fmt::format(
        "# dlsim collective: {} with algorithm {} on {} GPUs ({} nodes) of cluster "
        "{}, library {}\n",
        opt.op, opt.algo, opt.gpus, placement.nodes.size(), cluster.about.name,
        cluster.library.about.name);
    o << fmt::format("# busbw = algbw x {:.4f} (nccl-tests); cost: {}\n#\n",
                     networks::busbw_factor(*op, opt.gpus), results.front().cost.formula);
    if (!left_out.empty()) {
      o << fmt::format(
          "# {} size(s) from {} to {} left out: less than one 4-byte element per rank (the "
          "smallest is {})\n#\n",
          left_out.size(), format_bytes(left_out.front()), format_bytes(left_out.back()),
          format_bytes(smallest_size(*op, opt.gpus)));
    }
    o << fmt::format(
        "# {:>12} {:>12} {:>6} {:>6} {:>5} {:>11} {:>8} {:>8}  {:<6} {:<6} {:>11} {:>3}\n", "size",
        "count", "type", "redop", "root", "time", "algbw", "busbw", "algo", "proto", "model", "ch");
    o << fmt::format(
        "# {:>12} {:>12} {:>6} {:>6} {:>5} {:>11} {:>8} {:>8}  {:<6} {:<6} {:>11} {:>3}\n", "(B)",
        "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "", "(us)", "");
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto& r = results[i];
      o << fmt::format(
          "  {:>12.0f} {:>12.0f} {:>6} {:>6} {:>5} {:>11.2f} {:>8.2f} {:>8.2f}  {:<6} {:<6} "
          "{:>11.2f} {:>3}\n",
          sizes[i].value(), dlsim::count_elements(*op, sizes[i].value(), opt.gpus), "float",
          reduces ? "sum" : "none", rooted ? std::to_string(opt.root) : "-1", r.time.value() * 1e6,
          r.algbw / 1e9, r.busbw / 1e9, r.cost.algorithm,
          r.cost.protocol.empty() ? "-" : r.cost.protocol, r.cost.time.value() * 1e6,
          r.cost.channels);
    }
    const auto& last = results.back();
    o << fmt::format("# at {}: {}\n", format_bytes(sizes.back()), last.cost.why);
    o << fmt::format("# where the time goes at {}:\n", format_bytes(sizes.back()));
    for (const auto& p : last.execution.phases) {
      o << fmt::format("#   {:<44} {:>6} steps x {:>10} = {:>10}   bound by {}\n", p.label, p.steps,
                       format_seconds(p.step_time), format_seconds(p.time),
                       p.bottleneck.empty() ? "latency" : p.bottleneck);
    }
  }
  write_output(opt.output, o.str(), file_references({opt.cluster, opt.library.value_or("")}));
}

}  // namespace

void add_hardware_commands(CLI::App& app) {
  auto* hw = app.add_subcommand("hardware", "List and inspect hardware profiles");
  hw->require_subcommand(1);
  auto kind = std::make_shared<std::string>();
  auto* list = hw->add_subcommand("list",
                                  "The built-in presets: GPUs, nodes, networks, "
                                  "libraries, clusters");
  list->add_option("--kind", *kind, "Only this kind: gpu, node, network, library, cluster")
      ->check(CLI::IsMember({"gpu", "node", "network", "library", "cluster"}));
  list->callback([kind] { run_list(*kind); });

  auto opt = std::make_shared<ShowOptions>();
  auto* show = hw->add_subcommand("show", "A profile resolved after extends:, with units");
  show->add_option("profile", opt->name, "Preset name or YAML file")->required();
  show->add_option("--kind", opt->kind,
                   "gpu, node, network, library or cluster (for a name "
                   "used by several kinds)");
  show->add_option("--format", opt->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  show->add_option("-o,--output", opt->output, "Write to this file");
  show->callback([opt] { run_show(*opt); });
}

void add_collective_command(CLI::App& app) {
  auto opt = std::make_shared<CollectiveOptions>();
  auto* c = app.add_subcommand(
      "collective", "Time, algbw and busbw of one collective on a cluster, like nccl-tests");
  c->add_option("--op", opt->op,
                "allreduce, allgather, reducescatter, broadcast, reduce or alltoall")
      ->capture_default_str();
  c->add_option("--algo", opt->algo,
                "auto (the library's own choice), ring, tree, nvls, hd, hierarchical or ps")
      ->capture_default_str();
  c->add_option("--bytes", opt->bytes, "SIZE, or MIN:MAX[:xF] (sizes multiplied by F, default 2)")
      ->capture_default_str();
  c->add_option("--gpus", opt->gpus, "Ranks (one per GPU)")
      ->required()
      ->check(CLI::Range(1, kMaxRanks));
  c->add_option("--gpus-per-node", opt->gpus_per_node, "GPUs used per node (default: all)")
      ->check(CLI::Range(1, kMaxGpusPerNode));
  c->add_option("--nodelist", opt->nodelist, "Slurm host list of the nodes to use");
  c->add_option("--cluster", opt->cluster, "Cluster preset or YAML file")->capture_default_str();
  c->add_option("--library", opt->library,
                "Collective library preset or YAML file instead of the cluster's (nccl, "
                "nccl-2.3, nccl-1, mpi)");
  c->add_option("--rails", opt->rails,
                "NICs per node the job uses, the first ones (as NCCL_IB_HCA; default: all)")
      ->check(CLI::Range(1, kMaxGpusPerNode));
  c->add_option("--root", opt->root, "Root rank of broadcast and reduce")->capture_default_str();
  c->add_option("--gpus-per-thread", opt->gpus_per_thread,
                "GPUs one host thread drives, as nccl-tests -g (their kernel launches add up)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxGpusPerNode));
  c->add_option("--ps-servers", opt->ps_servers, "Parameter servers (algo ps)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRanks));
  c->add_option("--ps-placement", opt->ps_placement,
                "dedicated (nodes without workers) or colocated (on the workers' nodes)")
      ->capture_default_str();
  c->add_option("--ps-device", opt->ps_device, "Servers sum on the cpu or a gpu")
      ->capture_default_str();
  c->add_option("--ps-sharding", opt->ps_sharding, "split, round_robin or greedy")
      ->capture_default_str();
  c->add_option("--format", opt->format, "table, json or csv")->capture_default_str();
  c->add_option("-o,--output", opt->output, "Write to this file");
  c->callback([opt, c] {
    for (const char* flag :
         {"--ps-servers", "--ps-placement", "--ps-device", "--ps-sharding", "--root"}) {
      if (c->count(flag) > 0) opt->given.emplace_back(flag);
    }
    naming_flags({{"algorithm", "--algo"}}, [&] { run_collective_cmd(*opt); });
  });
}

}  // namespace dlsim::cli
