#include "simulator/maxmin.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace dlsim::simulator {

namespace {

// Relative tolerance for "reached its bottleneck in this iteration". Rounding in the running
// subtraction of a link's remaining capacity is a few ulps of the capacity (~1e-16 relative), so
// 1e-12 catches links that tie with the bottleneck without merging genuinely distinct levels.
constexpr double kRelTol = 1e-12;

constexpr double kInf = std::numeric_limits<double>::infinity();

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("max-min solver: " + what);
}

}  // namespace

void MaxMinSolver::validate(const MaxMinInput& in) const {
  const std::size_t flows = in.cap.size();
  if (in.begin.size() != flows + 1) {
    invalid("begin has " + std::to_string(in.begin.size()) + " entries for " +
            std::to_string(flows) + " flows (needs flows+1)");
  }
  if (in.begin[flows] > in.links.size()) {
    invalid("begin ends at " + std::to_string(in.begin[flows]) + " past the " +
            std::to_string(in.links.size()) + " link ids");
  }
  if (!in.weight.empty() && in.weight.size() != flows) {
    invalid("weight has " + std::to_string(in.weight.size()) + " entries for " +
            std::to_string(flows) + " flows");
  }
  const auto num_links = in.capacity.size();
  for (std::size_t f = 0; f < flows; ++f) {
    if (!in.weight.empty() && in.weight[f] < 1) {
      invalid("flow " + std::to_string(f) + " has weight " + std::to_string(in.weight[f]));
    }
    if (in.begin[f] > in.begin[f + 1]) invalid("begin decreases at flow " + std::to_string(f));
    const double c = in.cap[f];
    if (std::isnan(c) || c < 0) invalid("flow " + std::to_string(f) + " has a negative/NaN cap");
    if (in.begin[f] == in.begin[f + 1] && std::isinf(c)) {
      invalid("flow " + std::to_string(f) +
              " crosses no link and has no cap: its rate is infinite");
    }
    for (std::size_t i = in.begin[f]; i < in.begin[f + 1]; ++i) {
      const int l = in.links[i];
      if (l < 0 || static_cast<std::size_t>(l) >= num_links) {
        invalid("flow " + std::to_string(f) + " crosses unknown link " + std::to_string(l));
      }
      const double cl = in.capacity[static_cast<std::size_t>(l)];
      // Infinite capacity would make remaining - share x count NaN; NaN/negative are nonsense.
      if (!std::isfinite(cl) || cl < 0) {
        invalid("link " + std::to_string(l) + " has a negative, infinite or NaN capacity");
      }
    }
  }
}

void MaxMinSolver::solve(const MaxMinInput& in, std::vector<double>& rates) {
  validate(in);  // throws before any buffer is touched, so the all-zero invariant survives
  solve_unchecked(in, rates);
}

void MaxMinSolver::solve_unchecked(const MaxMinInput& in, std::vector<double>& rates) {
  const std::size_t flows = in.cap.size();
  const std::size_t num_links = in.capacity.size();
  rates.assign(flows, 0.0);
  // Growing only: resize to a size already held neither allocates nor clears, and new entries
  // come in as 0 as the invariant requires.
  if (count_.size() < num_links) {
    remaining_.resize(num_links);
    count_.resize(num_links, 0);
    saturated_.resize(num_links, 0);
  }
  active_links_.clear();
  active_flows_.clear();

  // One pass over the routes: count crossings per link and list every link touched.
  double min_cap = kInf;  // smallest cap among unfrozen flows, B/s
  for (std::size_t f = 0; f < flows; ++f) {
    if (in.begin[f] == in.begin[f + 1]) {
      rates[f] = in.cap[f];  // nothing to share: the flow runs at its own limit
      continue;
    }
    active_flows_.push_back(static_cast<int>(f));
    min_cap = std::min(min_cap, in.cap[f]);
    const int w = in.weight.empty() ? 1 : in.weight[f];
    for (std::size_t i = in.begin[f]; i < in.begin[f + 1]; ++i) {
      const auto l = static_cast<std::size_t>(in.links[i]);
      const bool first_crossing = count_[l] == 0;
      count_[l] += w;
      if (first_crossing) {
        remaining_[l] = in.capacity[l];
        active_links_.push_back(static_cast<int>(l));
      }
    }
  }

  // `level` is the common rate of every unfrozen flow (B/s); each link's remaining_ already has
  // level x count_ taken off, so the next link event is at level + min(remaining_ / count_).
  double level = 0.0;
  while (!active_flows_.empty()) {
    // Next event: the link that fills first, or the smallest cap.
    double link_step = kInf;
    int bottleneck = -1;
    for (const int l : active_links_) {
      const auto li = static_cast<std::size_t>(l);
      const double share = remaining_[li] / count_[li];
      if (share < link_step) {
        link_step = share;
        bottleneck = l;
      }
    }
    // Every unfrozen flow crosses at least one (finite) link, so link_step is finite here.
    const bool cap_event = min_cap - level <= link_step;
    const double step = cap_event ? min_cap - level : link_step;
    // Landing exactly on the cap lets `cap <= level` freeze that flow without rounding doubts.
    level = cap_event ? min_cap : level + step;

    for (const int l : active_links_) {
      const auto li = static_cast<std::size_t>(l);
      remaining_[li] -= step * count_[li];
      if (remaining_[li] <= kRelTol * in.capacity[li] || (!cap_event && l == bottleneck)) {
        remaining_[li] = 0.0;
        saturated_[li] = 1;
      }
    }

    // Freeze the flows that hit their cap or cross a full link; the rest keep rising.
    const double cap_limit = level * (1.0 + kRelTol);
    std::size_t kept = 0;
    min_cap = kInf;
    for (const int f : active_flows_) {
      const auto fi = static_cast<std::size_t>(f);
      const std::size_t first = in.begin[fi];
      const std::size_t last = in.begin[fi + 1];
      bool frozen = in.cap[fi] <= cap_limit;
      for (std::size_t i = first; i < last && !frozen; ++i) {
        frozen = saturated_[static_cast<std::size_t>(in.links[i])] != 0;
      }
      if (!frozen) {
        active_flows_[kept++] = f;
        min_cap = std::min(min_cap, in.cap[fi]);
        continue;
      }
      rates[fi] = std::min(level, in.cap[fi]);  // never above its cap, even by the tolerance
      const int w = in.weight.empty() ? 1 : in.weight[fi];
      for (std::size_t i = first; i < last; ++i) count_[static_cast<std::size_t>(in.links[i])] -= w;
    }
    active_flows_.resize(kept);

    // A saturated link lost all its flows just above (each crossed it, so each froze); drop it
    // with every other link no unfrozen flow crosses, restoring its zero entries.
    std::size_t kept_links = 0;
    for (const int l : active_links_) {
      const auto li = static_cast<std::size_t>(l);
      saturated_[li] = 0;
      if (count_[li] > 0) active_links_[kept_links++] = l;
    }
    active_links_.resize(kept_links);
  }
}

}  // namespace dlsim::simulator
