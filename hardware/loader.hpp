#pragma once
// Loading hardware profiles: a preset name (compiled in from hardware/presets) or a YAML file,
// with `extends:` resolved and every field checked (docs/hardware-format.md).

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/embedded.hpp"
#include "hardware/profile.hpp"

namespace dlsim::hardware {

GpuSpec load_gpu(const std::string& name_or_path);
NodeSpec load_node(const std::string& name_or_path);
NetworkSpec load_network(const std::string& name_or_path);
LibrarySpec load_library(const std::string& name_or_path);
ClusterSpec load_cluster(const std::string& name_or_path);
// A cluster with another collective library than its own (a preset name or a file), when
// `library` is given.
ClusterSpec load_cluster(const std::string& name_or_path,
                         const std::optional<std::string>& library);
// ... and on another network than its own (a preset name or a file), when `network` is given.
ClusterSpec load_cluster(const std::string& name_or_path, const std::optional<std::string>& library,
                         const std::optional<std::string>& network);

// An InputError naming `field` (the flag or key that gave `ref`) unless `ref` is a preset of
// `kind` ("cluster", "library", "network", ...) or an existing file: what load_* would refuse
// first, said about the field that holds it.
void check_reference(const std::string& ref, std::string_view kind, std::string_view field);

using AnySpec = std::variant<GpuSpec, NodeSpec, NetworkSpec, LibrarySpec, ClusterSpec>;

// A profile of any kind: a file (its `kind:` decides) or a preset name, looked up in `kind`
// when given, else in every kind (a name used by two kinds must then be qualified).
AnySpec load_any(const std::string& name_or_path, const std::string& kind = "");

struct PresetInfo {
  std::string kind;  // gpu, node, network, library, cluster
  std::string name;
  std::string description;
  std::string path;
};
std::vector<PresetInfo> list_presets();

// The preset files compiled into the binary ("gpus/v100-sxm2-16gb", ...).
const std::vector<EmbeddedFile>& presets();

}  // namespace dlsim::hardware
