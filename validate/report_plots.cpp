#include "validate/report_plots.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "simulator/plot.hpp"

namespace dlsim::validate {
namespace {

namespace plot = dlsim::simulator;

// The plot module's colour cycle is by series position; a figure gives each case one colour for
// its two series (markers and line), so it picks colours itself: matplotlib's "tab10", then the
// lighter halves of "tab20", so that up to 20 data sets in the parity plot stay apart.
constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                                    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
                                    "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"};
constexpr std::size_t kColourCount = sizeof(kColours) / sizeof(kColours[0]);

// File names keep letters, digits, '_', '-' and '.'; anything else becomes one '-'.
std::string slug(const std::string& text) {
  std::string out;
  for (char ch : text) {
    const bool keep =
        (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
    const char lower = ch >= 'A' && ch <= 'Z' ? static_cast<char>(ch - 'A' + 'a') : ch;
    if (keep || lower != ch) {
      out += lower;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "figure" : out;
}

using CaseKey = std::pair<std::string, std::string>;  // data set, case

// Efficiency in %: the claim itself, or per-GPU throughput over the anchor row's.
double efficiency(const Comparison& ref, int gpus, double value) {
  if (ref.unit == "%") return value;
  return 100 * (value / gpus) / (ref.anchor_value / ref.anchor_gpus);
}

std::string scaling_svg(const std::string& title, const std::vector<const Comparison*>& cs,
                        const std::vector<const Curve*>& curves,
                        const std::map<CaseKey, const Comparison*>& first) {
  const bool as_efficiency = std::all_of(cs.begin(), cs.end(), [](const Comparison* c) {
    return c->unit == "%" || c->anchor_gpus > 0;
  });
  plot::PlotSpec spec;
  spec.title = title;
  spec.x_label = "GPUs (markers: measured, lines: predicted)";
  spec.log2_x = true;
  if (as_efficiency) {
    spec.y_label = "scaling efficiency (%)";
    spec.y_include = {0, 100};
    spec.legend = plot::LegendPosition::kBottomLeft;
  } else {
    spec.y_label = "throughput (samples/s)";
    spec.log_y = true;
  }
  std::size_t index = 0;
  for (const Curve* curve : curves) {
    const Comparison& ref = *first.at({curve->data_set, curve->case_name});
    const std::string colour = kColours[index++ % kColourCount];
    plot::PlotSeries measured;
    measured.line = false;
    measured.colour = colour;
    for (const Comparison* c : cs) {
      if (c->case_name != curve->case_name) continue;
      measured.x.push_back(c->gpus);
      measured.y.push_back(as_efficiency ? efficiency(ref, c->gpus, c->measured) : c->measured);
    }
    plot::PlotSeries predicted;
    predicted.label = curve->case_name;
    predicted.markers = curve->gpus.size() == 1;  // a single point has no line to show
    predicted.colour = colour;
    for (std::size_t i = 0; i < curve->gpus.size(); ++i) {
      predicted.x.push_back(curve->gpus[i]);
      predicted.y.push_back(as_efficiency ? efficiency(ref, curve->gpus[i], curve->predicted[i])
                                          : curve->predicted[i]);
    }
    spec.series.push_back(std::move(predicted));
    spec.series.push_back(std::move(measured));
  }
  return plot::render_svg(spec);
}

std::string parity_svg(const std::vector<Comparison>& comparisons) {
  plot::PlotSpec spec;
  spec.title = "Predicted against measured (anchor rows left out)";
  spec.x_label = "measured (samples/s; % for efficiency claims)";
  spec.y_label = "predicted (same unit)";
  spec.log_x = spec.log_y = spec.equal_axes = true;
  spec.width = 720;
  spec.height = 640;
  std::vector<std::string> order;
  std::map<std::string, plot::PlotSeries> by_set;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& c : comparisons) {
    if (c.anchor) continue;
    if (!by_set.count(c.data_set)) order.push_back(c.data_set);
    auto& s = by_set[c.data_set];
    s.x.push_back(c.measured);
    s.y.push_back(c.predicted);
    lo = std::min({lo, c.measured, c.predicted});
    hi = std::max({hi, c.measured, c.predicted});
  }
  if (order.empty()) {
    lo = 1;
    hi = 10;
  }
  // The reference lines span whole decades, as the axes do, and stay inside them.
  lo = std::pow(10.0, std::floor(std::log10(lo)));
  hi = std::pow(10.0, std::ceil(std::log10(hi)));
  if (hi <= lo) hi = lo * 10;
  plot::PlotSeries diagonal;
  diagonal.label = "y = x";
  diagonal.markers = false;
  diagonal.colour = "#333333";
  diagonal.x = diagonal.y = {lo, hi};
  plot::PlotSeries above, below;
  above.label = "±10 %";
  above.markers = below.markers = false;
  above.dashed = below.dashed = true;
  above.colour = below.colour = "#999999";
  above.x = {lo, hi / 1.1};
  above.y = {lo * 1.1, hi};
  below.x = {lo / 0.9, hi};
  below.y = {lo, hi * 0.9};
  spec.series = {diagonal, above, below};
  std::size_t index = 0;
  for (const auto& name : order) {
    auto s = by_set.at(name);
    s.label = name;
    s.line = false;
    s.colour = kColours[index++ % kColourCount];
    spec.series.push_back(std::move(s));
  }
  return plot::render_svg(spec);
}

}  // namespace

std::vector<Figure> render_figures(const std::vector<Comparison>& comparisons,
                                   const std::vector<Curve>& curves) {
  std::map<CaseKey, const Comparison*> first;
  std::vector<std::pair<std::string, std::string>> order;  // (data set, figure)
  for (const auto& c : comparisons) {
    first.try_emplace({c.data_set, c.case_name}, &c);
    const std::pair<std::string, std::string> key{c.data_set, c.figure};
    if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
  }
  std::vector<Figure> out;
  std::set<std::string> files = {"parity.svg"};
  for (const auto& [data_set, figure] : order) {
    std::vector<const Comparison*> cs;
    for (const auto& c : comparisons) {
      if (c.data_set == data_set && c.figure == figure) cs.push_back(&c);
    }
    std::vector<const Curve*> lines;
    for (const auto& curve : curves) {
      if (curve.data_set == data_set && curve.figure == figure) lines.push_back(&curve);
    }
    if (lines.empty()) continue;
    Figure f;
    f.data_set = data_set;
    f.title = figure == data_set ? data_set : data_set + ": " + figure;
    std::string name = figure == data_set ? slug(data_set) : slug(data_set) + "-" + slug(figure);
    for (int n = 2; files.count(name + ".svg"); ++n) {
      name = (figure == data_set ? slug(data_set) : slug(data_set) + "-" + slug(figure)) +
             fmt::format("-{}", n);
    }
    f.file = name + ".svg";
    files.insert(f.file);
    f.svg = scaling_svg(f.title, cs, lines, first);
    out.push_back(std::move(f));
  }
  out.push_back({"", "Predicted against measured", "parity.svg", parity_svg(comparisons)});
  return out;
}

}  // namespace dlsim::validate
