// Tree algorithms (docs/networks.md, "Trees"): NCCL 2.4's double binary tree for allreduce
// (Sanders, Speck & Traeff 2009, "Two-tree algorithms for full bandwidth broadcast, reduction
// and scan", Parallel Computing 35(12); NCCL 2.4 release notes), and one pipelined binary tree
// for broadcast and reduce. Nodes form the binary tree; inside a node the GPUs form a chain
// hanging from the node's first rank, as in NCCL.

#include <fmt/format.h>
#include <algorithm>

#include "networks/algorithms.hpp"

namespace dlsim::networks::detail {
namespace {

// NCCL's in-order binary tree over 0..n-1 (src/graph/trees.cc): rank 0 is the root with one
// child; odd ranks are leaves. parent[r] is -1 for the root.
std::vector<int> btree_parents(int n) {
  std::vector<int> parent(n, -1);
  for (int rank = 1; rank < n; ++rank) {
    int bit = 1;
    while (bit < n && !(bit & rank)) bit <<= 1;
    int up = (rank ^ bit) | (bit << 1);
    if (up >= n) up = rank ^ bit;
    parent[rank] = up;
  }
  return parent;
}

// The second tree: mirrored when n is even, shifted by one when odd (NCCL), so that leaves of
// one tree are inner nodes of the other.
std::vector<int> second_tree(const std::vector<int>& first) {
  const int n = static_cast<int>(first.size());
  std::vector<int> parent(n, -1);
  for (int r = 0; r < n; ++r) {
    if (first[r] < 0) continue;
    if (n % 2 == 0) {
      parent[n - 1 - r] = n - 1 - first[r];
    } else {
      parent[(r + 1) % n] = (first[r] + 1) % n;
    }
  }
  return parent;
}

struct RankTree {
  std::vector<int> parent;  // per rank, -1 at the root
  int depth = 0;            // edges from the root to the deepest rank
  int max_degree = 0;       // most tree neighbours of one rank
  int max_children = 0;
};

// Expands a tree over nodes into one over ranks: each node's ranks form a chain from its first
// rank; a node's parent in the node tree is the parent of its first rank.
RankTree expand(const Communicator& comm, const std::vector<int>& node_parent) {
  const auto nodes = comm.ranks_by_node();
  RankTree t;
  t.parent.assign(comm.size(), -1);
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    const auto& ranks = nodes[j];
    if (node_parent[j] >= 0) t.parent[ranks.front()] = nodes[node_parent[j]].front();
    for (std::size_t i = 1; i < ranks.size(); ++i) t.parent[ranks[i]] = ranks[i - 1];
  }
  std::vector<int> children(comm.size(), 0);
  for (int r = 0; r < comm.size(); ++r) {
    int d = 0;
    for (int v = r; t.parent[v] >= 0; v = t.parent[v]) ++d;
    t.depth = std::max(t.depth, d);
    if (t.parent[r] >= 0) ++children[t.parent[r]];
  }
  for (int r = 0; r < comm.size(); ++r) {
    t.max_children = std::max(t.max_children, children[r]);
    t.max_degree = std::max(t.max_degree, children[r] + (t.parent[r] >= 0 ? 1 : 0));
  }
  return t;
}

// Nodes reordered so that the root's node comes first (broadcast/reduce root).
std::vector<int> rotated_parents(int nodes, int root_node) {
  auto p = btree_parents(nodes);
  std::vector<int> out(nodes, -1);
  for (int i = 0; i < nodes; ++i) {
    if (p[i] >= 0) out[(i + root_node) % nodes] = (p[i] + root_node) % nodes;
  }
  return out;
}

void add_edges(Phase& p, const Communicator& comm, const RankTree& t, double bytes, bool up,
               bool down) {
  for (int r = 0; r < comm.size(); ++r) {
    if (t.parent[r] < 0) continue;
    const int child = comm.rank_vertex[r];
    const int parent = comm.rank_vertex[t.parent[r]];
    if (up) p.transfers.push_back({child, parent, bytes, -1});
    if (down) p.transfers.push_back({parent, child, bytes, -1});
  }
}

class Tree : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp op) const override {
    return op == CollectiveOp::kAllReduce || op == CollectiveOp::kBroadcast ||
           op == CollectiveOp::kReduce;
  }

  struct Plan {
    std::vector<RankTree> trees;
    std::int64_t chunks = 1;
    double chunk = 0;        // bytes per chunk per tree
    std::int64_t steps = 0;  // pipeline length
    int load = 1;            // most chunks one rank sends (and receives) per step
  };

  Plan plan(const CollectiveRequest& req, const Communicator& comm,
            const hardware::ProtocolSpec& proto) const {
    Plan p;
    const int nodes = comm.node_count();
    const double S = req.size.value();
    if (req.op == CollectiveOp::kAllReduce) {
      const auto first = btree_parents(nodes);
      p.trees.push_back(expand(comm, first));
      p.trees.push_back(expand(comm, second_tree(first)));
      p.chunks = chunks(S / 2, proto);
      p.chunk = S / (2.0 * static_cast<double>(p.chunks));
      const int depth = std::max(p.trees[0].depth, p.trees[1].depth);
      // Each chunk climbs to the root and comes back down: k - 1 + 2 depth steps.
      p.steps = p.chunks - 1 + 2 * depth;
      std::vector<int> degree(comm.size(), 0);
      for (const auto& t : p.trees) {
        for (int r = 0; r < comm.size(); ++r) {
          if (t.parent[r] < 0) continue;
          ++degree[r];
          ++degree[t.parent[r]];
        }
      }
      p.load = *std::max_element(degree.begin(), degree.end());
    } else {
      const int root_node = comm.rank_slot[req.root];
      auto t = expand(comm, rotated_parents(nodes, root_node));
      // The tree's root is the first rank of the root's node (the chain head).
      p.trees.push_back(t);
      p.chunks = chunks(S, proto);
      p.chunk = S / static_cast<double>(p.chunks);
      p.steps = p.chunks - 1 + t.depth;
      p.load = std::max(1, t.max_children);
    }
    return p;
  }

  Schedule schedule(const CollectiveRequest& req, const Communicator& comm,
                    const hardware::ProtocolSpec& proto) const override {
    Schedule s;
    s.algorithm = "tree";
    if (comm.size() < 2) return s;
    check_root(req, comm);
    const auto p = plan(req, comm, proto);
    s.channels = static_cast<int>(p.trees.size());
    // Every tree edge busy in every step: the pipeline's steady state, also charged to its
    // fill and drain steps.
    Phase phase;
    const bool allreduce = req.op == CollectiveOp::kAllReduce;
    for (const auto& t : p.trees) {
      add_edges(phase, comm, t, p.chunk, allreduce || req.op == CollectiveOp::kReduce,
                allreduce || req.op == CollectiveOp::kBroadcast);
    }
    phase.label = allreduce ? "pipelined reduce + broadcast (two trees)"
                            : fmt::format("pipelined {}", to_string(req.op));
    phase.repeat = p.steps;
    if (req.op != CollectiveOp::kBroadcast) {
      phase.reduce_bytes = reduce_traffic(p.chunk, std::max(1, max_children(p)));
      phase.reduce_bandwidth = gpu_memory_bandwidth(comm);
    }
    s.phases.push_back(std::move(phase));
    return s;
  }

  ClosedForm closed_form(const CollectiveRequest& req, const Communicator& comm,
                         const hardware::ProtocolSpec& proto) const override {
    const double base = proto.base_latency.value();
    if (comm.size() < 2) return {Seconds(base), "b (one rank)"};
    // L: the tree edges one rank serves in a step share its links (the step's own transfers).
    const Seconds t = closed_form_time(comm, schedule(req, comm, proto), proto);
    if (req.op == CollectiveOp::kAllReduce) {
      return {t, "b + (k-1+2D)(a + max(L S/(2k) B, (m+2) S/(2k) G))"};
    }
    return {t, req.op == CollectiveOp::kReduce ? "b + (k-1+D)(a + max(L S/k B, (m+2) S/k G))"
                                               : "b + (k-1+D)(a + L S/k B)"};
  }

 private:
  static int max_children(const Plan& p) {
    int m = 0;
    for (const auto& t : p.trees) m = std::max(m, t.max_children);
    return m;
  }
  static void check_root(const CollectiveRequest& req, const Communicator& comm) {
    if (req.root < 0 || req.root >= comm.size()) {
      fail_at({}, "--root", fmt::format("rank {} is not in 0..{}", req.root, comm.size() - 1));
    }
  }
};

}  // namespace

void register_tree(AlgorithmRegistry& r) {
  r.add("tree", "double binary tree allreduce (NCCL 2.4); pipelined binary tree broadcast/reduce",
        [] { return std::make_unique<Tree>(); });
}

}  // namespace dlsim::networks::detail
