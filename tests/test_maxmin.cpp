#include <doctest/doctest.h>

#include "approx.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "simulator/maxmin.hpp"

using dlsim::simulator::MaxMinInput;
using dlsim::simulator::MaxMinSolver;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A problem in owning form: routes as lists of link ids, flattened for MaxMinInput on demand.
struct Problem {
  Problem() = default;
  Problem(std::vector<double> capacity_in, std::vector<std::vector<int>> routes_in,
          std::vector<double> cap_in = {})
      : capacity(std::move(capacity_in)), routes(std::move(routes_in)), cap(std::move(cap_in)) {}

  std::vector<double> capacity;
  std::vector<std::vector<int>> routes;
  std::vector<double> cap;  // empty: every flow uncapped

  std::vector<int> links;
  std::vector<std::size_t> begin;
  std::vector<double> caps;

  MaxMinInput input() {
    links.clear();
    begin.assign(1, 0);
    for (const auto& r : routes) {
      links.insert(links.end(), r.begin(), r.end());
      begin.push_back(links.size());
    }
    caps = cap.empty() ? std::vector<double>(routes.size(), kInf) : cap;
    return {capacity, links, begin, caps};
  }
};

std::vector<double> solve(Problem& p) {
  MaxMinSolver solver;
  std::vector<double> rates;
  solver.solve(p.input(), rates);
  return rates;
}

doctest::Approx exact(double v) { return dlsim_test::approx(v).epsilon(1e-12); }

}  // namespace

TEST_CASE("one_link_is_split_equally_among_its_flows") {
  Problem p{{9e9}, {{0}, {0}, {0}}};
  const auto r = solve(p);
  REQUIRE(r.size() == 3);
  for (const double x : r) CHECK(x == exact(3e9));
}

TEST_CASE(
    "textbook_example_flows_on_the_tightest_link_freeze_first_and_the_rest_take_the_leftover") {
  // Bertsekas & Gallager section 6.5.2 shape, all capacities 1 B/s:
  //   link 0 is crossed by flows 0, 1, 2; link 1 by flows 0 and 3; link 2 by flow 0 alone.
  // Progressive filling: the level rises until the first link fills. Fair shares are
  // link 0: 1/3, link 1: 1/2, link 2: 1/1, so link 0 fills at level 1/3 and freezes flows 0, 1, 2
  // at 1/3. Link 1 then has 1 - 1/3 = 2/3 left for flow 3 alone (level 1/3 so far, +1/3 more),
  // so flow 3 rises to 2/3, filling link 1. Link 2 carries only 1/3: not a bottleneck.
  // Answer: 1/3, 1/3, 1/3, 2/3.
  Problem p{{1, 1, 1}, {{2, 0, 1}, {0}, {0}, {1}}};
  const auto r = solve(p);
  CHECK(r[0] == exact(1.0 / 3));
  CHECK(r[1] == exact(1.0 / 3));
  CHECK(r[2] == exact(1.0 / 3));
  CHECK(r[3] == exact(2.0 / 3));
}

TEST_CASE("a_flow_capped_below_its_fair_share_leaves_the_rest_to_the_others") {
  // C = 10: the fair share 10/3 exceeds flow 0's cap of 2, so it freezes at 2 and the other two
  // split the remaining 8.
  Problem p{{10}, {{0}, {0}, {0}}, {2, kInf, kInf}};
  const auto r = solve(p);
  CHECK(r[0] == exact(2));
  CHECK(r[1] == exact(4));
  CHECK(r[2] == exact(4));
}

TEST_CASE("parking_lot_long_flow_and_each_short_flow_get_half_of_every_link") {
  // k links of capacity C in a row; the long flow crosses all of them, short flow i only link i.
  // Every link has two flows, so all fill together at C/2.
  constexpr int k = 5;
  constexpr double c = 100e9;
  Problem p;
  p.capacity.assign(k, c);
  p.routes.push_back({});
  for (int i = 0; i < k; ++i) {
    p.routes[0].push_back(i);
    p.routes.push_back({i});
  }
  const auto r = solve(p);
  REQUIRE(r.size() == k + 1);
  for (const double x : r) CHECK(x == exact(c / 2));
}

TEST_CASE("a_flow_crossing_a_link_twice_loads_it_twice") {
  // Link 0 (12 B/s): flow 0 crosses it twice, flow 1 once: 3 crossings at level 4.
  Problem p{{12}, {{0, 0}, {0}}};
  const auto r = solve(p);
  CHECK(r[0] == exact(4));
  CHECK(r[1] == exact(4));
}

TEST_CASE("random_instance_is_feasible_and_every_flow_is_bottlenecked") {
  std::mt19937 rng(20240611);
  std::uniform_real_distribution<double> capacity_dist(1e9, 100e9);
  std::uniform_int_distribution<int> link_dist(0, 199);
  std::uniform_int_distribution<int> length_dist(1, 6);
  std::uniform_real_distribution<double> cap_dist(1e6, 200e6);
  std::bernoulli_distribution capped(0.2);

  Problem p;
  for (int l = 0; l < 200; ++l) p.capacity.push_back(capacity_dist(rng));
  for (int f = 0; f < 1000; ++f) {
    std::vector<int> route;
    const int n = length_dist(rng);
    for (int i = 0; i < n; ++i) route.push_back(link_dist(rng));  // repeats allowed
    p.routes.push_back(route);
    p.cap.push_back(capped(rng) ? cap_dist(rng) : kInf);
  }
  MaxMinSolver solver;
  std::vector<double> r;
  solver.solve(p.input(), r);
  REQUIRE(r.size() == 1000);

  // Load and largest flow rate per link, counting a flow once per crossing.
  std::vector<double> load(200, 0.0);
  std::vector<double> max_rate(200, 0.0);
  for (std::size_t f = 0; f < r.size(); ++f) {
    CHECK(r[f] > 0);
    CHECK(r[f] <= p.cap[f]);
    for (const int l : p.routes[f]) {
      const auto li = static_cast<std::size_t>(l);
      load[li] += r[f];
      max_rate[li] = std::max(max_rate[li], r[f]);
    }
  }
  for (std::size_t l = 0; l < 200; ++l) CHECK(load[l] <= p.capacity[l] * (1 + 1e-9));

  // Max-min optimality: each flow is at its cap, or crosses a full link on which it is largest.
  int at_cap = 0;
  int on_link = 0;
  for (std::size_t f = 0; f < r.size(); ++f) {
    const bool capped_here = r[f] >= p.cap[f] * (1 - 1e-9);
    const bool link_bottleneck = std::any_of(p.routes[f].begin(), p.routes[f].end(), [&](int l) {
      const auto li = static_cast<std::size_t>(l);
      return load[li] >= p.capacity[li] * (1 - 1e-9) && r[f] >= max_rate[li] * (1 - 1e-9);
    });
    at_cap += capped_here ? 1 : 0;
    on_link += link_bottleneck ? 1 : 0;
    CHECK((capped_here || link_bottleneck));
  }
  // Both kinds of bottleneck occur, so the test exercises cap and link events alike.
  CHECK(at_cap > 0);
  CHECK(on_link > 0);

  // Reusing the solver on a different, smaller problem and back gives identical answers: the
  // buffers it keeps between calls carry no state.
  Problem small{{10}, {{0}, {0}}};
  std::vector<double> r_small;
  solver.solve(small.input(), r_small);
  CHECK(r_small[0] == exact(5));
  std::vector<double> again;
  solver.solve(p.input(), again);
  CHECK(again == r);
}

TEST_CASE("a_weighted_flow_gets_what_each_of_its_identical_flows_would") {
  // Weight w stands for w flows on the same links with the same cap: the random instance
  // above, its flows listed once with a weight of 1-4 and again repeated that many times,
  // gives the same rate to every copy.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> capacity_dist(1e9, 100e9);
  std::uniform_int_distribution<int> link_dist(0, 49);
  std::uniform_int_distribution<int> length_dist(1, 4);
  std::uniform_int_distribution<int> weight_dist(1, 4);
  std::uniform_real_distribution<double> cap_dist(1e8, 5e9);
  std::bernoulli_distribution capped(0.2);
  Problem once;
  Problem repeated;
  std::vector<int> weight;
  for (int l = 0; l < 50; ++l) once.capacity.push_back(capacity_dist(rng));
  repeated.capacity = once.capacity;
  for (int f = 0; f < 300; ++f) {
    std::vector<int> route;
    const int n = length_dist(rng);
    for (int i = 0; i < n; ++i) route.push_back(link_dist(rng));
    const double cap = capped(rng) ? cap_dist(rng) : kInf;
    const int w = weight_dist(rng);
    once.routes.push_back(route);
    once.cap.push_back(cap);
    weight.push_back(w);
    for (int k = 0; k < w; ++k) {
      repeated.routes.push_back(route);
      repeated.cap.push_back(cap);
    }
  }
  MaxMinSolver solver;
  std::vector<double> weighted;
  auto in = once.input();
  in.weight = weight;
  solver.solve(in, weighted);
  const auto each = solve(repeated);
  std::size_t k = 0;
  for (std::size_t f = 0; f < weighted.size(); ++f) {
    for (int c = 0; c < weight[f]; ++c, ++k) CHECK(each[k] == exact(weighted[f]));
  }
  CHECK(k == each.size());
  // A weight list of the wrong length, or a weight below 1, is refused.
  in.weight = std::span<const int>(weight.data(), 2);
  CHECK_THROWS_AS(solver.solve(in, weighted), std::invalid_argument);
  weight[3] = 0;
  in.weight = weight;
  CHECK_THROWS_AS(solver.solve(in, weighted), std::invalid_argument);
}

TEST_CASE("a_flow_with_no_links_runs_at_its_cap_and_without_one_is_rejected") {
  Problem capped{{}, {{}}, {7}};
  CHECK(solve(capped)[0] == exact(7));
  Problem unbounded{{}, {{}}};
  CHECK_THROWS_AS(solve(unbounded), std::invalid_argument);
}

TEST_CASE("malformed_input_is_rejected") {
  Problem unknown_link{{1}, {{1}}};
  CHECK_THROWS_AS(solve(unknown_link), std::invalid_argument);
  Problem negative_capacity{{-1}, {{0}}};
  CHECK_THROWS_AS(solve(negative_capacity), std::invalid_argument);
  MaxMinSolver solver;
  std::vector<double> rates;
  const std::vector<double> capacity = {1};
  const std::vector<int> links = {0};
  const std::vector<std::size_t> short_begin = {0};  // one flow needs two entries
  const std::vector<double> cap = {kInf};
  CHECK_THROWS_AS(solver.solve({capacity, links, short_begin, cap}, rates), std::invalid_argument);
}

TEST_CASE("flows_on_a_zero_capacity_link_get_zero_and_leave_the_rest_to_others") {
  // Flow 0 is on the dead link 0 only; flow 1 crosses both; flow 2 is on link 1 alone and so
  // takes all of link 1 once flow 1 is frozen at 0.
  Problem p{{0, 5}, {{0}, {0, 1}, {1}}};
  const auto r = solve(p);
  CHECK(r[0] == 0.0);
  CHECK(r[1] == 0.0);
  CHECK(r[2] == exact(5));
}

TEST_CASE("a_hundred_thousand_flows_that_fill_their_links_together_share_them_equally") {
  // Six layers of ten links. Flow f (a 5-digit number) crosses, in layer j < 5, the link of its
  // j-th decimal digit and, in layer 5, the link of its digit sum mod 10. Every route is distinct,
  // and every link is crossed by exactly 10,000 flows (for layer 5: fixing the first four digits,
  // the last one makes the sum mod 10 take each value once). Layer 5 has half the capacity, so it
  // fills first for every flow at once: one iteration, rate = (C / 2) / 10,000.
  constexpr int flows = 100000;
  constexpr double c = 100e9;
  std::vector<double> capacity(60, c);
  for (int l = 50; l < 60; ++l) capacity[static_cast<std::size_t>(l)] = c / 2;
  std::vector<int> links;
  std::vector<std::size_t> begin = {0};
  links.reserve(6 * flows);
  for (int f = 0; f < flows; ++f) {
    int digits = f;
    int sum = 0;
    for (int j = 0; j < 5; ++j) {
      links.push_back(10 * j + digits % 10);
      sum += digits % 10;
      digits /= 10;
    }
    links.push_back(50 + sum % 10);
    begin.push_back(links.size());
  }
  const std::vector<double> cap(flows, kInf);
  MaxMinSolver solver;
  std::vector<double> r;
  solver.solve({capacity, links, begin, cap}, r);
  REQUIRE(r.size() == flows);
  CHECK(r[0] == exact(c / 2 / 10000));
  CHECK(r[flows - 1] == exact(c / 2 / 10000));
  CHECK(std::all_of(r.begin(), r.end(), [&](double x) { return x == r[0]; }));
}
