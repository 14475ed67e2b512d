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
    count_.resize(num_links, 0);
    crossings_.resize(num_links, 0);
    link_end_.resize(num_links, 0);
    position_.resize(num_links, 0);
  }
  frozen_.assign(flows, 0);
  active_links_.clear();
  by_cap_.clear();

  // One pass over the routes: count crossings per link, list every link touched, and list the
  // flows with a cap.
  std::size_t unfrozen = 0;
  for (std::size_t f = 0; f < flows; ++f) {
    if (in.begin[f] == in.begin[f + 1]) {
      rates[f] = in.cap[f];  // nothing to share: the flow runs at its own limit
      frozen_[f] = 1;
      continue;
    }
    ++unfrozen;
    if (std::isfinite(in.cap[f])) by_cap_.push_back(static_cast<int>(f));
    const int w = in.weight.empty() ? 1 : in.weight[f];
    for (std::size_t i = in.begin[f]; i < in.begin[f + 1]; ++i) {
      const auto l = static_cast<std::size_t>(in.links[i]);
      if (crossings_[l] == 0) active_links_.push_back(static_cast<int>(l));
      count_[l] += w;
      ++crossings_[l];
    }
  }
  // Each touched link's flows, one entry per crossing (a flow crossing twice is listed twice),
  // and the level at which it fills if every flow it carries keeps rising.
  std::size_t at = 0;
  fill_.resize(active_links_.size());
  for (std::size_t k = 0; k < active_links_.size(); ++k) {
    const auto l = static_cast<std::size_t>(active_links_[k]);
    link_end_[l] = at;
    at += crossings_[l];
    position_[l] = k;
    fill_[k] = in.capacity[l] / count_[l];
  }
  link_flows_.resize(at);
  for (std::size_t f = 0; f < flows; ++f) {
    for (std::size_t i = in.begin[f]; i < in.begin[f + 1]; ++i) {
      const auto l = static_cast<std::size_t>(in.links[i]);
      link_flows_[link_end_[l]++] = static_cast<int>(f);
    }
  }
  std::sort(by_cap_.begin(), by_cap_.end(), [&](int a, int b) {
    return in.cap[static_cast<std::size_t>(a)] < in.cap[static_cast<std::size_t>(b)];
  });
  std::size_t next_cap = 0;  // by_cap_[next_cap..] holds every unfrozen flow with a cap

  // `level` is the common rate of every unfrozen flow (B/s). A link's fill_ stays put while its
  // flows keep rising (what is left of it shrinks as fast as the level grows); when one of them
  // freezes at `level`, the link has (fill - level) x count left for the others.
  double level = 0.0;
  const auto freeze = [&](std::size_t f) {
    frozen_[f] = 1;
    --unfrozen;
    rates[f] = std::min(level, in.cap[f]);  // never above its cap, even by the tolerance
    const int w = in.weight.empty() ? 1 : in.weight[f];
    for (std::size_t i = in.begin[f]; i < in.begin[f + 1]; ++i) {
      const auto l = static_cast<std::size_t>(in.links[i]);
      double& fill = fill_[position_[l]];
      const double left = std::max(0.0, fill - level) * count_[l];
      count_[l] -= w;
      fill = count_[l] > 0 ? level + left / count_[l] : kInf;
    }
  };
  while (unfrozen > 0) {
    while (next_cap < by_cap_.size() && frozen_[static_cast<std::size_t>(by_cap_[next_cap])]) {
      ++next_cap;
    }
    const double min_cap = next_cap < by_cap_.size()
                               ? in.cap[static_cast<std::size_t>(by_cap_[next_cap])]
                               : kInf;  // smallest cap among unfrozen flows, B/s
    // Next event: the link that fills first, or the smallest cap. Every unfrozen flow crosses
    // at least one (finite) link, so min_fill is finite here.
    double min_fill = kInf;
    for (const double fill : fill_) min_fill = std::min(min_fill, fill);
    // Landing exactly on the cap lets `cap <= level` freeze that flow without rounding doubts.
    level = std::min(min_cap, min_fill);
    const double limit = level * (1.0 + kRelTol);

    // Freeze the flows that hit their cap or cross a full link; the rest keep rising.
    for (; next_cap < by_cap_.size(); ++next_cap) {
      const auto f = static_cast<std::size_t>(by_cap_[next_cap]);
      if (in.cap[f] > limit) break;
      if (!frozen_[f]) freeze(f);
    }
    full_.clear();
    for (std::size_t k = 0; k < fill_.size(); ++k) {
      if (fill_[k] <= limit) full_.push_back(active_links_[k]);
    }
    for (const int l : full_) {
      const auto li = static_cast<std::size_t>(l);
      const std::size_t last = link_end_[li];
      for (std::size_t i = last - crossings_[li]; i < last; ++i) {
        const auto f = static_cast<std::size_t>(link_flows_[i]);
        if (!frozen_[f]) freeze(f);
      }
    }

    // A full link lost all its flows just above (each crossed it, so each froze); drop it with
    // every other link no unfrozen flow crosses, restoring its zero entries.
    std::size_t kept = 0;
    for (std::size_t k = 0; k < active_links_.size(); ++k) {
      const int l = active_links_[k];
      const auto li = static_cast<std::size_t>(l);
      if (count_[li] > 0) {
        position_[li] = kept;
        fill_[kept] = fill_[k];
        active_links_[kept++] = l;
      } else {
        crossings_[li] = 0;
      }
    }
    active_links_.resize(kept);
    fill_.resize(kept);
  }
}

}  // namespace dlsim::simulator
