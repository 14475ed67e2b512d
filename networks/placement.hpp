#pragma once
// Which GPUs of a cluster a job runs on. Ranks are numbered node by node: the GPUs of the job's
// first node are ranks 0..k-1, and so on, as `srun`/`mpirun` number them with block
// distribution.

#include <optional>
#include <string>
#include <vector>

#include "hardware/profile.hpp"

namespace dlsim::networks {

struct RankLocation {
  int node = 0;  // index into Placement::nodes
  int gpu = 0;   // GPU index inside that node
};

struct Placement {
  std::vector<int> nodes;  // cluster node indices the job uses, in rank order
  std::vector<RankLocation> ranks;
};

struct PlacementRequest {
  int gpus = 0;
  std::optional<int> gpus_per_node;  // default: every GPU of each node (packed)
  std::string nodelist;              // Slurm host list; default: the cluster's first nodes
};

// Packs `gpus` GPUs onto the cluster's nodes in order (or onto `nodelist`), `gpus_per_node`
// per node (the last node may hold fewer). Too many GPUs, an unknown host or a per-node count
// above what a node has is an InputError naming the flag.
Placement place(const hardware::ClusterSpec& cluster, const PlacementRequest& request);

// The job's nodes followed by `servers` more for dedicated parameter servers: the first cluster
// nodes holding no worker. `server_slots` are their positions in `nodes`.
struct JobNodes {
  std::vector<int> nodes;
  std::vector<int> server_slots;
};
JobNodes with_server_nodes(const hardware::ClusterSpec& cluster, const Placement& placement,
                           int servers);

// The node spec of cluster node `index` (groups are laid out in order).
const hardware::NodeSpec& node_spec(const hardware::ClusterSpec& cluster, int index);
const std::string& hostname(const hardware::ClusterSpec& cluster, int index);

}  // namespace dlsim::networks
