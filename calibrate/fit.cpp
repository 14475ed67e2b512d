#include "calibrate/fit.hpp"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include "common/error.hpp"

namespace dlsim::calibrate {
namespace {

// Squared relative residual sum of alpha + beta s against t.
double sse(const AlphaBeta& f, const double* s, const double* t, std::size_t n) {
  double e = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = (f.time(s[i]) - t[i]) / t[i];
    e += r * r;
  }
  return e;
}

// `latency`: alpha is a latency and kept non-negative (one line over a whole sweep); a regime of
// a piecewise fit is a local line whose intercept may be negative (a bandwidth that drops with
// size: caches giving way to memory, a switch of algorithm).
AlphaBeta solve(const double* s, const double* t, std::size_t n, bool latency = true) {
  // Rows (1/t_i, s_i/t_i) [alpha beta]^T = 1: relative residuals.
  Eigen::MatrixXd a(static_cast<Eigen::Index>(n), 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(n));
  for (std::size_t i = 0; i < n; ++i) {
    a(static_cast<Eigen::Index>(i), 0) = 1.0 / t[i];
    a(static_cast<Eigen::Index>(i), 1) = s[i] / t[i];
  }
  Eigen::Vector2d x = a.colPivHouseholderQr().solve(b);
  AlphaBeta f;
  f.alpha = x(0);
  f.beta = x(1);
  if ((latency && f.alpha < 0) || f.beta < 0) {
    // Clamp the negative one to zero and refit the other alone.
    const bool drop_alpha = f.alpha < 0;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double col = drop_alpha ? s[i] / t[i] : 1.0 / t[i];
      num += col;
      den += col * col;
    }
    const double v = den > 0 ? num / den : 0;
    f.alpha = drop_alpha ? 0 : v;
    f.beta = drop_alpha ? v : 0;
  }
  f.points = n;
  f.min_bytes = *std::min_element(s, s + n);
  f.max_bytes = *std::max_element(s, s + n);
  double mean = 0;
  for (std::size_t i = 0; i < n; ++i) mean += t[i];
  mean /= static_cast<double>(n);
  double ss_res = 0, ss_tot = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = f.time(s[i]) - t[i];
    ss_res += r * r;
    ss_tot += (t[i] - mean) * (t[i] - mean);
    const double rel = std::abs(r) / t[i];
    if (rel > f.worst_relative_error) {
      f.worst_relative_error = rel;
      f.worst_at_bytes = s[i];
    }
  }
  f.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
  return f;
}

void check_points(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  if (bytes.size() != seconds.size()) fail_at({}, "fit", "sizes and times differ in number");
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!(seconds[i] > 0) || !(bytes[i] >= 0)) {
      fail_at({}, "fit", fmt::format("point {} has a non-positive time or negative size", i));
    }
    if (i > 0 && bytes[i] < bytes[i - 1]) fail_at({}, "fit", "sizes must be increasing");
  }
}

}  // namespace

AlphaBeta fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  check_points(bytes, seconds);
  if (bytes.size() < 2 || bytes.front() == bytes.back()) {
    fail_at({}, "fit", "needs at least two points of different sizes");
  }
  return solve(bytes.data(), seconds.data(), bytes.size());
}

double PiecewiseFit::time(double bytes) const {
  for (std::size_t i = 0; i + 1 < regimes.size(); ++i) {
    // Between two regimes' ranges: the boundary is midway (geometrically) between them.
    const double edge = std::sqrt(regimes[i].max_bytes * regimes[i + 1].min_bytes);
    if (bytes < edge) return regimes[i].time(bytes);
  }
  return regimes.back().time(bytes);
}

double PiecewiseFit::worst_relative_error() const {
  double w = 0;
  for (const auto& r : regimes) w = std::max(w, r.worst_relative_error);
  return w;
}

PiecewiseFit fit_piecewise(const std::vector<double>& bytes, const std::vector<double>& seconds,
                           int max_regimes, std::size_t min_points, double min_gain) {
  check_points(bytes, seconds);
  const std::size_t n = bytes.size();
  if (n < 2 || bytes.front() == bytes.back()) {
    fail_at({}, "fit", "needs at least two points of different sizes");
  }
  min_points = std::max<std::size_t>(min_points, 2);
  // Dynamic programme over split points: best[k][j] = least error of the first j points in k
  // pieces.
  const auto k_max = static_cast<std::size_t>(std::max(1, max_regimes));
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(k_max + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> from(k_max + 1, std::vector<std::size_t>(n + 1, 0));
  auto piece_error = [&](std::size_t i, std::size_t j) {  // points [i, j)
    if (j - i < min_points || bytes[i] == bytes[j - 1]) return inf;
    const auto f = solve(bytes.data() + i, seconds.data() + i, j - i, false);
    return sse(f, bytes.data() + i, seconds.data() + i, j - i);
  };
  best[0][0] = 0;
  for (std::size_t k = 1; k <= k_max; ++k) {
    for (std::size_t j = 1; j <= n; ++j) {
      for (std::size_t i = 0; i < j; ++i) {
        if (!std::isfinite(best[k - 1][i])) continue;
        const double e = best[k - 1][i] + piece_error(i, j);
        if (e < best[k][j]) {
          best[k][j] = e;
          from[k][j] = i;
        }
      }
    }
  }
  // Fewest pieces whose error is not improved on by min_gain by one more.
  std::size_t k = 1;
  if (!std::isfinite(best[1][n])) {
    // Too few points for one piece of min_points: fit them all.
    PiecewiseFit f;
    f.regimes.push_back(solve(bytes.data(), seconds.data(), n));
    return f;
  }
  // A fit already within 0.1 % RMS relative error needs no further piece.
  const double good_enough = 1e-6 * static_cast<double>(n);
  while (k < k_max && best[k][n] > good_enough && std::isfinite(best[k + 1][n]) &&
         best[k + 1][n] < (1.0 - min_gain) * best[k][n]) {
    ++k;
  }
  PiecewiseFit f;
  std::size_t j = n;
  for (std::size_t piece = k; piece > 0; --piece) {
    const std::size_t i = from[piece][j];
    f.regimes.push_back(solve(bytes.data() + i, seconds.data() + i, j - i, false));
    j = i;
  }
  std::reverse(f.regimes.begin(), f.regimes.end());
  return f;
}

SaturatingFit fit_saturating(const std::vector<double>& sizes, const std::vector<double>& rates) {
  if (sizes.size() != rates.size() || sizes.size() < 2) {
    fail_at({}, "fit", "a saturating curve needs at least two (size, rate) points");
  }
  const auto n = static_cast<Eigen::Index>(sizes.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double x = sizes[static_cast<std::size_t>(i)], r = rates[static_cast<std::size_t>(i)];
    if (!(x > 0) || !(r > 0)) fail_at({}, "fit", "sizes and rates must be positive");
    a(i, 0) = r;      // x 1/R
    a(i, 1) = r / x;  // x h/R
  }
  const Eigen::Vector2d c = a.colPivHouseholderQr().solve(b);
  SaturatingFit f;
  f.points = sizes.size();
  if (c(0) > 0 && c(1) >= 0) {
    f.rate = 1.0 / c(0);
    f.half = c(1) / c(0);
  } else {
    // No saturation seen (or noise): the largest rate, reached at once.
    f.rate = *std::max_element(rates.begin(), rates.end());
    f.half = 0;
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double e = std::abs(f.at(sizes[i]) - rates[i]) / rates[i];
    if (e > f.worst_relative_error) {
      f.worst_relative_error = e;
      f.worst_at = sizes[i];
    }
  }
  return f;
}

Statistic parse_statistic(const std::string& flag, const std::string& text) {
  if (text == "median") return Statistic::kMedian;
  if (text == "min") return Statistic::kMin;
  fail_at({}, flag, fmt::format("'{}' is not median or min", text));
}

std::vector<Series> group_series(const std::vector<Measurement>& measurements,
                                 Statistic statistic) {
  using Key = std::tuple<std::string, std::string, int, int, std::string>;
  std::map<Key, std::map<double, std::vector<double>>> points;
  for (const auto& m : measurements) {
    // A training step's layers and update (run torch) are a table, not a series by size.
    if (m.backend == "torch") continue;
    std::string variant;
    for (const char* k : {"algorithm", "protocol", "direction", "peer"}) {
      if (auto it = m.params.find(k); it != m.params.end()) {
        variant += fmt::format("{}{}={}", variant.empty() ? "" : " ", k, it->second);
      }
    }
    points[{m.op, m.backend, m.ranks, m.nodes, variant}][m.bytes].push_back(
        statistic == Statistic::kMin ? m.min_s() : m.median_s());
  }
  std::vector<Series> out;
  for (const auto& [key, by_size] : points) {
    Series s;
    std::tie(s.op, s.backend, s.ranks, s.nodes, s.variant) = key;
    for (const auto& [b, ts] : by_size) {
      // Repeated sizes (several runs): their median.
      auto v = ts;
      std::sort(v.begin(), v.end());
      const std::size_t h = v.size() / 2;
      s.bytes.push_back(b);
      s.seconds.push_back(v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]));
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<SeriesFit> fit_series(const std::vector<Measurement>& measurements, double min_bytes,
                                  Statistic statistic, std::vector<UnfittedSeries>* unfitted) {
  std::vector<SeriesFit> out;
  for (auto& s : group_series(measurements, statistic)) {
    Series kept = s;
    kept.bytes.clear();
    kept.seconds.clear();
    for (std::size_t i = 0; i < s.bytes.size(); ++i) {
      if (s.bytes[i] >= min_bytes && s.bytes[i] > 0) {
        kept.bytes.push_back(s.bytes[i]);
        kept.seconds.push_back(s.seconds[i]);
      }
    }
    if (kept.bytes.size() < 2 || kept.bytes.front() == kept.bytes.back()) {
      const bool transfers =
          std::any_of(s.bytes.begin(), s.bytes.end(), [](double b) { return b > 0; });
      if (unfitted && transfers) unfitted->push_back({std::move(kept), s.bytes.size()});
      continue;
    }
    SeriesFit f;
    f.fit = fit_piecewise(kept.bytes, kept.seconds);
    {
      const auto& first = f.fit.regimes.front();
      std::vector<double> b, t;
      for (std::size_t i = 0; i < kept.bytes.size(); ++i) {
        if (kept.bytes[i] >= first.min_bytes && kept.bytes[i] <= first.max_bytes) {
          b.push_back(kept.bytes[i]);
          t.push_back(kept.seconds[i]);
        }
      }
      f.latency = b.size() >= 2 && b.front() != b.back() ? fit_alpha_beta(b, t) : first;
      f.latency.alpha = std::max(0.0, f.latency.alpha);
    }
    for (std::size_t i = 0; i < kept.bytes.size(); ++i) {
      f.relative_errors.push_back((f.fit.time(kept.bytes[i]) - kept.seconds[i]) / kept.seconds[i]);
    }
    f.series = std::move(kept);
    out.push_back(std::move(f));
  }
  return out;
}

std::string layer_table_report(const std::vector<Measurement>& ms, Statistic statistic) {
  const auto param = [](const Measurement& m, const char* key, const char* absent) {
    const auto it = m.params.find(key);
    return it == m.params.end() ? std::string(absent) : it->second;
  };
  const auto stat = [&](const Measurement& m) {
    return statistic == Statistic::kMin ? m.min_s() : m.median_s();
  };
  struct Row {
    std::string layer, op;
    int instances = 1;
    const Measurement* forward = nullptr;
    const Measurement* backward = nullptr;
  };
  struct Table {
    std::vector<std::string> order;
    std::map<std::string, Row> rows;  // by signature
    const Measurement* update = nullptr;
  };
  std::map<std::string, Table> tables;  // by model, device, precision, batch, threads
  std::vector<std::string> order;
  for (const auto& m : ms) {
    if (m.backend != "torch") continue;
    const auto key = fmt::format("{} on {}, {}, batch {}, {} thread(s)", param(m, "model", "?"),
                                 param(m, "device", "cpu"), param(m, "precision", "fp32"),
                                 param(m, "batch", "?"), param(m, "threads", "?"));
    if (!tables.count(key)) order.push_back(key);
    auto& t = tables[key];
    if (m.op == "optimizer_update") {
      t.update = &m;
      continue;
    }
    if (m.op != "layer_forward" && m.op != "layer_backward") continue;
    if (!t.rows.count(m.shape)) t.order.push_back(m.shape);
    auto& r = t.rows[m.shape];
    r.layer = param(m, "layer", "?");
    r.op = param(m, "op_kind", "?");
    r.instances = std::max(1, std::atoi(param(m, "instances", "1").c_str()));
    (m.op == "layer_forward" ? r.forward : r.backward) = &m;
  }
  std::ostringstream o;
  const char* name = statistic == Statistic::kMin ? "minimum" : "median";
  for (const auto& key : order) {
    const auto& t = tables.at(key);
    o << fmt::format("\nlayer table (run torch): {}; the {} over the timed steps\n", key, name);
    o << fmt::format("  {:<36} {:<18} {:>4} {:>12} {:>8} {:>12} {:>8}\n", "layer", "op", "n",
                     "forward_us", "spread%", "backward_us", "spread%");
    double forward = 0, backward = 0;
    const auto spread = [&](const Measurement* m) {
      return m && stat(*m) > 0 ? 100 * (m->max_s() - m->min_s()) / stat(*m) : 0.0;
    };
    for (const auto& sig : t.order) {
      const auto& r = t.rows.at(sig);
      const double f = r.forward ? stat(*r.forward) : 0, b = r.backward ? stat(*r.backward) : 0;
      forward += f * r.instances;
      backward += b * r.instances;
      o << fmt::format("  {:<36} {:<18} {:>4} {:>12.1f} {:>8.1f} {:>12.1f} {:>8.1f}\n",
                       r.layer.substr(0, 36), r.op.substr(0, 18), r.instances, f * 1e6,
                       spread(r.forward), b * 1e6, spread(r.backward));
    }
    o << fmt::format("  step: forward {:.3f} ms + backward {:.3f} ms (every instance){}\n",
                     forward * 1e3, backward * 1e3,
                     t.update ? fmt::format(" + update {:.3f} ms ({} tensors) = {:.3f} ms",
                                            stat(*t.update) * 1e3, param(*t.update, "tensors", "?"),
                                            (forward + backward + stat(*t.update)) * 1e3)
                              : std::string());
  }
  return o.str();
}

std::string cpu_cost_report(const std::vector<Measurement>& ms, Statistic statistic) {
  std::ostringstream o;
  std::string series;
  for (const auto& m : ms) {
    const auto it = m.params.find("cpu_s_per_call");
    if (it == m.params.end() || m.bytes <= 0) continue;
    const auto name = fmt::format("{} {} ranks={} nodes={}", m.op, m.backend, m.ranks, m.nodes);
    if (name != series) {
      series = name;
      o << fmt::format("\n{}: CPU time per call (the slowest process's)\n", name);
      o << fmt::format("  {:>14} {:>12} {:>12} {:>8} {:>10}\n", "size_bytes", "time_us", "cpu_us",
                       "cpu_%", "cpu_ns/B");
    }
    const double wall = statistic == Statistic::kMin ? m.min_s() : m.median_s();
    const double cpu = std::atof(it->second.c_str());
    o << fmt::format("  {:>14.0f} {:>12.3f} {:>12.3f} {:>8.1f} {:>10.4f}\n", m.bytes, wall * 1e6,
                     cpu * 1e6, wall > 0 ? 100 * cpu / wall : 0.0, cpu / m.bytes * 1e9);
  }
  return o.str();
}

}  // namespace dlsim::calibrate
