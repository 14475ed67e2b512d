#include "hardware/profile.hpp"

namespace dlsim::hardware {

FlopRate GpuSpec::peak_for(Precision p) const {
  const auto it = peak.find(std::string(to_string(p)));
  return it != peak.end() ? it->second : peak.at("fp32");
}

const std::vector<std::string>& topology_kinds() {
  static const std::vector<std::string> kinds = {"single_switch", "fat_tree", "dragonfly", "cloud"};
  return kinds;
}

const std::vector<std::string>& cpu_generations(const std::string& vendor) {
  static const std::vector<std::string> intel = {"broadwell", "skylake", "sapphire-rapids",
                                                 "emerald-rapids"};
  static const std::vector<std::string> amd = {"zen2", "zen3", "zen4", "zen5"};
  static const std::vector<std::string> none;
  if (vendor == "intel") return intel;
  if (vendor == "amd") return amd;
  return none;
}

std::optional<InterCpuBandwidth> nccl_inter_cpu_bandwidth(const HostSpec& host) {
  // ncclTopoGetInterCpuBw: Intel by model (Broadwell and older BDW_QPI_BW, Skylake to Ice Lake
  // SKL_QPI_BW, Sapphire Rapids SRP_QPI_BW, Emerald and Granite Rapids ERP_QPI_BW), AMD by
  // family (Zen 1-2 AMD_ZEN12_BW, Zen 3-4 AMD_ZEN34_BW, Zen 5 AMD_ZEN5_BW), ARM_BW, P9_BW.
  const auto gb = [](double v, const char* name) {
    return InterCpuBandwidth{Bandwidth{v * 1e9}, name};
  };
  if (host.vendor == "arm") return gb(6, "ARM_BW");
  if (host.vendor == "power") return gb(32, "P9_BW");
  const auto& g = host.generation;
  if (g == "broadwell") return gb(6, "BDW_QPI_BW");
  if (g == "skylake") return gb(10, "SKL_QPI_BW");
  if (g == "sapphire-rapids") return gb(22, "SRP_QPI_BW");
  if (g == "emerald-rapids") return gb(40, "ERP_QPI_BW");
  if (g == "zen2") return gb(16, "AMD_ZEN12_BW");
  if (g == "zen3" || g == "zen4") return gb(24, "AMD_ZEN34_BW");
  if (g == "zen5") return gb(32, "AMD_ZEN5_BW");
  return std::nullopt;
}

const std::vector<std::string>& profile_kinds() {
  static const std::vector<std::string> kinds = {"gpu", "node", "network", "library", "cluster"};
  return kinds;
}

const ProtocolSpec* LibrarySpec::protocol(std::string_view name) const {
  for (const auto& p : protocols) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

int ClusterSpec::node_count() const {
  int n = 0;
  for (const auto& g : groups) n += g.count;
  return n;
}

int ClusterSpec::gpu_count() const {
  int n = 0;
  for (const auto& g : groups) n += g.count * g.node.gpus;
  return n;
}

}  // namespace dlsim::hardware
