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
