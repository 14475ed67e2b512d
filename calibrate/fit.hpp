#pragma once
// Fitting measured times (docs/calibrate.md, "Fitting"). A link or a collective is described by
// the alpha-beta model t(s) = alpha + beta s (Hockney 1994, "The communication challenge for MPP:
// Intel Paragon and Meiko CS-2", Parallel Computing 20(3)); where the curve has a protocol change
// (NCCL LL -> LL128 -> Simple, MPI eager -> rendezvous) it is fitted piecewise, one alpha-beta per
// regime. Least squares on relative residuals, (alpha + beta s_i - t_i) / t_i, so microsecond and
// second timings weigh alike, solved with Eigen.

#include <string>
#include <vector>

#include "calibrate/results.hpp"

namespace dlsim::calibrate {

struct AlphaBeta {
  double alpha = 0;  // s; in a regime of a piecewise fit, a local intercept that may be negative
  double beta = 0;   // s/B
  // Quality over the points fitted: R^2 of the times, and the largest |relative residual|.
  double r2 = 0;
  double worst_relative_error = 0;
  double worst_at_bytes = 0;  // B
  std::size_t points = 0;
  double min_bytes = 0, max_bytes = 0;  // B, the range fitted

  double time(double bytes) const { return alpha + beta * bytes; }  // s
  double bandwidth() const { return beta > 0 ? 1.0 / beta : 0; }    // B/s
};

// Weighted least squares over (bytes, seconds) points; needs 2 points of different sizes.
// alpha and beta are kept non-negative (a negative intercept is refitted through the origin).
AlphaBeta fit_alpha_beta(const std::vector<double>& bytes, const std::vector<double>& seconds);

// Up to `max_regimes` alpha-beta pieces over contiguous size ranges (each of at least
// `min_points` points), breakpoints chosen to minimise the total squared relative residual; a
// further piece is kept only if it reduces that total by at least `min_gain` (relative) and
// the fit so far is off by more than 0.1 % RMS.
struct PiecewiseFit {
  std::vector<AlphaBeta> regimes;  // by increasing size
  // s at `bytes`: the regime whose range holds it (below the first: the first; above: the last).
  double time(double bytes) const;
  double worst_relative_error() const;
};
PiecewiseFit fit_piecewise(const std::vector<double>& bytes, const std::vector<double>& seconds,
                           int max_regimes = 4, std::size_t min_points = 2, double min_gain = 0.25);

// A rate that saturates with the size of the operation, rate(x) = R x / (x + h): dlsim's
// efficiency curve e(x) = max x / (x + half) times a peak (docs/hardware-format.md, `kind: gpu`),
// with R = max x peak and h = half. Fitted by least squares on the relative residual of 1/rate,
// which is linear in 1/R and h/R: (1/R + (h/R)/x) rate - 1.
struct SaturatingFit {
  double rate = 0;  // R: the asymptotic rate (B/s or FLOP/s)
  double half = 0;  // h: the size at half of it (B or FLOP)
  double worst_relative_error = 0;
  double worst_at = 0;
  std::size_t points = 0;
  double at(double x) const { return rate * x / (x + half); }
};
SaturatingFit fit_saturating(const std::vector<double>& sizes, const std::vector<double>& rates);

// Which of a point's samples stands for it. The median is what benchmarks report; the minimum is
// the estimate least disturbed by other work on a shared machine (interference only ever adds
// time: Chen & Revels 2016, "Robust benchmarking in noisy environments", arXiv:1608.04295).
enum class Statistic { kMedian, kMin };
Statistic parse_statistic(const std::string& flag, const std::string& text);

// One series: every measurement of one op, backend, rank and node count (and params that set
// the regime: algorithm, protocol, direction), by increasing size, median times.
struct Series {
  std::string op, backend;
  int ranks = 1, nodes = 1;
  std::string variant;  // "algorithm=ring protocol=Simple", "" when none
  std::vector<double> bytes, seconds;
};
std::vector<Series> group_series(const std::vector<Measurement>& measurements,
                                 Statistic statistic = Statistic::kMedian);

struct SeriesFit {
  Series series;
  PiecewiseFit fit;
  // The latency the series shows: alpha-beta over the first regime's sizes with alpha kept
  // non-negative (a regime's local intercept may be negative, a latency never is).
  AlphaBeta latency;
  // Per point: relative error of the fit, (fit - measured) / measured.
  std::vector<double> relative_errors;
};
// Fits every series with at least 2 sizes; points below `min_bytes` are left out of the fit
// (latency-bound sizes are fitted separately by the regimes above them otherwise). A series of
// transfers left with fewer than 2 sizes goes to `unfitted` (if given): the sizes it kept, and
// how many it had.
struct UnfittedSeries {
  Series kept;
  std::size_t sizes = 0;
};
std::vector<SeriesFit> fit_series(const std::vector<Measurement>& measurements,
                                  double min_bytes = 0, Statistic statistic = Statistic::kMedian,
                                  std::vector<UnfittedSeries>* unfitted = nullptr);

// `run torch`'s records as `fit` turns them into a profile's layer table, as text: per model,
// device, precision, batch and thread count, every distinct layer's forward and backward time
// (`statistic` over the timed steps, and the samples' spread in % of it), then the step they add
// up to. Empty without such records.
std::string layer_table_report(const std::vector<Measurement>& ms, Statistic statistic);

// The CPU time communication costs its processes, where the records carry it (`run gloo`:
// params.cpu_s_per_call, the slowest rank's process CPU time per call): per series and size the
// wall time, the CPU time, their ratio and the CPU time per byte. Empty without such records.
std::string cpu_cost_report(const std::vector<Measurement>& ms, Statistic statistic);

}  // namespace dlsim::calibrate
