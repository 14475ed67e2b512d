#include "hardware/render.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <vector>

namespace dlsim::hardware {
namespace {

using json = nlohmann::json;

// Builds the JSON tree and the text listing together, so both always show the same fields.
class Printer {
 public:
  void text(const std::string& key, const std::string& value) {
    line(key, value);
    top()[key] = value;
  }
  void count(const std::string& key, double value) {
    line(key, fmt::format("{:g}", value));
    top()[key] = value;
  }
  // A quantity: JSON key `key_<unit>` holds the number in base units; the text shows `shown`.
  void quantity(const std::string& key, const std::string& unit, double value,
                const std::string& shown) {
    line(key, shown);
    top()[key + "_" + unit] = value;
  }
  void bytes(const std::string& key, Bytes b) {
    quantity(key, "bytes", b.value(), format_bytes(b));
  }
  void seconds(const std::string& key, Seconds s) {
    quantity(key, "s", s.value(), format_seconds(s));
  }
  void bandwidth(const std::string& key, Bandwidth b) {
    quantity(key, "bytes_per_s", b.value(), format_bandwidth(b));
  }
  void begin(const std::string& key) {
    line(key, "");
    stack_.push_back(&top()[key]);
    *stack_.back() = json::object();
  }
  void begin_item() {
    out_ += fmt::format("{:{}}-\n", "", 2 * (stack_.size() - 1));
    top().push_back(json::object());
    stack_.push_back(&top().back());
  }
  void begin_list(const std::string& key) {
    line(key, "");
    stack_.push_back(&top()[key]);
    *stack_.back() = json::array();
  }
  void end() { stack_.pop_back(); }

  json& root() { return root_; }
  const std::string& str() const { return out_; }

 private:
  json& top() { return *stack_.back(); }
  void line(const std::string& key, const std::string& value) {
    out_ += fmt::format("{:{}}{}:{}{}\n", "", 2 * (stack_.size() - 1), key,
                        value.empty() ? "" : " ", value);
  }
  json root_ = json::object();
  std::vector<json*> stack_{&root_};
  std::string out_;
};

void about(Printer& p, const std::string& kind, const Provenance& a) {
  p.text("kind", kind);
  p.text("name", a.name);
  p.text("description", a.description);
  p.text("source", a.source);
  if (!a.file.empty()) p.text("file", a.file);
}

void link(Printer& p, const std::string& key, const LinkType& t) {
  p.begin(key);
  p.bandwidth("bandwidth", t.bandwidth);
  p.seconds("latency", t.latency);
  p.end();
}

void curve(Printer& p, const std::string& key, const EfficiencyCurve& c, bool in_bytes) {
  p.begin(key);
  p.count("max", c.max);
  if (in_bytes) {
    p.bytes("half", Bytes(c.half));
  } else {
    p.quantity("half", "flop", c.half, format_flops(Flops(c.half)));
  }
  p.end();
}

void print(Printer& p, const GpuSpec& g) {
  about(p, "gpu", g.about);
  p.begin("peak");
  for (const char* k : {"fp64", "fp32", "tf32", "fp16", "bf16"}) {
    if (g.peak.count(k)) {
      p.quantity(k, "flop_per_s", g.peak.at(k).value(), format_flop_rate(g.peak.at(k)));
    }
  }
  p.end();
  p.begin("memory");
  p.bytes("capacity", g.memory_capacity);
  p.bandwidth("bandwidth", g.memory_bandwidth);
  p.end();
  p.begin("efficiency");
  p.text("source", g.efficiency_source);
  curve(p, "gemm", g.gemm, false);
  curve(p, "conv", g.conv, false);
  curve(p, "memory", g.memory, true);
  p.end();
  p.seconds("kernel_launch", g.kernel_launch);
  p.count("step_jitter", g.step_jitter);
  if (g.speed_spread > 0) p.count("speed_spread", g.speed_spread);
  if (g.compute_capability > 0) p.count("compute_capability", g.compute_capability);
  if (g.sm_count > 0) p.count("sm_count", g.sm_count);
  if (!g.kernels.empty() || g.threads != 1) p.count("threads", g.threads);
  if (!g.kernels.empty() || !g.updates.empty()) {
    // The tables in summary: every entry is in the profile file.
    p.begin("layers");
    p.text("source", g.kernels_source);
    p.count("entries", static_cast<double>(g.kernels.size()));
    p.count("updates", static_cast<double>(g.updates.size()));
    p.end();
  }
}

void print(Printer& p, const NodeSpec& n) {
  about(p, "node", n.about);
  p.begin("gpu");
  print(p, n.gpu);
  p.end();
  p.count("gpus", n.gpus);
  p.begin("host");
  p.text("cpu", n.host.cpu);
  p.text("vendor", n.host.vendor);
  if (!n.host.generation.empty()) p.text("generation", n.host.generation);
  p.count("sockets", n.host.sockets);
  p.count("cores", n.host.cores);
  p.bytes("memory", n.host.memory);
  p.bandwidth("memory_bandwidth", n.host.memory_bandwidth);
  if (n.host.shm_bandwidth) p.bandwidth("shm_bandwidth", *n.host.shm_bandwidth);
  p.end();
  p.count("nics", n.nics);
  p.begin("link_types");
  for (const auto& [name, t] : n.link_types) link(p, name, t);
  p.end();
  std::string switches;
  for (const auto& s : n.switches) switches += (switches.empty() ? "" : ", ") + s;
  p.text("switches", "[" + switches + "]");
  p.begin_list("links");
  for (const auto& l : n.links) {
    p.begin_item();
    p.text("a", l.a);
    p.text("b", l.b);
    p.text("type", l.type);
    p.count("lanes", l.lanes);
    p.bandwidth("bandwidth", n.link_types.at(l.type).bandwidth * l.lanes);
    p.end();
  }
  p.end();
}

void print(Printer& p, const NetworkSpec& n) {
  about(p, "network", n.about);
  link(p, "port", n.port);
  p.seconds("switch_latency", n.switch_latency);
  p.begin("transport");
  p.text("kind", n.transport.kind);
  p.count("efficiency", n.transport.efficiency);
  p.seconds("message_overhead", n.transport.message_overhead);
  if (n.transport.stream_bandwidth) p.bandwidth("stream_bandwidth", *n.transport.stream_bandwidth);
  p.end();
  p.begin("topology");
  const auto& t = n.topology;
  p.text("kind", t.kind);
  if (t.kind == "fat_tree") {
    p.count("nodes_per_leaf", t.nodes_per_leaf);
    p.count("oversubscription", t.oversubscription);
  } else if (t.kind == "dragonfly") {
    p.count("nodes_per_group", t.nodes_per_group);
    p.bandwidth("global_bandwidth", t.global_bandwidth);
    p.seconds("global_latency", t.global_latency);
  } else if (t.kind == "cloud" && t.per_flow_cap) {
    p.bandwidth("per_flow_cap", *t.per_flow_cap);
  }
  p.end();
}

void per_algorithm(Printer& p, const char* key, const std::map<std::string, PerProtocol>& m) {
  p.begin(key);
  for (const auto& [algo, v] : m) {
    p.begin(algo.c_str());
    p.seconds("LL", v[0]);
    p.seconds("LL128", v[1]);
    p.seconds("Simple", v[2]);
    p.end();
  }
  p.end();
}

void per_generation(Printer& p, const char* key, const std::map<std::string, PerNodeCount>& m) {
  p.begin(key);
  for (const auto& [gen, v] : m) {
    p.begin(gen.c_str());
    p.bandwidth("one_node", v[0]);
    p.bandwidth("two_nodes", v[1]);
    p.bandwidth("more_nodes", v[2]);
    p.end();
  }
  p.end();
}

void print(Printer& p, const LibrarySpec& l) {
  about(p, "library", l.about);
  p.text("family", l.family);
  p.begin("link_efficiency");
  p.count("nvlink", l.nvlink_efficiency);
  p.count("pcie", l.pcie_efficiency);
  p.end();
  if (!l.nccl()) {
    p.bytes("segment", l.segment);
    return;
  }
  const auto& t = l.tuner;
  p.text("version", t.version);
  p.text("algorithms", fmt::format("{}", fmt::join(t.algorithms, ", ")));
  p.count("max_channels", l.max_channels);
  p.begin_list("protocols");
  for (const auto& s : l.protocols) {
    p.begin_item();
    p.text("name", s.name);
    p.bytes("chunk", s.chunk);
    p.bytes("thread_threshold", s.thread_threshold);
    p.count("max_threads", s.max_threads);
    p.end();
  }
  p.end();
  p.begin("latency");
  per_algorithm(p, "base", t.base_latency);
  for (const auto& [cls, name] :
       {std::pair{PathClass::kNvlink, "nvlink"}, std::pair{PathClass::kPcie, "pcie"},
        std::pair{PathClass::kNetwork, "network"}}) {
    const auto it = t.step_latency.find(cls);
    if (it != t.step_latency.end()) per_algorithm(p, name, it->second);
  }
  if (t.network_overhead_simple_factor > 1) {
    p.begin("network_overhead");
    p.seconds("intel", t.network_overhead_intel);
    p.seconds("amd", t.network_overhead_amd);
    p.count("simple_factor", t.network_overhead_simple_factor);
    p.end();
  }
  p.end();
  p.begin("bandwidth");
  p.count("ring_ll", t.ring_ll);
  p.count("ring_ll128", t.ring_ll128);
  p.count("ring_ll128_one_gpu", t.ring_ll128_one_gpu);
  p.count("tree", t.tree);
  p.count("tree_ll", t.tree_ll);
  p.count("tree_ll128_one_node", t.tree_ll128_one_node);
  p.count("tree_ll128_nodes", t.tree_ll128_nodes);
  per_generation(p, "ll_max", t.ll_max);
  per_generation(p, "ring_ll128_per_channel", t.ring_ll128_per_channel);
  per_generation(p, "tree_ll128_per_channel", t.tree_ll128_per_channel);
  per_generation(p, "tree_per_channel", t.tree_per_channel);
  if (t.plateau_bytes.value() > 0) {
    p.begin("plateau");
    p.bytes("bytes", t.plateau_bytes);
    p.count("factor", t.plateau_factor);
    p.count("factor_pre_ampere", t.plateau_factor_pre_ampere);
    p.end();
  }
  if (std::find(t.algorithms.begin(), t.algorithms.end(), "nvls") != t.algorithms.end()) {
    p.begin("nvls");
    p.count("algbw_ratio", t.nvls_ratio);
    p.count("channels", t.nvls_channels);
    p.end();
  }
  p.end();
  p.begin("ll128");
  p.text("compute_capabilities", fmt::format("{}", fmt::join(t.ll128_compute_capabilities, ", ")));
  p.text("network_path", t.ll128_network_path);
  p.text("network_path_hopper", t.ll128_network_path_hopper);
  p.end();
  p.begin("search");
  p.bandwidth("highest_intra", t.speeds_intra.front());
  p.bandwidth("highest_inter", t.speeds_inter.front());
  p.bandwidth("duplicate_from", t.duplicate_from);
  p.count("runtime_factor", t.runtime_factor);
  if (t.rank_order_ring) p.text("rings", "one, in rank order");
  if (t.pxn) p.text("pxn", "a GPU sends through the NIC's own GPU over NVLink (PXN)");
  p.end();
}

void print(Printer& p, const ClusterSpec& c) {
  about(p, "cluster", c.about);
  p.count("nodes", c.node_count());
  p.count("gpus", c.gpu_count());
  p.begin_list("groups");
  for (const auto& g : c.groups) {
    p.begin_item();
    p.count("count", g.count);
    p.text("hostnames", g.hostnames.size() <= 2 ? fmt::format("{}", fmt::join(g.hostnames, ","))
                                                : g.hostnames.front() + ".." + g.hostnames.back());
    p.begin("node");
    print(p, g.node);
    p.end();
    p.end();
  }
  p.end();
  p.begin("network");
  print(p, c.network);
  p.end();
  p.begin("library");
  print(p, c.library);
  p.end();
}

Printer render(const AnySpec& spec) {
  Printer p;
  std::visit([&](const auto& s) { print(p, s); }, spec);
  return p;
}

}  // namespace

nlohmann::json to_json(const AnySpec& spec) { return render(spec).root(); }
std::string to_text(const AnySpec& spec) { return render(spec).str(); }

}  // namespace dlsim::hardware
