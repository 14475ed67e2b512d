#include "hardware/loader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/config.hpp"
#include "common/hostlist.hpp"
#include "common/json_text.hpp"

namespace dlsim::hardware {
namespace {

namespace fs = std::filesystem;

// ---- values with units ---------------------------------------------------------------------

template <class Q, class Parse>
Q quantity(const ConfigNode& n, Parse parse) {
  try {
    return parse(n.as<std::string>());
  } catch (const std::invalid_argument& e) {
    n.fail(e.what());
  }
}
// Zero is a value for durations (a latency, an overhead); a bandwidth, a compute rate or a
// capacity of zero describes nothing that runs.
template <class Q>
Q positive(const ConfigNode& n, Q q) {
  if (!(q.value() > 0)) n.fail(fmt::format("must be positive, got '{}'", n.as<std::string>()));
  return q;
}
Bytes bytes(const ConfigNode& n) { return quantity<Bytes>(n, parse_bytes); }
Bytes capacity(const ConfigNode& n) { return positive(n, bytes(n)); }
Seconds seconds(const ConfigNode& n) { return quantity<Seconds>(n, parse_seconds); }
Bandwidth bandwidth(const ConfigNode& n) {
  return positive(n, quantity<Bandwidth>(n, parse_bandwidth));
}
FlopRate flop_rate(const ConfigNode& n) {
  return positive(n, quantity<FlopRate>(n, parse_flop_rate));
}
Flops flops(const ConfigNode& n) {
  try {
    return parse_flops(n.as<std::string>());
  } catch (const std::invalid_argument& e) {
    n.fail(e.what());
  }
}

double fraction(const ConfigNode& n) {
  const double v = n.as<double>();
  if (!(v > 0 && v <= 1)) n.fail(fmt::format("must be a fraction in (0, 1], got {}", v));
  return v;
}
int positive_int(const ConfigNode& n) {
  const int v = n.as<int>();
  if (v < 1) n.fail(fmt::format("must be a positive integer, got {}", v));
  return v;
}
int non_negative_int(const ConfigNode& n) {
  const int v = n.as<int>();
  if (v < 0) n.fail(fmt::format("must not be negative, got {}", v));
  return v;
}
// A count of things in one node (GPUs, NICs, a link's lanes): 1..kMaxPerNode (0 allowed where
// `zero` is).
int per_node_count(const ConfigNode& n, bool zero = false) {
  const int v = zero ? non_negative_int(n) : positive_int(n);
  if (v > kMaxPerNode) n.fail(fmt::format("must be at most {}, got {}", kMaxPerNode, v));
  return v;
}
// A count of nodes: 1..kMaxNodes.
int node_count(const ConfigNode& n) {
  const int v = positive_int(n);
  if (v > kMaxNodes) n.fail(fmt::format("must be at most {} nodes, got {}", kMaxNodes, v));
  return v;
}

// Reads `key` into `out` when present; without it, keeps the inherited value, or reports the
// key missing when nothing was inherited.
template <class Read>
void section(const ConfigNode& n, std::string_view key, bool inherited, Read read) {
  if (n.has(key)) {
    read(n.child(key));
  } else if (!inherited) {
    n.child(key);  // throws: missing key
  }
}
template <class T, class Parse>
void field(const ConfigNode& n, std::string_view key, T& out, bool inherited, Parse parse) {
  section(n, key, inherited, [&](const ConfigNode& c) { out = parse(c); });
}
std::string text(const ConfigNode& n) { return n.as<std::string>(); }

// ---- references: preset names, files, inline mappings ---------------------------------------

const char* folder_of(std::string_view kind) {
  if (kind == "gpu") return "gpus";
  if (kind == "node") return "nodes";
  if (kind == "network") return "networks";
  if (kind == "library") return "libraries";
  return "clusters";
}

bool is_path(const std::string& s) {
  return s.ends_with(".yaml") || s.ends_with(".yml") || s.find('/') != std::string::npos;
}

struct Opened {
  ConfigNode node;
  std::string dir;   // for relative `extends:` and references
  std::string stem;  // the file's stem, which `name:` must equal
};

std::vector<std::string> preset_names(std::string_view kind) {
  std::vector<std::string> out;
  const std::string prefix = std::string(folder_of(kind)) + "/";
  for (const auto& p : presets()) {
    if (p.name.starts_with(prefix)) out.push_back(p.name.substr(prefix.size()));
  }
  return out;
}

Opened open(const std::string& ref, std::string_view kind, const std::string& dir,
            const SourceLocation& where) {
  if (is_path(ref)) {
    fs::path p(ref);
    if (p.is_relative() && !dir.empty()) p = fs::path(dir) / p;
    // One file, one name: "./a.yaml" from a.yaml's own folder is a.yaml again (a cycle).
    p = p.lexically_normal();
    if (std::error_code ec; !fs::exists(p, ec))
      fail_at(where, "", fmt::format("{} file '{}' not found", kind, p.string()));
    return {ConfigNode::load_file(p.string()), p.parent_path().string(), p.stem().string()};
  }
  const std::string key = std::string(folder_of(kind)) + "/" + ref;
  for (const auto& p : presets()) {
    if (p.name == key) return {ConfigNode::load_string(p.text, p.path), "", ref};
  }
  fail_at(
      where, "",
      fmt::format("unknown {} preset '{}'{}", kind, ref, did_you_mean(ref, preset_names(kind))));
}

// Reads the common header; `base` (from `extends:`) supplies what the file leaves out.
void read_about(const ConfigNode& n, std::string_view kind, const std::string& stem,
                Provenance& about, bool inherited, const std::string& file) {
  if (n.has("kind") || !stem.empty()) {
    const auto k = n.get<std::string>("kind");
    if (k != kind) {
      n.child("kind").fail(fmt::format("expected a {} profile here, found kind '{}'", kind, k));
    }
  }
  field(n, "name", about.name, inherited && stem.empty(), text);
  if (!stem.empty() && about.name != stem) {
    n.child("name").fail(fmt::format("'{}' must equal the file name '{}'", about.name, stem));
  }
  field(n, "description", about.description, inherited, text);
  field(n, "source", about.source, inherited, text);
  about.file = file;
}

// Each loader reads one mapping; `chain` holds the files being extended, to refuse cycles.
struct Context {
  std::string dir;
  std::vector<std::string> chain;
};

template <class Spec>
using Parser = Spec (*)(const ConfigNode&, const std::string& stem, Context&);

template <class Spec>
Spec resolve(const ConfigNode& ref, std::string_view kind, Context& ctx, Parser<Spec> parse);

template <class Spec>
Spec load_file_or_preset(const std::string& ref, std::string_view kind, Context& ctx,
                         const SourceLocation& where, Parser<Spec> parse) {
  auto opened = open(ref, kind, ctx.dir, where);
  const std::string id = opened.node.file();
  if (std::find(ctx.chain.begin(), ctx.chain.end(), id) != ctx.chain.end()) {
    std::string cycle;
    for (const auto& c : ctx.chain) cycle += c + " -> ";
    fail_at(where, "extends", "cycle: " + cycle + id);
  }
  if (!opened.node.is_map()) opened.node.fail(fmt::format("a {} profile must be a mapping", kind));
  Context inner{opened.dir, ctx.chain};
  inner.chain.push_back(id);
  return parse(opened.node, opened.stem, inner);
}

template <class Spec>
Spec resolve(const ConfigNode& ref, std::string_view kind, Context& ctx, Parser<Spec> parse) {
  if (ref.is_map()) {
    Context inner = ctx;
    return parse(ref, "", inner);
  }
  return load_file_or_preset<Spec>(ref.as<std::string>(), kind, ctx, ref.where(), parse);
}

template <class Spec>
bool take_base(const ConfigNode& n, std::string_view kind, Context& ctx, Parser<Spec> parse,
               Spec& out) {
  if (!n.has("extends")) return false;
  const auto ext = n.child("extends");
  if (!ext.is_scalar()) ext.fail("must name a preset or a file");
  out = load_file_or_preset<Spec>(ext.as<std::string>(), kind, ctx, ext.where(), parse);
  return true;
}

// ---- gpu ------------------------------------------------------------------------------------

EfficiencyCurve curve(const ConfigNode& n, bool work_in_bytes) {
  EfficiencyCurve c;
  c.max = fraction(n.child("max"));
  c.half = work_in_bytes ? bytes(n.child("half")).value() : flops(n.child("half")).value();
  if (c.half <= 0) n.child("half").fail("must be positive");
  n.finish();
  return c;
}

// What is wrong with a layer table's training precision `p` on `g`, nothing where it is one
// of the precisions and the GPU has arithmetic for it (docs/hardware-format.md, `layers`).
std::optional<std::string> table_precision_problem(const std::string& p, const GpuSpec& g) {
  if (!parse_training_precision(p)) {
    return fmt::format("must be one of {}, got '{}'", training_precision_names(), p);
  }
  // Measured in a precision this GPU has no units for: the table is another GPU's.
  const std::string units = p == "amp" ? "fp16" : p;
  if (p != "fp32" && !g.peak.count(units)) {
    return fmt::format(
        "'{}' needs {} arithmetic, and {} has none (no `{}` peak): a table measured on another "
        "GPU?",
        p, units, g.about.name.empty() ? std::string("this GPU") : g.about.name, units);
  }
  return std::nullopt;
}

// A layer table written by dlcalibrate fit (kind dlsim-layer-table, format_version 1): entries
// {layer, batch, threads, precision, forward_s, backward_s[, forward_host_s, backward_host_s]}
// and updates {elements, tensors, threads, precision, time_s}, times in s. Every problem is an
// InputError naming the file, the entry and the field.
void read_layer_table(const std::string& path, GpuSpec& g) {
  refuse_non_file(path);
  std::ifstream in(path);
  if (!in) fail_at({path}, "", "cannot be read (layers.file of the profile)");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  std::string twice;
  try {
    j = parse_json_checking_keys(text.str(), twice);
  } catch (const nlohmann::json::exception& e) {
    fail_at({path}, "", fmt::format("is not JSON: {}", json_problem(e)));
  }
  if (!twice.empty()) fail_at({path}, twice, "given twice in one object");
  if (!j.is_object() || j.value("kind", "") != "dlsim-layer-table") {
    fail_at({path}, "kind", "must be dlsim-layer-table");
  }
  if (j.value("format_version", 0) != 1) fail_at({path}, "format_version", "must be 1");
  const auto field = [&](const nlohmann::json& e, const std::string& where, const char* key) {
    if (!e.contains(key)) fail_at({path}, where, fmt::format("missing required key '{}'", key));
    return e.at(key);
  };
  const auto time = [&](const nlohmann::json& e, const std::string& where, const char* key) {
    const auto v = field(e, where, key);
    if (!v.is_number() || !(v.get<double>() > 0) || !(v.get<double>() < 1e6)) {
      fail_at({path}, where + "." + key,
              fmt::format("must be a positive time in s below 1e6, got {}", v.dump()));
    }
    return Seconds(v.get<double>());
  };
  const auto integer = [&](const nlohmann::json& e, const std::string& where, const char* key,
                           std::int64_t lo, std::int64_t hi) {
    const auto v = field(e, where, key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
      fail_at({path}, where + "." + key,
              fmt::format("must be an integer in {}..{}, got {}", lo, hi, v.dump()));
    }
    return v.get<std::int64_t>();
  };
  const auto string = [&](const nlohmann::json& e, const std::string& where, const char* key) {
    const auto v = field(e, where, key);
    if (!v.is_string()) fail_at({path}, where + "." + key, "must be a string");
    return v.get<std::string>();
  };
  const auto known = [&](const nlohmann::json& e, const std::string& where,
                         const std::vector<std::string>& keys) {
    if (!e.is_object()) fail_at({path}, where, "must be an object");
    for (const auto& [k, v] : e.items()) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
        fail_at({path}, where + "." + k, "unknown key");
      }
    }
  };
  if (!j.contains("entries") || !j.at("entries").is_array()) {
    fail_at({path}, "entries", "must be a list");
  }
  const auto& entries = j.at("entries");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const auto where = fmt::format("entries[{}]", i);
    known(e, where,
          {"layer", "batch", "threads", "precision", "forward_s", "backward_s", "forward_host_s",
           "backward_host_s"});
    KernelEntry k;
    k.layer = string(e, where, "layer");
    k.batch = integer(e, where, "batch", 1, std::int64_t{1} << 24);
    k.threads = static_cast<int>(integer(e, where, "threads", 1, 4096));
    k.precision = e.contains("precision") ? string(e, where, "precision") : "fp32";
    if (const auto bad = table_precision_problem(k.precision, g)) {
      fail_at({path}, where + ".precision", *bad);
    }
    k.forward = time(e, where, "forward_s");
    k.backward = time(e, where, "backward_s");
    if (e.contains("forward_host_s") || e.contains("backward_host_s")) {
      k.forward_host = time(e, where, "forward_host_s");
      k.backward_host = time(e, where, "backward_host_s");
    }
    g.kernels.push_back(std::move(k));
  }
  if (j.contains("updates")) {
    const auto& updates = j.at("updates");
    if (!updates.is_array()) fail_at({path}, "updates", "must be a list");
    for (std::size_t i = 0; i < updates.size(); ++i) {
      const auto& e = updates[i];
      const auto where = fmt::format("updates[{}]", i);
      known(e, where, {"elements", "tensors", "threads", "precision", "time_s"});
      UpdateEntry u;
      u.elements = integer(e, where, "elements", 1, std::int64_t{1} << 50);
      u.tensors = integer(e, where, "tensors", 1, u.elements);
      u.threads = static_cast<int>(integer(e, where, "threads", 1, 4096));
      u.precision = e.contains("precision") ? string(e, where, "precision") : "fp32";
      if (const auto bad = table_precision_problem(u.precision, g)) {
        fail_at({path}, where + ".precision", *bad);
      }
      u.time = time(e, where, "time_s");
      g.updates.push_back(u);
    }
  }
  for (const auto& [k, v] : j.items()) {
    if (k != "kind" && k != "format_version" && k != "entries" && k != "updates" && k != "source") {
      fail_at({path}, k, "unknown key");
    }
  }
}

GpuSpec parse_gpu(const ConfigNode& n, const std::string& stem, Context& ctx) {
  GpuSpec g;
  const bool inherited = take_base<GpuSpec>(n, "gpu", ctx, parse_gpu, g);
  read_about(n, "gpu", stem, g.about, inherited, n.file());
  section(n, "peak", inherited, [&](const ConfigNode& peak) {
    static const std::vector<std::string> kPrecisions = {"fp64", "fp32", "tf32", "fp16", "bf16"};
    for (const auto& p : kPrecisions) {
      if (peak.has(p)) g.peak[p] = flop_rate(peak.child(p));
    }
    peak.finish(kPrecisions);
  });
  if (!g.peak.count("fp32")) n.child("peak").child("fp32");  // required
  section(n, "memory", inherited, [&](const ConfigNode& m) {
    field(m, "capacity", g.memory_capacity, inherited, capacity);
    field(m, "bandwidth", g.memory_bandwidth, inherited, bandwidth);
    m.finish();
  });
  section(n, "efficiency", inherited, [&](const ConfigNode& e) {
    field(e, "source", g.efficiency_source, inherited, text);
    field(e, "gemm", g.gemm, inherited, [](const ConfigNode& c) { return curve(c, false); });
    field(e, "conv", g.conv, inherited, [](const ConfigNode& c) { return curve(c, false); });
    field(e, "memory", g.memory, inherited, [](const ConfigNode& c) { return curve(c, true); });
    e.finish();
  });
  field(n, "kernel_launch", g.kernel_launch, inherited, seconds);
  if (n.has("compute_capability")) {
    const auto c = n.child("compute_capability");
    g.compute_capability = c.as<int>();
    if (g.compute_capability < 10 || g.compute_capability > 200) {
      c.fail(fmt::format("must be the CUDA compute capability x 10 (70 for V100), got {}",
                         g.compute_capability));
    }
  }
  if (n.has("sm_count")) {
    const auto c = n.child("sm_count");
    const auto v = c.as<std::int64_t>();
    if (v < 1 || v > 1024) c.fail(fmt::format("must be an SM count in 1..1024, got {}", v));
    g.sm_count = static_cast<int>(v);
  }
  const auto coefficient = [](const ConfigNode& c) {
    const double v = c.as<double>();
    if (!(v >= 0 && v <= 0.5)) c.fail(fmt::format("must be in [0, 0.5], got {}", v));
    return v;
  };
  field(n, "step_jitter", g.step_jitter, inherited, coefficient);
  if (n.has("speed_spread")) g.speed_spread = coefficient(n.child("speed_spread"));
  const auto thread_count = [](const ConfigNode& c) {
    const auto v = c.as<std::int64_t>();
    if (v < 1 || v > 4096) c.fail(fmt::format("must be a thread count in 1..4096, got {}", v));
    return static_cast<int>(v);
  };
  const auto positive_time = [](const ConfigNode& c) {
    const Seconds t = seconds(c);
    if (!(t.value() > 0)) c.fail("must be a positive time");
    return t;
  };
  if (n.has("threads")) g.threads = thread_count(n.child("threads"));
  // The training precision a layer-table entry was measured in (absent: fp32).
  const auto table_precision = [&](const auto& e) -> std::string {
    if (!e.has("precision")) return "fp32";
    const auto c = e.child("precision");
    const auto p = text(c);
    if (const auto bad = table_precision_problem(p, g)) c.fail(*bad);
    return p;
  };
  if (n.has("layers")) {
    const auto t = n.child("layers");
    if (!t.is_map()) t.fail("must be a mapping with source and entries");
    g.kernels_source = text(t.child("source"));
    g.kernels.clear();
    g.updates.clear();
    if (t.has("file")) {
      // The table in a JSON file beside the profile (what dlcalibrate fit writes): the same
      // entries, parsed in a few ms where YAML takes a hundred for a thousand entries.
      const auto f = t.child("file");
      const fs::path rel = text(f);
      const fs::path path = rel.is_absolute() ? rel : fs::path(n.file()).parent_path() / rel;
      try {
        read_layer_table(path.string(), g);
      } catch (const InputError&) {
        throw;
      } catch (const std::exception& e) {
        f.fail(e.what());
      }
      if (t.has("entries")) t.child("entries").fail("give entries or file, not both");
      t.finish();
    }
    if (!t.has("file")) {
      for (const auto& e : t.child("entries").elements()) {
        KernelEntry k;
        k.layer = text(e.child("layer"));
        const auto b = e.child("batch").as<std::int64_t>();
        if (b < 1 || b > (std::int64_t{1} << 24)) e.child("batch").fail("must be in 1..2^24");
        k.batch = b;
        k.threads = thread_count(e.child("threads"));
        k.precision = table_precision(e);
        k.forward = positive_time(e.child("forward"));
        k.backward = positive_time(e.child("backward"));
        if (e.has("forward_host") || e.has("backward_host")) {
          k.forward_host = positive_time(e.child("forward_host"));
          k.backward_host = positive_time(e.child("backward_host"));
        }
        e.finish();
        g.kernels.push_back(std::move(k));
      }
      if (t.has("updates")) {
        for (const auto& e : t.child("updates").elements()) {
          UpdateEntry u;
          u.elements = e.child("elements").as<std::int64_t>();
          u.tensors = e.child("tensors").as<std::int64_t>();
          if (u.elements < 1) e.child("elements").fail("must be at least 1");
          if (u.tensors < 1 || u.tensors > u.elements) {
            e.child("tensors").fail("must be in 1..elements");
          }
          u.threads = thread_count(e.child("threads"));
          u.precision = table_precision(e);
          u.time = positive_time(e.child("time"));
          e.finish();
          g.updates.push_back(u);
        }
      }
      t.finish();
    }
  }
  n.finish();
  return g;
}

// ---- node -----------------------------------------------------------------------------------

std::vector<FabricLink> parse_links(const ConfigNode& n, const NodeSpec& node) {
  std::set<std::string> vertices;
  for (int i = 0; i < node.gpus; ++i) vertices.insert(fmt::format("gpu{}", i));
  for (int i = 0; i < node.host.sockets; ++i) vertices.insert(fmt::format("cpu{}", i));
  for (int i = 0; i < node.nics; ++i) vertices.insert(fmt::format("nic{}", i));
  for (const auto& s : node.switches) vertices.insert(s);
  const std::vector<std::string> known(vertices.begin(), vertices.end());
  std::vector<std::string> types;
  for (const auto& [t, _] : node.link_types) types.push_back(t);

  std::vector<FabricLink> links;
  std::set<std::pair<std::string, std::string>> linked;  // each pair of ends, in name order
  for (const auto& e : n.elements()) {
    const auto parts = e.elements();
    if (parts.size() < 3 || parts.size() > 4) {
      e.fail("a link is [a, b, type] or [a, b, type, lanes]");
    }
    FabricLink base;
    base.where = e.where();
    base.type = parts[2].as<std::string>();
    if (!node.link_types.count(base.type)) {
      parts[2].fail(
          fmt::format("unknown link type '{}'{}", base.type, did_you_mean(base.type, types)));
    }
    base.lanes = parts.size() == 4 ? per_node_count(parts[3]) : 1;
    if (node.link_types.at(base.type).bandwidth * base.lanes > kMaxBandwidth) {
      e.fail(fmt::format("{} lanes of '{}' carry more than {} per direction", base.lanes, base.type,
                         format_bandwidth(kMaxBandwidth)));
    }
    std::vector<std::string> ends[2];
    for (int side = 0; side < 2; ++side) {
      const auto name = parts[side].as<std::string>();
      if (name == "gpu*") {
        for (int i = 0; i < node.gpus; ++i) ends[side].push_back(fmt::format("gpu{}", i));
      } else if (vertices.count(name)) {
        ends[side].push_back(name);
      } else {
        parts[side].fail(fmt::format(
            "unknown vertex '{}' (gpu0..gpu{}, cpu0..cpu{}, nic0..nic{}, "
            "or a name under switches){}",
            name, node.gpus - 1, node.host.sockets - 1, node.nics - 1, did_you_mean(name, known)));
      }
    }
    for (const auto& a : ends[0]) {
      for (const auto& b : ends[1]) {
        if (a == b) e.fail(fmt::format("a link from '{}' to itself", a));
        if (!linked.emplace(std::min(a, b), std::max(a, b)).second) {
          e.fail(fmt::format("a second link between '{}' and '{}' (give one link with its lanes)",
                             a, b));
        }
        FabricLink l = base;
        l.a = a;
        l.b = b;
        links.push_back(l);
      }
    }
  }
  return links;
}

NodeSpec parse_node(const ConfigNode& n, const std::string& stem, Context& ctx) {
  NodeSpec node;
  const bool inherited = take_base<NodeSpec>(n, "node", ctx, parse_node, node);
  read_about(n, "node", stem, node.about, inherited, n.file());
  field(n, "gpu", node.gpu, inherited,
        [&](const ConfigNode& ref) { return resolve<GpuSpec>(ref, "gpu", ctx, parse_gpu); });
  field(n, "gpus", node.gpus, inherited, [](const ConfigNode& c) { return per_node_count(c); });
  section(n, "host", inherited, [&](const ConfigNode& h) {
    field(h, "cpu", node.host.cpu, inherited, text);
    if (h.has("vendor")) {
      static const std::vector<std::string> vendors = {"intel", "amd", "arm", "power"};
      node.host.vendor = h.get<std::string>("vendor");
      if (std::find(vendors.begin(), vendors.end(), node.host.vendor) == vendors.end()) {
        h.child("vendor").fail(fmt::format("unknown CPU vendor '{}' (intel, amd, arm, power){}",
                                           node.host.vendor,
                                           did_you_mean(node.host.vendor, vendors)));
      }
    }
    if (h.has("generation")) {
      const auto& known = cpu_generations(node.host.vendor);
      node.host.generation = h.get<std::string>("generation");
      if (std::find(known.begin(), known.end(), node.host.generation) == known.end()) {
        h.child("generation")
            .fail(known.empty()
                      ? fmt::format("vendor '{}' has no generations (NCCL reads none)",
                                    node.host.vendor)
                      : fmt::format("unknown {} CPU generation '{}' ({}){}", node.host.vendor,
                                    node.host.generation, fmt::join(known, ", "),
                                    did_you_mean(node.host.generation, known)));
      }
    }
    field(h, "sockets", node.host.sockets, inherited, positive_int);
    field(h, "cores", node.host.cores, inherited, positive_int);
    field(h, "memory", node.host.memory, inherited, capacity);
    field(h, "memory_bandwidth", node.host.memory_bandwidth, inherited, bandwidth);
    if (h.has("shm_bandwidth")) node.host.shm_bandwidth = bandwidth(h.child("shm_bandwidth"));
    h.finish();
  });
  field(n, "nics", node.nics, inherited,
        [](const ConfigNode& c) { return per_node_count(c, true); });
  section(n, "link_types", inherited, [&](const ConfigNode& lt) {
    if (!lt.is_map()) lt.fail("must map link type names to {bandwidth, latency}");
    for (const auto& key : lt.keys()) {
      const auto t = lt.child(key);
      LinkType type;
      type.bandwidth = bandwidth(t.child("bandwidth"));
      type.latency = seconds(t.child("latency"));
      t.finish();
      node.link_types[key] = type;
    }
  });
  if (n.has("switches")) {
    node.switches.clear();
    std::set<std::string> seen;
    for (const auto& s : n.child("switches").elements()) {
      const auto name = s.as<std::string>();
      const bool reserved =
          name.starts_with("gpu") || name.starts_with("cpu") || name.starts_with("nic");
      if (reserved)
        s.fail(fmt::format("'{}': switch names may not start with gpu, cpu or nic", name));
      if (!seen.insert(name).second) s.fail(fmt::format("switch '{}' listed twice", name));
      node.switches.push_back(name);
    }
  } else {
    n.mark_used("switches");
  }
  field(n, "links", node.links, inherited,
        [&](const ConfigNode& links) { return parse_links(links, node); });
  if (inherited && !n.has("links")) {
    // Inherited links name the base's vertices: a node that changes its GPUs, sockets, NICs or
    // switches must say how the new ones are wired.
    std::set<std::string> vertices(node.switches.begin(), node.switches.end());
    for (int i = 0; i < node.gpus; ++i) vertices.insert(fmt::format("gpu{}", i));
    for (int i = 0; i < node.host.sockets; ++i) vertices.insert(fmt::format("cpu{}", i));
    for (int i = 0; i < node.nics; ++i) vertices.insert(fmt::format("nic{}", i));
    for (const auto& l : node.links) {
      for (const auto& end : {l.a, l.b}) {
        if (!vertices.count(end)) {
          n.fail(fmt::format(
              "the links it inherits join '{}', which this node (gpus: {}, sockets: {}, nics: {}) "
              "does not have: give its `links`",
              end, node.gpus, node.host.sockets, node.nics));
        }
      }
    }
  }
  n.finish();
  return node;
}

// ---- network --------------------------------------------------------------------------------

TopologySpec parse_topology(const ConfigNode& t, const TopologySpec* base) {
  TopologySpec s;
  s.kind = t.get<std::string>("kind");
  if (std::find(topology_kinds().begin(), topology_kinds().end(), s.kind) ==
      topology_kinds().end()) {
    t.child("kind").fail(
        fmt::format("unknown topology '{}'{}", s.kind, did_you_mean(s.kind, topology_kinds())));
  }
  const bool inherited = base && base->kind == s.kind;
  if (inherited) s = *base;
  if (s.kind == "fat_tree") {
    field(t, "nodes_per_leaf", s.nodes_per_leaf, inherited, positive_int);
    field(t, "oversubscription", s.oversubscription, inherited, [](const ConfigNode& c) {
      const double v = c.as<double>();
      if (v < 1) c.fail(fmt::format("must be at least 1 (down:up bandwidth), got {}", v));
      return v;
    });
  } else if (s.kind == "dragonfly") {
    field(t, "nodes_per_group", s.nodes_per_group, inherited, positive_int);
    field(t, "global_bandwidth", s.global_bandwidth, inherited, bandwidth);
    field(t, "global_latency", s.global_latency, inherited, seconds);
  } else if (s.kind == "cloud") {
    Bandwidth cap = s.per_flow_cap.value_or(Bandwidth(0));
    field(t, "per_flow_cap", cap, inherited, bandwidth);
    s.per_flow_cap = cap;
  }
  t.finish();
  return s;
}

NetworkSpec parse_network(const ConfigNode& n, const std::string& stem, Context& ctx) {
  NetworkSpec net;
  const bool inherited = take_base<NetworkSpec>(n, "network", ctx, parse_network, net);
  read_about(n, "network", stem, net.about, inherited, n.file());
  section(n, "port", inherited, [&](const ConfigNode& p) {
    field(p, "bandwidth", net.port.bandwidth, inherited, bandwidth);
    field(p, "latency", net.port.latency, inherited, seconds);
    p.finish();
  });
  field(n, "switch_latency", net.switch_latency, inherited, seconds);
  section(n, "transport", inherited, [&](const ConfigNode& t) {
    field(t, "kind", net.transport.kind, inherited, [](const ConfigNode& c) {
      const auto k = c.as<std::string>();
      if (k != "rdma" && k != "tcp") c.fail(fmt::format("'{}' is not rdma or tcp", k));
      return k;
    });
    field(t, "efficiency", net.transport.efficiency, inherited, fraction);
    field(t, "message_overhead", net.transport.message_overhead, inherited, seconds);
    if (t.has("stream_bandwidth")) {
      Bandwidth b;
      field(t, "stream_bandwidth", b, false, bandwidth);
      net.transport.stream_bandwidth = b;
    }
    t.finish();
  });
  field(n, "topology", net.topology, inherited, [&](const ConfigNode& t) {
    return parse_topology(t, inherited ? &net.topology : nullptr);
  });
  n.finish();
  return net;
}

// ---- library --------------------------------------------------------------------------------

const std::vector<std::string>& protocol_names() {
  static const std::vector<std::string> names = {"LL", "LL128", "Simple"};
  return names;
}
const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = {"ring", "tree", "nvls"};
  return names;
}
const std::vector<std::string>& generation_names() {
  static const std::vector<std::string> names = {"volta", "ampere", "hopper"};
  return names;
}

ProtocolSpec parse_protocol(const ConfigNode& p) {
  ProtocolSpec s;
  s.name = p.get<std::string>("name");
  if (std::find(protocol_names().begin(), protocol_names().end(), s.name) ==
      protocol_names().end()) {
    p.child("name").fail(fmt::format("unknown protocol '{}' (LL, LL128, Simple){}", s.name,
                                     did_you_mean(s.name, protocol_names())));
  }
  s.chunk = positive(p.child("chunk"), quantity<Bytes>(p.child("chunk"), parse_whole_bytes));
  s.thread_threshold = capacity(p.child("thread_threshold"));
  s.max_threads = positive_int(p.child("max_threads"));
  p.finish();
  return s;
}

// [LL, LL128, Simple] durations.
PerProtocol per_protocol(const ConfigNode& n) {
  const auto items = n.elements();
  if (items.size() != kProtocols) n.fail("needs three values: [LL, LL128, Simple]");
  PerProtocol out;
  for (int i = 0; i < kProtocols; ++i) out[i] = seconds(items[i]);
  return out;
}

// {ring: [..], tree: [..], ...}: one [LL, LL128, Simple] list per algorithm.
std::map<std::string, PerProtocol> per_algorithm(const ConfigNode& n) {
  std::map<std::string, PerProtocol> out;
  for (const auto& key : n.keys()) {
    if (std::find(algorithm_names().begin(), algorithm_names().end(), key) ==
        algorithm_names().end()) {
      n.child(key).fail(fmt::format("unknown algorithm '{}' (ring, tree, nvls){}", key,
                                    did_you_mean(key, algorithm_names())));
    }
    out[key] = per_protocol(n.child(key));
  }
  return out;
}

// {volta: [1 node, 2 nodes, more], ampere: [..], hopper: [..]} in B/s.
std::map<std::string, PerNodeCount> per_generation(const ConfigNode& n) {
  std::map<std::string, PerNodeCount> out;
  for (const auto& key : n.keys()) {
    if (std::find(generation_names().begin(), generation_names().end(), key) ==
        generation_names().end()) {
      n.child(key).fail(fmt::format("unknown GPU generation '{}' (volta, ampere, hopper){}", key,
                                    did_you_mean(key, generation_names())));
    }
    const auto items = n.child(key).elements();
    if (items.size() != 3) n.child(key).fail("needs three values: [1 node, 2 nodes, 3 or more]");
    PerNodeCount row;
    for (int i = 0; i < 3; ++i) row[i] = bandwidth(items[i]);
    out[key] = row;
  }
  return out;
}

std::vector<Bandwidth> speeds(const ConfigNode& n) {
  std::vector<Bandwidth> out;
  for (const auto& e : n.elements()) {
    out.push_back(bandwidth(e));
    if (out.size() > 1 && !(out.back() < out[out.size() - 2])) {
      e.fail("speeds must be listed from the highest down");
    }
  }
  if (out.empty()) n.fail("needs at least one speed");
  return out;
}

double factor(const ConfigNode& n) { return fraction(n); }

void parse_latency(const ConfigNode& l, TunerSpec& t, bool inherited) {
  field(l, "base", t.base_latency, inherited, per_algorithm);
  static const std::vector<std::pair<const char*, PathClass>> classes = {
      {"nvlink", PathClass::kNvlink}, {"pcie", PathClass::kPcie}, {"network", PathClass::kNetwork}};
  for (const auto& [key, cls] : classes) {
    field(l, key, t.step_latency[cls], inherited, per_algorithm);
  }
  if (l.has("network_overhead")) {
    const auto o = l.child("network_overhead");
    t.network_overhead_intel = seconds(o.child("intel"));
    t.network_overhead_amd = seconds(o.child("amd"));
    t.network_overhead_simple_factor = o.get<double>("simple_factor");
    if (!(t.network_overhead_simple_factor >= 1 && t.network_overhead_simple_factor <= 100)) {
      o.child("simple_factor").fail("must be in [1, 100]");
    }
    o.finish();
  }
  l.finish();
}

void parse_bandwidth(const ConfigNode& b, TunerSpec& t, bool inherited) {
  field(b, "ring_ll", t.ring_ll, inherited, factor);
  field(b, "ring_ll128", t.ring_ll128, inherited, factor);
  field(b, "ring_ll128_one_gpu", t.ring_ll128_one_gpu, inherited, factor);
  field(b, "tree", t.tree, inherited, factor);
  field(b, "tree_ll", t.tree_ll, inherited, factor);
  section(b, "tree_ll128", inherited, [&](const ConfigNode& e) {
    t.tree_ll128_one_node = fraction(e.child("one_node"));
    t.tree_ll128_nodes = fraction(e.child("nodes"));
    e.finish();
  });
  field(b, "ll_max", t.ll_max, inherited, per_generation);
  field(b, "ring_ll128_per_channel", t.ring_ll128_per_channel, inherited, per_generation);
  field(b, "tree_ll128_per_channel", t.tree_ll128_per_channel, inherited, per_generation);
  field(b, "tree_per_channel", t.tree_per_channel, inherited, per_generation);
  section(b, "tree_correction", inherited, [&](const ConfigNode& c) {
    for (int p = 0; p < kProtocols; ++p) {
      auto& row = t.tree_correction[static_cast<std::size_t>(p)];
      row.clear();
      for (const auto& e : c.child(protocol_names()[static_cast<std::size_t>(p)]).elements()) {
        row.push_back(fraction(e));
      }
      if (row.empty()) c.child(protocol_names()[static_cast<std::size_t>(p)]).fail("is empty");
      // One factor per size class, 64 B to 256 MiB (NCCL's treeCorrectionFactor has 23): a
      // longer list's tail would never be read; sizes past a shorter one take no correction.
      if (row.size() > 23) {
        c.child(protocol_names()[static_cast<std::size_t>(p)])
            .fail(
                fmt::format("has {} factors; at most 23 (64 B, 128 B, ..., 256 MiB)", row.size()));
      }
    }
    c.finish();
  });
  if (b.has("plateau")) {
    const auto pl = b.child("plateau");
    t.plateau_bytes = capacity(pl.child("bytes"));
    for (auto [key, out] : {std::pair{"factor", &t.plateau_factor},
                            std::pair{"factor_pre_ampere", &t.plateau_factor_pre_ampere}}) {
      *out = pl.get<double>(key);
      if (!(*out >= 1 && *out <= 10)) pl.child(key).fail("must be in [1, 10]");
    }
    pl.finish();
  }
  if (b.has("nvls")) {
    const auto v = b.child("nvls");
    t.nvls_ratio = fraction(v.child("algbw_ratio"));
    t.nvls_channels = positive_int(v.child("channels"));
    v.finish();
  }
  b.finish();
}

// What the NCCL releases have, from NVIDIA/nccl's release tags: the tuner takes a library
// file's tables as the release's own, so a file may not offer what its release did not have
// (docs/hardware-format.md, "Libraries").
struct Release {
  int major = 0, minor = 0, patch = 0;
  auto operator<=>(const Release&) const = default;
};
constexpr Release kNewestRelease{2, 30, 7};  // v2.30.7-1, the newest tag known to this table

Release parse_release(const std::string& text) {
  Release r;
  char dot = 0;
  std::istringstream in(text);
  in >> r.major >> dot >> r.minor;
  if (in >> dot) in >> r.patch;
  return r;
}

void check_release(const ConfigNode& n, const LibrarySpec& lib) {
  const auto& t = lib.tuner;
  const Release r = parse_release(t.version);
  // The error goes to the version where the file gives one, else to what it offers.
  auto fail = [&](std::string_view key, const std::string& what) {
    const auto at = n.has("version") ? n.child("version") : n.has(key) ? n.child(key) : n;
    at.fail(what);
  };
  const bool known =
      (r.major == 1 && r.minor <= 3) || (r.major == 2 && r.minor <= kNewestRelease.minor);
  if (!known) {
    fail("version", fmt::format("NCCL {} is not a release the tuner knows (1.0 to 1.3 and 2.0 to "
                                "2.{}; the newest tag it knows is v{}.{}.{}-1)",
                                t.version, kNewestRelease.minor, kNewestRelease.major,
                                kNewestRelease.minor, kNewestRelease.patch));
  }
  struct Feature {
    std::string_view key, name;
    bool offered;
    Release first;           // the first release tag that has it...
    std::string_view since;  // ...in words
  };
  auto has_protocol = [&](std::string_view name) {
    return std::any_of(lib.protocols.begin(), lib.protocols.end(),
                       [&](const ProtocolSpec& p) { return p.name == name; });
  };
  auto has_algorithm = [&](std::string_view name) {
    return std::find(t.algorithms.begin(), t.algorithms.end(), name) != t.algorithms.end();
  };
  const Feature features[] = {
      {"protocols", "LL protocol", has_protocol("LL"), {2, 0, 0}, "not in NCCL 1"},
      {"protocols", "LL128 protocol", has_protocol("LL128"), {2, 5, 6}, "first in 2.5.6"},
      {"algorithms", "tree algorithm", has_algorithm("tree"), {2, 4, 2}, "first in 2.4.2"},
      {"algorithms", "nvls algorithm", has_algorithm("nvls"), {2, 17, 1}, "first in 2.17.1"},
      // getNetOverhead, src/graph/tuning.cc of v2.18.1-1
      {"latency",
       "network overhead",
       t.network_overhead_intel.value() > 0 || t.network_overhead_amd.value() > 0,
       {2, 18, 1},
       "first in 2.18.1"},
  };
  for (const auto& f : features) {
    if (f.offered && r < f.first) {
      fail(f.key, fmt::format("NCCL {} has no {} ({}), which the file offers{}", t.version, f.name,
                              f.since, n.has(f.key) ? "" : " by inheritance"));
    }
  }
}

LibrarySpec parse_library(const ConfigNode& n, const std::string& stem, Context& ctx) {
  LibrarySpec lib;
  const bool inherited = take_base<LibrarySpec>(n, "library", ctx, parse_library, lib);
  read_about(n, "library", stem, lib.about, inherited, n.file());
  if (n.has("family")) {
    lib.family = n.get<std::string>("family");
    if (lib.family != "nccl" && lib.family != "mpi") {
      n.child("family").fail(fmt::format("unknown library family '{}' (nccl, mpi)", lib.family));
    }
  }
  section(n, "link_efficiency", inherited, [&](const ConfigNode& e) {
    lib.nvlink_efficiency = fraction(e.child("nvlink"));
    lib.pcie_efficiency = fraction(e.child("pcie"));
    e.finish();
  });
  if (n.has("host_cpu")) {
    const auto c = n.child("host_cpu");
    lib.cpu_per_call = seconds(c.child("per_call"));  // a negative duration is refused there
    lib.cpu_per_byte = seconds(c.child("per_byte"));
    if (c.has("wait_per_call")) lib.wait_per_call = seconds(c.child("wait_per_call"));
    if (c.has("wait_per_byte")) lib.wait_per_byte = seconds(c.child("wait_per_byte"));
    c.finish();
  }
  if (!lib.nccl()) {
    // MPI: point-to-point schedules, no tuning model (any NCCL key is an unknown key).
    field(n, "segment", lib.segment, inherited, capacity);
    n.finish();
    return lib;
  }
  section(n, "protocols", inherited, [&](const ConfigNode& c) {
    lib.protocols.clear();
    std::set<std::string> seen;
    for (const auto& p : c.elements()) {
      lib.protocols.push_back(parse_protocol(p));
      if (!seen.insert(lib.protocols.back().name).second) {
        p.child("name").fail(fmt::format("protocol '{}' listed twice", lib.protocols.back().name));
      }
    }
    if (lib.protocols.empty()) c.fail("needs at least one protocol");
  });
  field(n, "max_channels", lib.max_channels, inherited, positive_int);
  if (lib.max_channels > 64)
    n.child("max_channels").fail("must be at most 64 (NCCL's MAXCHANNELS)");
  auto& t = lib.tuner;
  field(n, "version", t.version, inherited, text);
  if (n.has("version")) {
    // A release number (MAJOR.MINOR[.PATCH]), shown beside every choice of the tuner.
    static const std::regex release(R"(\d+\.\d+(\.\d+)?)");
    if (!std::regex_match(t.version, release)) {
      n.child("version").fail(fmt::format(
          "'{}' is not an NCCL release number (MAJOR.MINOR.PATCH, e.g. 2.21.5)", t.version));
    }
  }
  section(n, "algorithms", inherited, [&](const ConfigNode& c) {
    t.algorithms.clear();
    for (const auto& e : c.elements()) {
      const auto a = e.as<std::string>();
      if (std::find(algorithm_names().begin(), algorithm_names().end(), a) ==
          algorithm_names().end()) {
        e.fail(fmt::format("unknown algorithm '{}' (ring, tree, nvls){}", a,
                           did_you_mean(a, algorithm_names())));
      }
      t.algorithms.push_back(a);
    }
    if (std::find(t.algorithms.begin(), t.algorithms.end(), "ring") == t.algorithms.end()) {
      c.fail("must offer ring (NCCL always has rings)");
    }
  });
  section(n, "latency", inherited, [&](const ConfigNode& l) { parse_latency(l, t, inherited); });
  section(n, "bandwidth", inherited,
          [&](const ConfigNode& b) { parse_bandwidth(b, t, inherited); });
  section(n, "ll128", inherited, [&](const ConfigNode& l) {
    t.ll128_compute_capabilities.clear();
    for (const auto& e : l.child("compute_capabilities").elements()) {
      const int cc = e.as<int>();
      if (cc < 10 || cc > 200) e.fail(fmt::format("'{}' is not a compute capability x 10", cc));
      t.ll128_compute_capabilities.push_back(cc);
    }
    static const std::vector<std::string> paths = {"pix", "pxb", "pxn", "phb"};
    for (auto [key, out] : {std::pair{"network_path", &t.ll128_network_path},
                            std::pair{"network_path_hopper", &t.ll128_network_path_hopper}}) {
      *out = l.get<std::string>(key);
      if (std::find(paths.begin(), paths.end(), *out) == paths.end()) {
        l.child(key).fail(fmt::format("'{}' is not pix, pxb, pxn or phb", *out));
      }
    }
    l.finish();
  });
  section(n, "search", inherited, [&](const ConfigNode& c) {
    t.speeds_intra = speeds(c.child("speeds_intra"));
    t.speeds_inter = speeds(c.child("speeds_inter"));
    t.speeds_intra_hopper =
        c.has("speeds_intra_hopper") ? speeds(c.child("speeds_intra_hopper")) : t.speeds_intra;
    t.speeds_inter_hopper =
        c.has("speeds_inter_hopper") ? speeds(c.child("speeds_inter_hopper")) : t.speeds_inter;
    t.duplicate_from = bandwidth(c.child("duplicate_from"));
    t.runtime_factor = positive_int(c.child("runtime_factor"));
    if (c.has("rank_order_ring")) t.rank_order_ring = c.get<bool>("rank_order_ring");
    if (c.has("pxn")) t.pxn = c.get<bool>("pxn");
    c.finish();
  });
  n.finish();
  // Every offered algorithm has its latencies on every path class.
  for (const auto& a : t.algorithms) {
    const bool complete = t.base_latency.count(a) && t.step_latency[PathClass::kNvlink].count(a) &&
                          t.step_latency[PathClass::kPcie].count(a) &&
                          t.step_latency[PathClass::kNetwork].count(a);
    if (!complete) {
      n.child("latency").fail(fmt::format(
          "algorithm '{}' is offered but has no latencies under base, nvlink, pcie and network",
          a));
    }
  }
  check_release(n, lib);
  return lib;
}

// ---- cluster --------------------------------------------------------------------------------

std::vector<std::string> hostnames(const ConfigNode& n, int count) {
  std::vector<std::string> names;
  try {
    names = expand_hostlist(n.as<std::string>());
  } catch (const std::invalid_argument& e) {
    n.fail(e.what());
  }
  if (static_cast<int>(names.size()) != count) {
    n.fail(fmt::format("names {} hosts for {} nodes", names.size(), count));
  }
  return names;
}

NodeGroup parse_group(const ConfigNode& g, Context& ctx, const NodeGroup* base) {
  NodeGroup group;
  if (base) group = *base;
  if (g.has("node")) {
    group.node = resolve<NodeSpec>(g.child("node"), "node", ctx, parse_node);
  } else if (!base) {
    g.child("node");
  }
  field(g, "count", group.count, base != nullptr, node_count);
  group.hostnames.clear();
  if (g.has("hostnames")) group.hostnames = hostnames(g.child("hostnames"), group.count);
  g.mark_used("hostnames");
  return group;
}

ClusterSpec parse_cluster(const ConfigNode& n, const std::string& stem, Context& ctx) {
  ClusterSpec c;
  const bool inherited = take_base<ClusterSpec>(n, "cluster", ctx, parse_cluster, c);
  read_about(n, "cluster", stem, c.about, inherited, n.file());
  const bool single = n.has("node") || n.has("nodes") || n.has("hostnames");
  if (n.has("groups")) {
    if (single) {
      n.child("groups").fail("give either groups or node/nodes/hostnames, not both");
    }
    c.groups.clear();
    for (const auto& g : n.child("groups").elements()) {
      c.groups.push_back(parse_group(g, ctx, nullptr));
      // A group may only use the keys node, count, hostnames.
      g.finish();
    }
    if (c.groups.empty()) n.child("groups").fail("needs at least one group");
  } else if (single || !inherited) {
    if (inherited && c.groups.size() != 1) {
      n.fail("extends a cluster with several groups; override `groups` as a whole");
    }
    NodeGroup g = inherited ? c.groups.front() : NodeGroup{};
    field(n, "node", g.node, inherited,
          [&](const ConfigNode& ref) { return resolve<NodeSpec>(ref, "node", ctx, parse_node); });
    field(n, "nodes", g.count, inherited, node_count);
    if (n.has("hostnames")) {
      g.hostnames = hostnames(n.child("hostnames"), g.count);
    } else if (static_cast<int>(g.hostnames.size()) != g.count) {
      g.hostnames.clear();
    }
    c.groups = {g};
  }
  n.mark_used("groups");
  n.mark_used("hostnames");
  field(n, "network", c.network, inherited, [&](const ConfigNode& ref) {
    return resolve<NetworkSpec>(ref, "network", ctx, parse_network);
  });
  if (n.has("library")) {
    c.library = resolve<LibrarySpec>(n.child("library"), "library", ctx, parse_library);
  } else if (!inherited) {
    n.mark_used("library");
    Context fresh;
    c.library =
        load_file_or_preset<LibrarySpec>("nccl", "library", fresh, n.where(), parse_library);
  }
  n.finish();
  std::int64_t nodes = 0;
  for (const auto& g : c.groups) nodes += g.count;
  if (nodes > kMaxNodes) {
    (n.has("groups") ? n.child("groups") : n)
        .fail(
            fmt::format("{} nodes in all, more than the {} a cluster may have", nodes, kMaxNodes));
  }
  // Hosts the file does not name are node001, node002, ... across all groups.
  const int total = c.node_count();
  const int width = std::max(3, static_cast<int>(std::to_string(total).size()));
  std::set<std::string> seen;
  int index = 0;
  // Where a group's names were written: its `hostnames`, else the group, else the file.
  const auto where_named = [&](std::size_t group) {
    if (n.has("groups")) {
      const auto groups = n.child("groups").elements();
      if (group < groups.size()) {
        return groups[group].has("hostnames") ? groups[group].child("hostnames") : groups[group];
      }
    }
    return n.has("hostnames") ? n.child("hostnames") : n;
  };
  for (std::size_t gi = 0; gi < c.groups.size(); ++gi) {
    auto& g = c.groups[gi];
    if (g.hostnames.empty()) {
      for (int i = 0; i < g.count; ++i) {
        g.hostnames.push_back(fmt::format("node{:0{}}", index + i + 1, width));
      }
    }
    for (const auto& h : g.hostnames) {
      if (!seen.insert(h).second) {
        where_named(gi).fail(fmt::format("host name '{}' is used twice", h));
      }
    }
    index += g.count;
  }
  return c;
}

template <class Spec>
Spec load_top(const std::string& ref, std::string_view kind, Parser<Spec> parse) {
  Context ctx;
  return load_file_or_preset<Spec>(ref, kind, ctx, {}, parse);
}

}  // namespace

GpuSpec load_gpu(const std::string& ref) { return load_top<GpuSpec>(ref, "gpu", parse_gpu); }
NodeSpec load_node(const std::string& ref) { return load_top<NodeSpec>(ref, "node", parse_node); }
NetworkSpec load_network(const std::string& ref) {
  return load_top<NetworkSpec>(ref, "network", parse_network);
}
LibrarySpec load_library(const std::string& ref) {
  return load_top<LibrarySpec>(ref, "library", parse_library);
}
ClusterSpec load_cluster(const std::string& ref) {
  return load_top<ClusterSpec>(ref, "cluster", parse_cluster);
}
ClusterSpec load_cluster(const std::string& ref, const std::optional<std::string>& library) {
  auto c = load_cluster(ref);
  if (library) c.library = load_library(*library);
  return c;
}

ClusterSpec load_cluster(const std::string& ref, const std::optional<std::string>& library,
                         const std::optional<std::string>& network) {
  auto c = load_cluster(ref, library);
  if (network) c.network = load_network(*network);
  return c;
}

void check_reference(const std::string& ref, std::string_view kind, std::string_view field) {
  if (is_path(ref)) {
    std::error_code ec;
    if (!fs::exists(ref, ec)) fail_at({}, field, fmt::format("{} file '{}' not found", kind, ref));
    return;
  }
  const auto names = preset_names(kind);
  if (std::find(names.begin(), names.end(), ref) == names.end()) {
    fail_at({}, field,
            fmt::format("unknown {} preset '{}'{}", kind, ref, did_you_mean(ref, names)));
  }
}

AnySpec load_any(const std::string& ref, const std::string& kind) {
  std::string k = kind;
  if (!k.empty() &&
      std::find(profile_kinds().begin(), profile_kinds().end(), k) == profile_kinds().end()) {
    fail_at({}, "--kind", fmt::format("unknown kind '{}'{}", k, did_you_mean(k, profile_kinds())));
  }
  if (k.empty() && is_path(ref)) {
    if (std::error_code ec; !fs::exists(ref, ec))
      fail_at({}, "", fmt::format("file '{}' not found", ref));
    k = ConfigNode::load_file(ref).get<std::string>("kind");
    if (std::find(profile_kinds().begin(), profile_kinds().end(), k) == profile_kinds().end()) {
      ConfigNode::load_file(ref).child("kind").fail(
          fmt::format("unknown kind '{}'{}", k, did_you_mean(k, profile_kinds())));
    }
  }
  if (k.empty()) {
    std::vector<std::string> found;
    std::vector<std::string> all;
    for (const auto& p : list_presets()) {
      if (p.name == ref) found.push_back(p.kind);
      all.push_back(p.name);
    }
    if (found.empty()) {
      fail_at({}, "", fmt::format("unknown hardware preset '{}'{}", ref, did_you_mean(ref, all)));
    }
    if (found.size() > 1) {
      std::string kinds;
      for (const auto& f : found) kinds += (kinds.empty() ? "" : " and a ") + f;
      fail_at({}, "", fmt::format("'{}' names a {}; say which with --kind", ref, kinds));
    }
    k = found.front();
  }
  if (k == "gpu") return load_gpu(ref);
  if (k == "node") return load_node(ref);
  if (k == "network") return load_network(ref);
  if (k == "library") return load_library(ref);
  return load_cluster(ref);
}

std::vector<PresetInfo> list_presets() {
  std::vector<PresetInfo> out;
  for (const auto& kind : profile_kinds()) {
    for (const auto& name : preset_names(kind)) {
      const std::string key = std::string(folder_of(kind)) + "/" + name;
      for (const auto& p : presets()) {
        if (p.name != key) continue;
        auto doc = ConfigNode::load_string(p.text, p.path);
        out.push_back({kind, name, doc.get_or<std::string>("description", ""), p.path});
      }
    }
  }
  return out;
}

}  // namespace dlsim::hardware
