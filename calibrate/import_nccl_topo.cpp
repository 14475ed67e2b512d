// NCCL topology dump -> dlsim node profile (`kind: node`, docs/hardware-format.md).
//
// The dump is the XML NCCL writes to NCCL_TOPO_DUMP_FILE. Its layout, as NVIDIA/nccl writes and
// reads it (src/graph/xml.cc at 081eafaf, src/graph/xml.h and src/graph/topo.cc at 069a3d4f):
//   <system version="1">
//     <cpu numaid arch vendor familyid modelid [host_hash affinity]>   one per NUMA domain
//       <pci busid class vendor device link_speed link_width>           bridges nest
//         <pci busid class="0x03..." ...> <gpu dev sm rank gdr>
//             <nvlink target="BUSID" count="N" tclass="0x030200 | 0x068000 | 0x068001"/>
//         <pci busid class="0x02..." ...> <nic> <net name dev speed port guid .../> </nic>
//       <nic> <net .../> </nic>                                         a NIC with no PCI path
// link_speed/link_width of a <pci> describe the link to its parent: the slower of the device's and
// the upstream port's max_link_speed/max_link_width (ncclTopoGetXmlFromSys).
//
// The mapping onto the node's fabric graph:
//   - gpuN: one per <pci> holding a <gpu> (several <gpu> on one device, ranks sharing it, count
//     once), numbered by `dev` (the NVML index, as nvidia-smi numbers GPUs). nicN: one per <net>
//     (ports of a multi-port NIC are separate NICs, as NCCL's NET nodes are; net="0" marks a port
//     fused into a virtual NIC and is left out), numbered by `dev`. cpuN: one per <cpu> in the
//     dump's order; NCCL's <cpu> is a NUMA domain, so `host.sockets` counts NUMA domains with
//     devices. pciswN: every other <pci> with a GPU or NIC below it (bridges and PCIe switches);
//     a <pci> with no GPU or NIC below carries no traffic and is left out.
//   - links: each GPU, NIC and switch links to the vertex it hangs from (its parent <pci> or its
//     <cpu>) with a PCIe type; GPU pairs link by `nvlink` with lanes = count (reported by both
//     ends; they must agree); NVLinks to NVSwitches (tclass 0x068000) all go to one vertex
//     `nvswitch0` of type `nvswitch`, lanes = the GPU's count over all switch chips, as
//     ncclTopoAddNvLinks folds every NVSwitch into one NVS node; tclass 0x068001 (IBM NPU) is an
//     NVLink to the GPU's CPU; every CPU pair links by the inter-CPU type, as ncclTopoConnectCpus
//     connects them.
//   - PCIe bandwidth: line rate of link_speed x link_width, after 8b/10b (2.5 and 5 GT/s) or
//     128b/130b (8 to 32 GT/s) encoding; 64 GT/s (PCIe 6, FLIT mode) at its raw rate. A speed NCCL
//     could not read is 8 GT/s and a width of 0 (or none) is 16, NCCL's fallbacks (kvDictPciGen,
//     ncclTopoAddPci); a width that is not a lane count (0-32) is refused. One kind of PCIe link in
//     the dump is type `pcie`; several are `pcie<gen>x<width>`.
//   - NVLink bandwidth: the line rate per link and direction by generation (25 GB/s for NVLink 2, 3
//     and 4: V100 300 GB/s over 6 links, A100 600 GB/s over 12, H100 900 GB/s over 18, as the
//     dlsim node presets take it), not NCCL's own planning figures SM70_NVLINK_BW 20,
//     SM80_NVLINK_BW 20, SM90_NVLINK_BW 20.6 GB/s (src/graph/topo.h), which are quoted in `source`.
//   - inter-CPU bandwidth: NCCL's figure for the CPU (ncclTopoGetInterCpuBw: BDW_QPI_BW 6,
//     SKL_QPI_BW 10, SRP_QPI_BW 22, ERP_QPI_BW 40, AMD_ZEN12_BW 16, AMD_ZEN34_BW 24, AMD_ZEN5_BW
//     32, P9_BW 32, ARM_BW 6 GB/s): the dump says nothing of the socket link itself, and NCCL's
//     figure is what GPU traffic across sockets achieves, lower than the line rate.
//   - the GPU model: from `sm` (70 V100, 80 A100, 90 H100, 60 P100; memory size is not in the dump)
//     unless --gpu names it; `source` says it was inferred.
//   - what the dump lacks (host cores, memory and memory bandwidth, link latencies) comes from
//     `extends: BASE` (--base-node); a link type's latency is the base's for the same name, else a
//     typical value. NIC port speeds (<net speed> in Mb/s) belong to the network profile and are
//     only quoted in `source`.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "calibrate/import.hpp"
#include "common/error.hpp"
#include "hardware/loader.hpp"

namespace dlsim::calibrate {
namespace {

namespace fs = std::filesystem;
namespace pt = boost::property_tree;

// NVLink line rate per link and direction, GB/s, by compute capability (x10); `nccl` is NCCL's
// planning figure for the same GPUs (src/graph/topo.h, ncclTopoNVLinkBw).
struct NvlinkGeneration {
  int sm;
  const char* name;
  double line_rate;
  double nccl;
  const char* nccl_constant;
  const char* gpu_preset;
};
constexpr NvlinkGeneration kNvlink[] = {
    {60, "NVLink 1", 20.0, 18.0, "SM60_NVLINK_BW", "p100-sxm2"},
    {70, "NVLink 2", 25.0, 20.0, "SM70_NVLINK_BW", "v100-sxm2-16gb"},
    {80, "NVLink 3", 25.0, 20.0, "SM80_NVLINK_BW", "a100-sxm4-40gb"},
    {90, "NVLink 4", 25.0, 20.6, "SM90_NVLINK_BW", "h100-sxm5"},
};

// Typical latencies for a link type the base profile does not have (the presets' figures).
constexpr double kNvlinkLatencyUs = 0.7;
constexpr double kPcieLatencyUs = 1.0;
constexpr double kInterCpuLatencyUs = 0.5;

// ---- reading the XML ------------------------------------------------------------------------

// The deepest element nesting read. NCCL's dumps nest system > cpu > pci (one level per PCIe
// switch) > gpu > nvlink, about ten levels; Boost's XML reader and the walker below recurse once
// per level, so a file nested thousands deep would overflow the stack instead of being refused.
constexpr int kMaxXmlDepth = 64;

// The line of the first element nested deeper than kMaxXmlDepth, or 0. A scan of the tags only:
// comments, processing instructions, CDATA and quoted attribute values are skipped, and
// well-formedness is left to the XML reader.
int line_too_deep(const std::string& text) {
  int depth = 0, line = 1;
  const std::size_t n = text.size();
  auto skip_to = [&](std::size_t from, std::string_view end) {
    const std::size_t at = text.find(end, from);
    const std::size_t stop = at == std::string::npos ? n : at + end.size();
    line += static_cast<int>(std::count(text.begin() + static_cast<std::ptrdiff_t>(from),
                                        text.begin() + static_cast<std::ptrdiff_t>(stop), '\n'));
    return stop;
  };
  for (std::size_t i = 0; i < n;) {
    if (text[i] == '\n') ++line;
    if (text[i] != '<') {
      ++i;
      continue;
    }
    const std::string_view rest = std::string_view(text).substr(i);
    if (rest.starts_with("<!--")) {
      i = skip_to(i, "-->");
    } else if (rest.starts_with("<![CDATA[")) {
      i = skip_to(i, "]]>");
    } else if (rest.starts_with("<?") || rest.starts_with("<!")) {
      i = skip_to(i, ">");
    } else if (rest.starts_with("</")) {
      --depth;
      i = skip_to(i, ">");
    } else {
      const int start_line = line;
      char quote = 0;
      std::size_t j = i + 1;
      for (; j < n && (quote != 0 || text[j] != '>'); ++j) {
        if (text[j] == '\n') ++line;
        if (quote != 0 && text[j] == quote) {
          quote = 0;
        } else if (quote == 0 && (text[j] == '"' || text[j] == '\'')) {
          quote = text[j];
        }
      }
      if (j == n || text[j - 1] != '/') ++depth;
      if (depth > kMaxXmlDepth) return start_line;
      i = j + 1;
    }
  }
  return 0;
}

struct Reader {
  std::string file;

  [[noreturn]] void fail(const std::string& problem) const { fail_at({file}, "", problem); }

  static std::optional<std::string> attr(const pt::ptree& e, const std::string& key) {
    const auto v = e.get_optional<std::string>("<xmlattr>." + key);
    return v ? std::optional<std::string>(*v) : std::nullopt;
  }
  std::string need(const pt::ptree& e, const std::string& what, const std::string& key) const {
    auto v = attr(e, key);
    if (!v) fail(fmt::format("{} has no '{}' attribute", what, key));
    return *v;
  }
  // An integer as NCCL reads one (strtol base 0: decimal, or hex with 0x).
  int integer(const pt::ptree& e, const std::string& what, const std::string& key) const {
    const std::string s = need(e, what, key);
    const bool hex = s.starts_with("0x") || s.starts_with("0X");
    const char* begin = s.data() + (hex ? 2 : 0);
    int v = 0;
    const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), v, hex ? 16 : 10);
    if (ec != std::errc() || end != s.data() + s.size() || begin == end) {
      fail(fmt::format("{}: {}=\"{}\" is not an integer", what, key, s));
    }
    return v;
  }
};

// A PCI bus id as a number, as NCCL's busIdToInt64 reads it (hex digits, ':' and '.' skipped), so
// "00000000:07:00.0" (NVML) and "0000:07:00.0" (sysfs) are the same device.
std::optional<std::int64_t> bus_number(const std::string& busid) {
  std::int64_t v = 0;
  int digits = 0;
  for (char c : busid) {
    if (c == ':' || c == '.') continue;
    const int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                  : (std::tolower(static_cast<unsigned char>(c)) >= 'a' &&
                     std::tolower(static_cast<unsigned char>(c)) <= 'f')
                      ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                      : -1;
    if (d < 0 || ++digits > 15) return std::nullopt;
    v = v * 16 + d;
  }
  if (digits == 0) return std::nullopt;
  return v;
}

// ---- the fabric as read -----------------------------------------------------------------------

enum class Kind { kCpu, kGpu, kNic, kSwitch };
struct Ref {
  Kind kind;
  std::size_t index;
};

struct PcieKind {
  double gts;  // transfer rate per lane, GT/s
  int width;   // lanes
  auto operator<=>(const PcieKind&) const = default;
  double gbps() const {
    const double encoding = gts < 8 ? 8.0 / 10 : gts < 64 ? 128.0 / 130 : 1.0;
    return gts * width * encoding / 8;
  }
  int generation() const {
    return gts < 3 ? 1 : gts < 6 ? 2 : gts < 10 ? 3 : gts < 20 ? 4 : gts < 40 ? 5 : 6;
  }
};

struct Cpu {
  int numaid = 0;
  std::string arch, vendor;
  int family = -1, model = -1;
};
struct NvLink {
  std::string target, tclass;
  int count = 0;
};
struct Gpu {
  std::string busid, device;
  std::int64_t bus = 0;
  int dev = 0, sm = 0;
  std::size_t cpu = 0;
  std::vector<NvLink> nvlinks;
};
struct Net {
  std::string name;
  int dev = 0;
  int speed_mbps = 0;
  std::size_t order = 0;
};
struct Switch {
  std::string busid, vendor, device;
};
struct PcieLink {
  Ref child, parent;
  PcieKind kind;
  std::string busid;  // the child's <pci>, or "" for a NIC with no PCI path
};

struct Fabric {
  std::string version;
  std::vector<Cpu> cpus;
  std::vector<Gpu> gpus;
  std::vector<Net> nets;
  std::vector<Switch> switches;
  std::vector<PcieLink> pcie;
  int unknown_speeds = 0;  // links whose speed NCCL could not read (taken as 8 GT/s)
  int unknown_widths = 0;  // links whose width NCCL could not read (taken as 16 lanes)
  std::set<std::string> host_hashes;
  bool c2c = false;
};

bool carries_traffic(const pt::ptree& e) {
  for (const auto& [name, child] : e) {
    if (name == "gpu" || name == "net" || carries_traffic(child)) return true;
  }
  return false;
}

class Walker {
 public:
  Walker(const Reader& r, Fabric& f) : r_(r), f_(f) {}

  void cpu(const pt::ptree& e) {
    Cpu c;
    const std::string what = "<cpu>";
    c.numaid = r_.integer(e, what, "numaid");
    c.arch = r_.attr(e, "arch").value_or("");
    c.vendor = r_.attr(e, "vendor").value_or("");
    if (r_.attr(e, "familyid")) c.family = r_.integer(e, what, "familyid");
    if (r_.attr(e, "modelid")) c.model = r_.integer(e, what, "modelid");
    if (auto h = r_.attr(e, "host_hash")) f_.host_hashes.insert(*h);
    f_.cpus.push_back(c);
    const Ref self{Kind::kCpu, f_.cpus.size() - 1};
    for (const auto& [name, child] : e) {
      if (name == "pci") pci(child, self, self.index);
      // A NIC with no PCI path is linked to its CPU by NCCL without a bandwidth limit (LOC_BW);
      // here it gets NCCL's fallback PCIe speed.
      if (name == "nic") nets(child, self, {8, 16}, "");
    }
  }

 private:
  void pci(const pt::ptree& e, Ref parent, std::size_t cpu) {
    if (!carries_traffic(e)) return;
    const std::string busid = r_.need(e, "<pci>", "busid");
    const std::string what = fmt::format("<pci busid=\"{}\">", busid);
    const PcieKind kind = link_kind(e, what);
    if (auto gpu = e.get_child_optional("gpu")) {
      Gpu g;
      g.busid = busid;
      const auto bus = bus_number(busid);
      if (!bus) r_.fail(fmt::format("{}: '{}' is not a PCI bus id", what, busid));
      g.bus = *bus;
      g.device = r_.attr(e, "device").value_or("?");
      g.dev = r_.integer(*gpu, what + " <gpu>", "dev");
      g.sm = r_.integer(*gpu, what + " <gpu>", "sm");
      g.cpu = cpu;
      for (const auto& [name, child] : *gpu) {
        if (name == "c2c") f_.c2c = true;
        if (name != "nvlink") continue;
        const std::string w = what + " <nvlink>";
        g.nvlinks.push_back({r_.need(child, w, "target"), r_.need(child, w, "tclass"),
                             r_.integer(child, w, "count")});
        if (g.nvlinks.back().count < 1) r_.fail(fmt::format("{}: count must be at least 1", w));
      }
      f_.gpus.push_back(g);
      f_.pcie.push_back({{Kind::kGpu, f_.gpus.size() - 1}, parent, kind, busid});
    } else if (auto nic = e.get_child_optional("nic")) {
      nets(*nic, parent, kind, busid);
    } else {
      f_.switches.push_back(
          {busid, r_.attr(e, "vendor").value_or("?"), r_.attr(e, "device").value_or("?")});
      const Ref self{Kind::kSwitch, f_.switches.size() - 1};
      f_.pcie.push_back({self, parent, kind, busid});
      for (const auto& [name, child] : e) {
        if (name == "pci") pci(child, self, cpu);
      }
    }
  }

  void nets(const pt::ptree& nic, Ref parent, PcieKind kind, const std::string& busid) {
    for (const auto& [name, child] : nic) {
      if (name != "net") continue;
      // NCCL skips a <net> without `dev`, and one fused into a virtual NIC (net="0").
      if (!Reader::attr(child, "dev") || Reader::attr(child, "net").value_or("1") == "0") continue;
      const std::string what =
          fmt::format("<net name=\"{}\">", Reader::attr(child, "name").value_or("?"));
      Net n;
      n.name = Reader::attr(child, "name").value_or("?");
      n.dev = r_.integer(child, what, "dev");
      n.speed_mbps = Reader::attr(child, "speed") ? r_.integer(child, what, "speed") : 0;
      if (n.speed_mbps < 0)
        r_.fail(fmt::format("{}: speed {} Mb/s is negative", what, n.speed_mbps));
      n.order = f_.nets.size();
      f_.nets.push_back(n);
      f_.pcie.push_back({{Kind::kNic, f_.nets.size() - 1}, parent, kind, busid});
    }
  }

  PcieKind link_kind(const pt::ptree& e, const std::string& what) {
    PcieKind k{8, 16};
    const std::string speed = Reader::attr(e, "link_speed").value_or("");
    // As ncclTopoGetXmlFromSys reads sysfs: "%f GT/s" ("8 GT/s", "16.0 GT/s PCIe").
    double gts = 0;
    const auto [end, ec] = std::from_chars(speed.data(), speed.data() + speed.size(), gts);
    if (ec == std::errc() && gts > 0 && std::string_view(end).starts_with(" GT/s")) {
      // PCIe 1.0 to 6.0 run 2.5 to 64 GT/s; a rate past that is a damaged or edited dump.
      if (gts > 64) {
        r_.fail(fmt::format("{}: link_speed=\"{}\" is past PCIe 6.0's 64 GT/s", what, speed));
      }
      k.gts = gts;
    } else {
      ++f_.unknown_speeds;
    }
    // sysfs writes the lane count, 0 where it could not tell; NCCL takes 0 (and an attribute it
    // could not read) as 16. Anything but a lane count is a damaged or hand-edited dump.
    const std::string width = Reader::attr(e, "link_width").value_or("");
    int w = 0;
    if (!width.empty()) {
      const auto [wend, wec] = std::from_chars(width.data(), width.data() + width.size(), w);
      if (wec != std::errc() || wend != width.data() + width.size() || w < 0 || w > 32) {
        r_.fail(fmt::format("{}: link_width=\"{}\" is not a PCIe lane count (0-32)", what, width));
      }
    }
    if (w > 0) {
      k.width = w;
    } else {
      ++f_.unknown_widths;
    }
    return k;
  }

  const Reader& r_;
  Fabric& f_;
};

// ---- naming and writing -----------------------------------------------------------------------

std::string gbps(double v) { return fmt::format("\"{:.6g}GB/s\"", v); }
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}
// A folded YAML block (`>-`), wrapped to 100 columns.
std::string folded(const std::string& key, const std::string& text) {
  std::string out = key + ": >-\n";
  std::string line;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (!line.empty() && line.size() + 1 + w.size() > 98) {
      out += "  " + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + "  " + line + "\n";
}

bool is_path(const std::string& s) {
  return s.ends_with(".yaml") || s.ends_with(".yml") || s.find('/') != std::string::npos;
}
// A profile reference as the output file must write it: a relative path is made relative to the
// output's folder, since the loader resolves it from there.
std::string reference_from(const std::string& ref, const fs::path& out_dir) {
  if (!is_path(ref) || fs::path(ref).is_absolute()) return ref;
  return fs::relative(fs::absolute(ref), out_dir).generic_string();
}

struct InterCpu {
  std::string type;
  double gbps;
  std::string constant;
};
// The dump's CPU as the vendor and generation NCCL tells apart (the CPU models of ncclTopoAddCpu,
// src/graph/topo.cc); the generation stays empty for a CPU NCCL has no figure for.
hardware::HostSpec nccl_host(const Cpu& c) {
  hardware::HostSpec h;
  if (c.arch == "ppc64") h.vendor = "power";
  if (c.arch == "arm64") h.vendor = "arm";
  if (c.arch == "x86_64" && c.vendor == "GenuineIntel") {
    const int m = c.model;
    h.generation = c.family == 6 && (m >= 0xCF || m == 0xAD || m == 0xAE || m == 0xAF)
                       ? "emerald-rapids"
                   : c.family == 6 && m >= 0x8F ? "sapphire-rapids"
                   : c.family == 6 && m >= 0x55 ? "skylake"
                                                : "broadwell";
  }
  if (c.arch == "x86_64" && c.vendor == "AuthenticAMD") {
    h.vendor = "amd";
    const int f = c.family;
    h.generation = f == 0xBF || f == 26 ? "zen5" : f == 0xAF || f == 25 ? "zen3" : "zen2";
  }
  return h;
}

// The link between the sockets: NCCL's figure (ncclTopoGetInterCpuBw), the link type named after
// the interconnect.
InterCpu inter_cpu(const Cpu& c) {
  if (c.arch == "x86_64" && (c.vendor == "CentaurHauls" || c.vendor == "  Shanghai  ")) {
    if (c.family == 7 && c.model == 0x5B) return {"zpi", 9, "YONGFENG_ZPI_BW"};
    return {"zpi", 6, "ZPI_BW"};
  }
  const auto host = nccl_host(c);
  const auto figure = hardware::nccl_inter_cpu_bandwidth(host);
  // NCCL leaves an unknown CPU at LOC_BW (no limit between sockets).
  if (!figure) return {"smp", 5000, "LOC_BW"};
  const std::string type = host.vendor == "intel" ? "qpi" : host.vendor == "amd" ? "xgmi" : "smp";
  return {type, figure->bandwidth.value() / 1e9, figure->constant};
}

std::string cpu_text(const Fabric& f) {
  const Cpu& c = f.cpus.front();
  std::string model = c.arch.empty() ? "CPU" : c.arch;
  if (!c.vendor.empty()) model = c.vendor + " " + model;
  if (c.family >= 0) model += fmt::format(" family {} model {}", c.family, c.model);
  return fmt::format("{}x {} (NUMA domains in the NCCL dump)", f.cpus.size(), model);
}

}  // namespace

std::string import_nccl_topo(const std::string& path, const NcclTopoOptions& options) {
  const fs::path out(options.output);
  if (out.extension() != ".yaml" && out.extension() != ".yml") {
    fail_at({options.output}, "--output", "the node profile must be a .yaml file");
  }
  const fs::path out_dir = fs::absolute(out).parent_path();
  const Reader r{path};

  refuse_non_file(path, "");
  std::ifstream file(path, std::ios::binary);
  if (!file) fail_at({path}, "", "cannot open the file");
  std::ostringstream text;
  text << file.rdbuf();
  if (const int line = line_too_deep(text.str()); line > 0) {
    fail_at(
        {path, line}, "",
        fmt::format("elements nested more than {} deep: not an NCCL topology dump", kMaxXmlDepth));
  }
  std::istringstream in(text.str());
  pt::ptree doc;
  try {
    pt::read_xml(in, doc, pt::xml_parser::no_comments);
  } catch (const pt::xml_parser_error& e) {
    fail_at({path, static_cast<int>(e.line())}, "", "not well-formed XML: " + e.message());
  }
  const auto system = doc.get_child_optional("system");
  if (!system) r.fail("no <system> element: not an NCCL topology dump (NCCL_TOPO_DUMP_FILE)");

  Fabric f;
  f.version = Reader::attr(*system, "version").value_or("?");
  Walker walk(r, f);
  for (const auto& [name, child] : *system) {
    if (name == "cpu") walk.cpu(child);
  }
  if (f.host_hashes.size() > 1) {
    r.fail(fmt::format("the dump holds {} hosts (host_hash): import one node's dump",
                       f.host_hashes.size()));
  }
  if (f.gpus.empty()) r.fail("no <gpu> in the dump: nothing to build a node from");
  // NCCL numbers GPUs and NICs by `dev` (NVML's index, the IB device's); two with one number are
  // two dumps run together or a hand edit, and the names below would not say which is which.
  const auto refuse_twice = [&](const auto& items, auto describe) {
    std::map<int, std::size_t> first;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto [at, added] = first.emplace(items[i].dev, i);
      if (!added) r.fail(describe(items[i], items[at->second]));
    }
  };
  refuse_twice(f.gpus, [](const Gpu& g, const Gpu& earlier) {
    return fmt::format("<pci busid=\"{}\"> <gpu>: dev {} is also the GPU at {}", g.busid, g.dev,
                       earlier.busid);
  });
  refuse_twice(f.nets, [](const Net& n, const Net& earlier) {
    return fmt::format("<net name=\"{}\">: dev {} is also <net name=\"{}\">", n.name, n.dev,
                       earlier.name);
  });

  // Names: GPUs and NICs by `dev`, switches and CPUs in the dump's order.
  std::vector<std::size_t> gpu_order(f.gpus.size()), net_order(f.nets.size());
  for (std::size_t i = 0; i < gpu_order.size(); ++i) gpu_order[i] = i;
  for (std::size_t i = 0; i < net_order.size(); ++i) net_order[i] = i;
  std::stable_sort(gpu_order.begin(), gpu_order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(f.gpus[a].dev, f.gpus[a].bus) < std::pair(f.gpus[b].dev, f.gpus[b].bus);
  });
  std::stable_sort(net_order.begin(), net_order.end(),
                   [&](std::size_t a, std::size_t b) { return f.nets[a].dev < f.nets[b].dev; });
  std::vector<std::string> gpu_name(f.gpus.size()), net_name(f.nets.size());
  std::vector<std::size_t> gpu_number(f.gpus.size());
  for (std::size_t i = 0; i < gpu_order.size(); ++i) {
    gpu_name[gpu_order[i]] = fmt::format("gpu{}", i);
    gpu_number[gpu_order[i]] = i;
  }
  for (std::size_t i = 0; i < net_order.size(); ++i)
    net_name[net_order[i]] = fmt::format("nic{}", i);
  auto name_of = [&](Ref v) -> std::string {
    switch (v.kind) {
      case Kind::kCpu:
        return fmt::format("cpu{}", v.index);
      case Kind::kGpu:
        return gpu_name[v.index];
      case Kind::kNic:
        return net_name[v.index];
      case Kind::kSwitch:
        return fmt::format("pcisw{}", v.index);
    }
    return "";
  };

  // The GPU generation.
  const int sm = f.gpus.front().sm;
  for (const auto& g : f.gpus) {
    if (g.sm != sm) {
      r.fail(
          fmt::format("GPUs of different generations (sm {} at {}, sm {} at {}): a node profile "
                      "has one GPU model",
                      sm, f.gpus.front().busid, g.sm, g.busid));
    }
  }
  const NvlinkGeneration* gen = nullptr;
  for (const auto& n : kNvlink) {
    if (n.sm == sm) gen = &n;
  }
  std::string gpu = options.gpu;
  if (gpu.empty()) {
    if (!gen) {
      r.fail(fmt::format("no GPU preset for sm {} (compute capability {}.{}): name one with --gpu",
                         sm, sm / 10, sm % 10));
    }
    gpu = gen->gpu_preset;
  }
  hardware::load_gpu(gpu);  // refuses an unknown preset or a bad file before anything is written
  const auto base = hardware::load_node(options.base_node);

  // NVLinks.
  std::map<std::int64_t, std::size_t> gpu_at;
  for (std::size_t i = 0; i < f.gpus.size(); ++i) gpu_at[f.gpus[i].bus] = i;
  std::map<std::pair<std::size_t, std::size_t>, int> pair_lanes;  // by gpu numbers
  std::vector<int> switch_lanes(f.gpus.size(), 0), cpu_lanes(f.gpus.size(), 0);
  std::set<std::int64_t> nvswitch_chips;
  for (std::size_t i = 0; i < f.gpus.size(); ++i) {
    const auto& g = f.gpus[i];
    for (const auto& l : g.nvlinks) {
      const std::string what =
          fmt::format("<gpu> at {}: <nvlink target=\"{}\">", g.busid, l.target);
      if (l.tclass.starts_with("0x068000")) {
        switch_lanes[i] += l.count;
        if (auto b = bus_number(l.target)) nvswitch_chips.insert(*b);
      } else if (l.tclass.starts_with("0x068001")) {
        cpu_lanes[i] += l.count;
      } else if (l.tclass.starts_with("0x03")) {
        const auto bus = bus_number(l.target);
        const auto it = bus ? gpu_at.find(*bus) : gpu_at.end();
        if (it == gpu_at.end()) {
          r.fail(fmt::format(
              "{}: no GPU of the dump has that bus id (NCCL dumps only its communicator's GPUs: "
              "dump a run over every GPU of the node)",
              what));
        }
        if (it->second == i) r.fail(what + ": an NVLink from a GPU to itself");
        const auto a = std::min(gpu_number[i], gpu_number[it->second]);
        const auto b = std::max(gpu_number[i], gpu_number[it->second]);
        const auto [at, fresh] = pair_lanes.emplace(std::pair(a, b), l.count);
        if (!fresh && at->second != l.count) {
          r.fail(
              fmt::format("{}: count {} but the other end reports {}", what, l.count, at->second));
        }
      } else {
        r.fail(
            fmt::format("{}: unknown target class tclass=\"{}\" (a GPU is 0x03..., an NVSwitch "
                        "0x068000, an IBM NPU 0x068001)",
                        what, l.tclass));
      }
    }
  }
  const bool any_nvlink =
      !pair_lanes.empty() ||
      std::any_of(switch_lanes.begin(), switch_lanes.end(), [](int v) { return v; }) ||
      std::any_of(cpu_lanes.begin(), cpu_lanes.end(), [](int v) { return v; });
  if (any_nvlink && !gen) {
    r.fail(
        fmt::format("NVLinks on sm {} GPUs, whose NVLink generation dlcalibrate does not know "
                    "(sm 60, 70, 80, 90)",
                    sm));
  }

  // Link types.
  auto latency = [&](const std::string& type, double typical_us) {
    const auto it = base.link_types.find(type);
    const double us = it == base.link_types.end() ? typical_us : it->second.latency.value() * 1e6;
    return fmt::format("\"{:.6g}us\"", us);
  };
  std::map<PcieKind, int> pcie_kinds;
  for (const auto& l : f.pcie) ++pcie_kinds[l.kind];
  auto pcie_type = [&](const PcieKind& k) {
    return pcie_kinds.size() == 1 ? std::string("pcie")
                                  : fmt::format("pcie{}x{}", k.generation(), k.width);
  };
  std::string types;
  std::set<std::string> latency_from_base;
  auto add_type = [&](const std::string& name, double bw, double typical_us,
                      const std::string& why) {
    if (base.link_types.count(name)) latency_from_base.insert(name);
    types += fmt::format("  {}: {{bandwidth: {}, latency: {}}}   # {}\n", name, gbps(bw),
                         latency(name, typical_us), why);
  };
  if (!pair_lanes.empty() ||
      std::any_of(cpu_lanes.begin(), cpu_lanes.end(), [](int v) { return v; })) {
    add_type("nvlink", gen->line_rate, kNvlinkLatencyUs,
             fmt::format("{} line rate per link (sm {})", gen->name, sm));
  }
  if (std::any_of(switch_lanes.begin(), switch_lanes.end(), [](int v) { return v; })) {
    add_type("nvswitch", gen->line_rate, kNvlinkLatencyUs,
             fmt::format("{} line rate per link, GPU to NVSwitch", gen->name));
  }
  for (const auto& [k, count] : pcie_kinds) {
    add_type(pcie_type(k), k.gbps(), kPcieLatencyUs,
             fmt::format("PCIe {:g} GT/s x{} line rate ({} links)", k.gts, k.width, count));
  }
  const InterCpu socket = inter_cpu(f.cpus.front());
  if (f.cpus.size() > 1) {
    add_type(socket.type, socket.gbps, kInterCpuLatencyUs,
             fmt::format("NCCL's {} between CPUs (not a line rate)", socket.constant));
  }

  // Links.
  std::string links;
  if (!pair_lanes.empty()) links += "  # NVLink between GPUs, lanes = links (<nvlink count>)\n";
  for (const auto& [ab, lanes] : pair_lanes) {
    links += fmt::format("  - [gpu{}, gpu{}, nvlink, {}]\n", ab.first, ab.second, lanes);
  }
  std::vector<std::size_t> by_number(f.gpus.size());
  for (std::size_t i = 0; i < f.gpus.size(); ++i) by_number[gpu_number[i]] = i;
  std::string switches;
  if (!nvswitch_chips.empty() ||
      std::any_of(switch_lanes.begin(), switch_lanes.end(), [](int v) { return v; })) {
    switches = "nvswitch0";
    links += fmt::format(
        "  # NVLink to NVSwitch: the {} switch chips the dump names folded into one vertex\n",
        nvswitch_chips.size());
    for (std::size_t n = 0; n < f.gpus.size(); ++n) {
      const auto i = by_number[n];
      if (switch_lanes[i]) {
        links += fmt::format("  - [gpu{}, nvswitch0, nvswitch, {}]\n", n, switch_lanes[i]);
      }
    }
  }
  for (std::size_t n = 0; n < f.gpus.size(); ++n) {
    const auto i = by_number[n];
    if (cpu_lanes[i]) {
      links += fmt::format("  - [gpu{}, cpu{}, nvlink, {}]   # NVLink to the CPU (IBM NPU)\n", n,
                           f.gpus[i].cpu, cpu_lanes[i]);
    }
  }
  links += "  # PCIe tree, device to parent (bus ids from the dump)\n";
  for (const auto& l : f.pcie) {
    links += fmt::format("  - [{}, {}, {}]   # {}\n", name_of(l.child), name_of(l.parent),
                         pcie_type(l.kind), l.busid.empty() ? "no PCI path in the dump" : l.busid);
  }
  if (f.cpus.size() > 1)
    links += "  # CPU to CPU (NUMA domains), every pair as NCCL connects them\n";
  for (std::size_t a = 0; a < f.cpus.size(); ++a) {
    for (std::size_t b = a + 1; b < f.cpus.size(); ++b) {
      links += fmt::format("  - [cpu{}, cpu{}, {}]\n", a, b, socket.type);
    }
  }
  for (std::size_t i = 0; i < f.switches.size(); ++i) {
    switches += fmt::format("{}pcisw{}", switches.empty() ? "" : ", ", i);
  }

  // Where the figures come from.
  const auto& g0 = f.gpus.front();
  std::string nets;
  for (std::size_t i : net_order) {
    const auto& n = f.nets[i];
    // A port whose speed NCCL did not read (no `speed`, or 0: a port that is down) says so.
    nets += fmt::format("{}{} {} ({})", nets.empty() ? "" : ", ", net_name[i], n.name,
                        n.speed_mbps > 0 ? fmt::format("{} Mb/s", n.speed_mbps) : "speed not read");
  }
  std::string description = fmt::format(
      "Node fabric imported from the NCCL topology dump {}: {} GPUs (sm {}), {} NUMA domains, {} "
      "PCIe switches, {} NICs{}{}. Host cores, memory and memory bandwidth are those of {}.",
      fs::path(path).filename().string(), f.gpus.size(), sm, f.cpus.size(), f.switches.size(),
      f.nets.size(), pair_lanes.empty() ? "" : ", NVLink between GPUs",
      nvswitch_chips.empty() ? "" : fmt::format(", {} NVSwitch chips", nvswitch_chips.size()),
      options.base_node);
  std::string source = fmt::format(
      "dlcalibrate import nccl-topo of {} (NCCL topology XML version {}, written by "
      "NCCL_TOPO_DUMP_FILE; format per NVIDIA/nccl src/graph/xml.cc and topo.cc).",
      path, f.version);
  if (options.gpu.empty()) {
    source += fmt::format(
        " GPU model {} inferred from sm {} (PCI device {} at {}); the dump has no model name or "
        "memory size: check it, or name the preset with --gpu.",
        gpu, sm, g0.device, g0.busid);
  } else {
    source += fmt::format(" GPU model {} given with --gpu (the dump says sm {}, PCI device {}).",
                          gpu, sm, g0.device);
  }
  if (gen && any_nvlink) {
    source += fmt::format(
        " NVLink: {} line rate {:g} GB/s per link and direction; NCCL itself plans with {} = {:g} "
        "GB/s (src/graph/topo.h).",
        gen->name, gen->line_rate, gen->nccl_constant, gen->nccl);
  }
  source +=
      " PCIe: link_speed x link_width of each <pci> (its link to the parent) at line rate after "
      "encoding (8b/10b to 5 GT/s, 128b/130b from 8 GT/s).";
  if (f.unknown_speeds) {
    source +=
        fmt::format(" {} PCIe links without a readable speed taken as 8 GT/s, NCCL's fallback.",
                    f.unknown_speeds);
  }
  if (f.unknown_widths) {
    source +=
        fmt::format(" {} PCIe links without a width (0 or none) taken as x16, NCCL's fallback.",
                    f.unknown_widths);
  }
  if (f.cpus.size() > 1) {
    source += fmt::format(
        " Between CPUs: NCCL's {} = {:g} GB/s for {} (ncclTopoGetInterCpuBw, src/graph/topo.cc), "
        "an estimate of GPU traffic across sockets rather than the link's line rate.",
        socket.constant, socket.gbps, cpu_text(f));
  }
  if (!nets.empty()) {
    source += " NIC ports (their speed belongs to the network profile): " + nets + ".";
  }
  if (f.c2c) source += " C2C (NVLink-C2C to the CPU) links in the dump are not imported.";
  source += fmt::format(
      " Link latencies: {} where it has a link type of the same name{}, typical values otherwise "
      "(not measured).",
      options.base_node,
      latency_from_base.empty()
          ? " (none here)"
          : " (" + fmt::format("{}", fmt::join(latency_from_base, ", ")) + ")");

  std::string y = fmt::format("# Generated by dlcalibrate import nccl-topo from {}.\n", path);
  y += "kind: node\n";
  y += "name: " + quoted(out.stem().string()) + "\n";
  y += "extends: " + quoted(reference_from(options.base_node, out_dir)) +
       "   # host cores, memory, memory bandwidth; latencies\n";
  y += folded("description", description);
  y += folded("source", source);
  y += "gpu: " + quoted(reference_from(gpu, out_dir)) + "\n";
  y += fmt::format("gpus: {}\n", f.gpus.size());
  y += "host:\n";
  y += "  cpu: " + quoted(cpu_text(f)) + "\n";
  y += fmt::format("  sockets: {}\n", f.cpus.size());
  y += fmt::format("nics: {}\n", f.nets.size());
  y += "link_types:                        # per lane, per direction\n" + types;
  y += "switches: [" + switches + "]\n";
  for (std::size_t i = 0; i < f.switches.size(); ++i) {
    const auto& s = f.switches[i];
    y += fmt::format("  # pcisw{}: {} (vendor {} device {})\n", i, s.busid, s.vendor, s.device);
  }
  for (std::size_t n = 0; n < f.gpus.size(); ++n) {
    const auto& g = f.gpus[by_number[n]];
    y += fmt::format("  # gpu{}: {} (NVML index {})\n", n, g.busid, g.dev);
  }
  for (std::size_t c = 0; c < f.cpus.size(); ++c) {
    y += fmt::format("  # cpu{}: NUMA node {}\n", c, f.cpus[c].numaid);
  }
  y += "links:\n" + links;
  return y;
}

}  // namespace dlsim::calibrate
