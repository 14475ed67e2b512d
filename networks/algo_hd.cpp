// Recursive halving and doubling (docs/networks.md, "Halving-doubling"), after Thakur,
// Rabenseifner & Gropp 2005, "Optimization of collective communication operations in MPICH",
// IJHPCA 19(1): allreduce as Rabenseifner's recursive-halving reduce-scatter plus
// recursive-doubling all-gather (sec. 4.5), with the extra ranks of a non-power-of-two count
// folded in before and out after; reduce-scatter and all-gather alone (power-of-two counts);
// binomial-tree broadcast and reduce; pairwise-exchange all-to-all.

#include <fmt/format.h>
#include <algorithm>

#include "networks/algorithms.hpp"

namespace dlsim::networks::detail {
namespace {

int floor_log2(int n) {
  int m = 0;
  while ((2 << m) <= n) ++m;
  return m;
}

class HalvingDoubling : public CollectiveAlgorithm {
 public:
  bool supports(CollectiveOp, const hardware::LibrarySpec&) const override { return true; }

  Schedule schedule(const CollectiveRequest& req, const Communicator& comm) const override {
    Schedule s;
    s.algorithm = "hd";
    const int n = comm.size();
    if (n < 2) return s;
    require_power_of_two(req, n);
    for (const auto& step : steps(req, n)) {
      Phase p;
      p.label = step.label;
      for (const auto& [a, b] : step.pairs) {
        p.transfers.push_back({comm.rank_vertex[a], comm.rank_vertex[b], step.bytes, -1});
      }
      if (step.reduce) {
        p.reduce_bytes = reduce_traffic(step.bytes);
        p.reduce_bandwidth = gpu_memory_bandwidth(comm);
      }
      s.phases.push_back(std::move(p));
    }
    return s;
  }

  CollectiveCost cost(const CollectiveRequest& req, const Communicator& comm) const override {
    CollectiveCost c;
    c.algorithm = "hd";
    const int n = comm.size();
    if (n < 2) {
      c.formula = "0 (one rank)";
      return c;
    }
    // Each step: its slowest route, with the sharing factor L of the step's own transfers.
    schedule_cost(*this, req, comm, c);
    c.why = "recursive halving and doubling (MPICH), point to point";
    const char* formula = "";
    switch (req.op) {
      case CollectiveOp::kAllReduce:
        formula = "sum over 2 log2 p + 2[r>0] steps of (a + L S_j B), p = 2^floor(log2 n), r = n-p";
        break;
      case CollectiveOp::kReduceScatter:
      case CollectiveOp::kAllGather:
        formula = "log2(n) a + (n-1)/n L S B";
        break;
      case CollectiveOp::kBroadcast:
      case CollectiveOp::kReduce:
        formula = "ceil(log2 n)(a + L S B)";
        break;
      case CollectiveOp::kAllToAll:
        formula = "(n-1)(a + L S/n B)";
        break;
    }
    c.formula = formula;
    return c;
  }

 private:
  struct Step {
    std::string label;
    std::vector<std::pair<int, int>> pairs;  // (sender, receiver)
    double bytes = 0;
    bool reduce = false;
  };

  static void require_power_of_two(const CollectiveRequest& req, int n) {
    const bool pow2 = (n & (n - 1)) == 0;
    if (!pow2 && (req.op == CollectiveOp::kReduceScatter || req.op == CollectiveOp::kAllGather ||
                  req.op == CollectiveOp::kAllToAll)) {
      fail_at({}, "gpus",
              fmt::format("hd {} needs a power-of-two number of ranks, got {}; use ring",
                          to_string(req.op), n));
    }
  }

  static std::vector<Step> steps(const CollectiveRequest& req, int n) {
    const double S = req.size.value();
    std::vector<Step> out;
    const int m = floor_log2(n);
    const int p = 1 << m;
    const int r = n - p;
    auto exchange = [&](const std::vector<int>& members, int distance, double bytes, bool reduce,
                        const std::string& label) {
      Step st{label, {}, bytes, reduce};
      for (std::size_t i = 0; i < members.size(); ++i) {
        const std::size_t partner = i ^ static_cast<std::size_t>(distance);
        st.pairs.emplace_back(members[i], members[partner]);
      }
      out.push_back(std::move(st));
    };
    switch (req.op) {
      case CollectiveOp::kAllReduce: {
        // Ranks 0..2r-1 pair up; the even one of each pair hands its data to the odd one and
        // sits out. The p remaining ranks run the power-of-two algorithm.
        std::vector<int> members;
        Step pre{"fold in extra ranks", {}, S, true};
        Step post{"fold out extra ranks", {}, S, false};
        for (int i = 0; i < n; ++i) {
          if (i < 2 * r) {
            if (i % 2 == 1) {
              members.push_back(i);
              pre.pairs.emplace_back(i - 1, i);
              post.pairs.emplace_back(i, i - 1);
            }
          } else {
            members.push_back(i);
          }
        }
        if (r > 0) out.push_back(pre);
        for (int k = 0; k < m; ++k) {
          exchange(members, p >> (k + 1), S / (2 << k), true, fmt::format("halving {}", k + 1));
        }
        for (int k = m - 1; k >= 0; --k) {
          exchange(members, p >> (k + 1), S / (2 << k), false, fmt::format("doubling {}", m - k));
        }
        if (r > 0) out.push_back(post);
        break;
      }
      case CollectiveOp::kReduceScatter: {
        std::vector<int> all(n);
        for (int i = 0; i < n; ++i) all[i] = i;
        for (int k = 0; k < m; ++k) {
          exchange(all, n >> (k + 1), S / (2 << k), true, fmt::format("halving {}", k + 1));
        }
        break;
      }
      case CollectiveOp::kAllGather: {
        std::vector<int> all(n);
        for (int i = 0; i < n; ++i) all[i] = i;
        for (int k = m - 1; k >= 0; --k) {
          exchange(all, n >> (k + 1), S / (2 << k), false, fmt::format("doubling {}", m - k));
        }
        break;
      }
      case CollectiveOp::kBroadcast:
      case CollectiveOp::kReduce: {
        // Binomial tree over ranks relative to the root: in round k, ranks below 2^k send to
        // rank + 2^k (broadcast); reduce runs the rounds backwards towards the root.
        const bool reduce = req.op == CollectiveOp::kReduce;
        std::vector<Step> rounds;
        for (int dist = 1; dist < n; dist <<= 1) {
          Step st{fmt::format("binomial round {}", rounds.size() + 1), {}, S, reduce};
          for (int rel = 0; rel < dist && rel + dist < n; ++rel) {
            const int a = (rel + req.root) % n;
            const int b = (rel + dist + req.root) % n;
            if (reduce) {
              st.pairs.emplace_back(b, a);
            } else {
              st.pairs.emplace_back(a, b);
            }
          }
          rounds.push_back(std::move(st));
        }
        if (reduce) std::reverse(rounds.begin(), rounds.end());
        out.insert(out.end(), rounds.begin(), rounds.end());
        break;
      }
      case CollectiveOp::kAllToAll: {
        for (int k = 1; k < n; ++k) {
          Step st{fmt::format("pairwise exchange {}", k), {}, S / n, false};
          for (int i = 0; i < n; ++i) st.pairs.emplace_back(i, i ^ k);
          out.push_back(std::move(st));
        }
        break;
      }
    }
    return out;
  }
};

}  // namespace

void register_halving_doubling(AlgorithmRegistry& r) {
  r.add("hd", "recursive halving-doubling (Rabenseifner; Thakur, Rabenseifner & Gropp 2005)",
        [] { return std::make_unique<HalvingDoubling>(); });
}

}  // namespace dlsim::networks::detail
