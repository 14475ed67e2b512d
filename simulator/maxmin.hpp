#pragma once
// Max-min fair sharing of link bandwidth among concurrent flows, by progressive filling.
//
// Contract: every flow's rate rises from 0 at the same speed; a flow stops rising ("freezes")
// when it reaches its own cap or when a link it crosses is full. The result is the unique
// max-min fair allocation: no link carries more than its capacity, and every flow is either at
// its cap or crosses a saturated link on which no other flow gets more than it. A flow that
// crosses the same link twice loads it twice. Rates and capacities are in B/s.
//
// Reference: D. Bertsekas and R. Gallager, Data Networks, 2nd ed., Prentice Hall 1992,
// section 6.5.2 (max-min fairness, the progressive filling algorithm); the same model as
// SimGrid's lmm/maxmin solver with all weights equal to 1.

#include <cstddef>
#include <span>
#include <vector>

namespace dlsim::simulator {

// Flows over capacitated links. Flow f crosses links[begin[f] .. begin[f+1]) (link ids index
// `capacity`), and may be limited on its own by cap[f] (B/s; +infinity for none).
// Flow f may stand for weight[f] identical flows (same links, same cap), which all get the same
// rate: the solution is that of the flows listed one by one (empty `weight`: 1 each).
struct MaxMinInput {
  std::span<const double> capacity;    // B/s per link
  std::span<const int> links;          // concatenated link ids of every flow
  std::span<const std::size_t> begin;  // size flows+1
  std::span<const double> cap;         // size flows
  std::span<const int> weight = {};    // size flows, each >= 1, or empty
};

class MaxMinSolver {
 public:
  // Fills rates (B/s, one per flow). A flow with no links gets its cap (which must then be finite,
  // else std::invalid_argument). Reuses internal buffers between calls: no allocation in steady
  // state.
  //
  // Also throws std::invalid_argument, before changing anything, when begin does not have
  // flows+1 non-decreasing entries within `links`, a link id is out of range, a link used by a
  // flow has a negative, infinite or NaN capacity, a cap is negative or NaN, or `weight` is
  // neither empty nor one positive entry per flow.
  //
  // Cost: O(iterations x links still in use + F log F + the routes' length): a flow is visited
  // when it freezes (through the links it crosses), not at every iteration; links no flow
  // crosses are never visited. An iteration freezes every flow whose bottleneck is reached
  // within a relative 1e-12 of the same level, so symmetric problems finish in one iteration.
  void solve(const MaxMinInput& in, std::vector<double>& rates);
  // The same without the checks, for a caller that builds the input itself from valid parts
  // (FlowNetwork: interned routes over the topology's links, caps it set); the checks cost as
  // much as a symmetric solve.
  void solve_unchecked(const MaxMinInput& in, std::vector<double>& rates);

 private:
  void validate(const MaxMinInput& in) const;

  // Per link, indexed by link id and sized to the largest `capacity` seen. Between calls every
  // entry of count_ and crossings_ is 0, so a call only touches the links its flows cross.
  std::vector<int> count_;             // crossings by unfrozen flows, weighted
  std::vector<int> crossings_;         // crossings by every flow of this call, one per flow
  std::vector<std::size_t> link_end_;  // where the link's flows end in link_flows_
  std::vector<std::size_t> position_;  // the link's index in active_links_
  std::vector<int> link_flows_;        // each touched link's flows, link after link
  // Per link still crossed by an unfrozen flow.
  std::vector<int> active_links_;  // its id
  std::vector<double> fill_;       // the level (B/s) at which it is full
  std::vector<int> full_;          // links found full in the current iteration
  std::vector<int> by_cap_;        // the flows with a finite cap, by cap
  std::vector<char> frozen_;       // per flow
};

}  // namespace dlsim::simulator
