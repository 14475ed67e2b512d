#include "networks/placement.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <stdexcept>

#include "common/hostlist.hpp"

namespace dlsim::networks {
namespace {

const hardware::NodeGroup& group_of(const hardware::ClusterSpec& c, int index, int& local) {
  for (const auto& g : c.groups) {
    if (index < g.count) {
      local = index;
      return g;
    }
    index -= g.count;
  }
  throw std::out_of_range("node index beyond the cluster");
}

}  // namespace

JobNodes with_server_nodes(const hardware::ClusterSpec& cluster, const Placement& placement,
                           int servers) {
  JobNodes out{placement.nodes, {}};
  for (int i = 0; i < cluster.node_count() && static_cast<int>(out.server_slots.size()) < servers;
       ++i) {
    if (std::find(placement.nodes.begin(), placement.nodes.end(), i) != placement.nodes.end()) {
      continue;
    }
    out.server_slots.push_back(static_cast<int>(out.nodes.size()));
    out.nodes.push_back(i);
  }
  return out;
}

const hardware::NodeSpec& node_spec(const hardware::ClusterSpec& c, int index) {
  int local = 0;
  return group_of(c, index, local).node;
}

const std::string& hostname(const hardware::ClusterSpec& c, int index) {
  int local = 0;
  const auto& g = group_of(c, index, local);
  return g.hostnames.at(static_cast<std::size_t>(local));
}

Placement place(const hardware::ClusterSpec& cluster, const PlacementRequest& req) {
  if (req.gpus < 1) fail_at({}, "gpus", fmt::format("must be at least 1, got {}", req.gpus));
  if (req.gpus_per_node && *req.gpus_per_node < 1) {
    fail_at({}, "gpus_per_node", fmt::format("must be at least 1, got {}", *req.gpus_per_node));
  }
  std::vector<int> candidates;
  if (req.nodelist.empty()) {
    for (int i = 0; i < cluster.node_count(); ++i) candidates.push_back(i);
  } else {
    std::vector<std::string> hosts;
    try {
      hosts = expand_hostlist(req.nodelist);
    } catch (const std::invalid_argument& e) {
      fail_at({}, "nodelist", e.what());
    }
    std::map<std::string, int> index;
    std::vector<std::string> all;
    for (int i = 0; i < cluster.node_count(); ++i) {
      index[hostname(cluster, i)] = i;
      all.push_back(hostname(cluster, i));
    }
    for (const auto& h : hosts) {
      const auto it = index.find(h);
      if (it == index.end()) {
        fail_at({}, "nodelist",
                fmt::format("host '{}' is not in cluster '{}' ({} .. {}){}", h, cluster.about.name,
                            all.front(), all.back(), did_you_mean(h, all)));
      }
      if (std::find(candidates.begin(), candidates.end(), it->second) != candidates.end()) {
        fail_at({}, "nodelist", fmt::format("host '{}' is listed twice", h));
      }
      candidates.push_back(it->second);
    }
  }
  Placement p;
  int left = req.gpus;
  for (int node : candidates) {
    if (left == 0) break;
    const int has = node_spec(cluster, node).gpus;
    if (req.gpus_per_node && *req.gpus_per_node > has) {
      fail_at({}, "gpus_per_node",
              fmt::format("{} GPUs per node, but node '{}' has {}", *req.gpus_per_node,
                          hostname(cluster, node), has));
    }
    const int take = std::min(left, req.gpus_per_node.value_or(has));
    const int slot = static_cast<int>(p.nodes.size());
    p.nodes.push_back(node);
    for (int g = 0; g < take; ++g) p.ranks.push_back({slot, g});
    left -= take;
  }
  if (left > 0) {
    int could = 0;
    for (int node : candidates) {
      could += std::min(node_spec(cluster, node).gpus,
                        req.gpus_per_node.value_or(node_spec(cluster, node).gpus));
    }
    fail_at(
        {}, "gpus",
        fmt::format("{} GPUs requested, but {} {} at most {}{}", req.gpus,
                    req.nodelist.empty() ? "cluster '" + cluster.about.name + "'"
                                         : "node list '" + req.nodelist + "'",
                    req.nodelist.empty() ? "has" : "gives", could,
                    req.gpus_per_node ? fmt::format(" at {} per node", *req.gpus_per_node) : ""));
  }
  return p;
}

}  // namespace dlsim::networks
