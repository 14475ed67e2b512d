#pragma once
// A small, dependency-free SVG chart writer (scaling curves, parity plots). Contract: the same
// spec always renders to the same bytes, every text is XML-escaped, and bad input throws
// std::invalid_argument instead of producing a misleading picture.

#include <string>
#include <string_view>
#include <vector>

namespace dlsim::simulator {

struct PlotSeries {
  std::string label;         // legend text; an empty label keeps the series out of the legend
  std::vector<double> x, y;  // same length
  bool line = true;          // draw a polyline
  bool markers = true;       // draw a circle per point
  bool dashed = false;       // e.g. the ideal line
  std::vector<std::string> point_labels;  // optional text next to each point, empty or same length
  // A CSS colour ("#1f77b4", "grey"); empty takes the cycle's colour for the series' position.
  // Giving two series one colour pairs them, e.g. measured markers and the predicted line of one
  // configuration.
  std::string colour;
};

// Where the legend box sits inside the plot area.
enum class LegendPosition { kTopLeft, kTopRight, kBottomLeft, kBottomRight };

struct PlotSpec {
  std::string title, x_label, y_label;  // labels carry units, e.g. "GPUs", "throughput (samples/s)"
  bool log2_x = false;  // GPU counts 1,2,4,...: log2 axis with ticks at powers of two
  bool log_x = false;   // log10 x axis (not with log2_x)
  bool log_y = false;   // log10 axis
  // Parity plots: same range on both axes and a square plot area, so y = x runs at 45 degrees.
  // Both axes linear, or both log10 (log_x and log_y); log2 and log10 ticks cannot share a range
  // sensibly. The y = x line itself is a series the caller adds (dashed), so it gets a legend
  // entry like any other.
  bool equal_axes = false;
  // Values the y axis must cover besides the points, e.g. 0 so that an efficiency axis starts at
  // zero instead of magnifying a few percent.
  std::vector<double> y_include;
  LegendPosition legend = LegendPosition::kTopLeft;
  int width = 720, height = 480;  // pixels; at least 240 x 160
  std::vector<PlotSeries> series;
};

// A self-contained SVG document with axes, "nice" ticks (1-2-5 steps on linear axes, powers of
// two on a log2 axis, powers of ten on a log10 axis), tick labels, axis titles, a legend and the
// series in a fixed colour cycle. Axis ranges are widened to the outer ticks so no point lies
// outside the frame. Throws std::invalid_argument for no series, an empty series, x/y (or
// point_labels) length mismatch, non-finite values (y_include too), non-positive values on a
// log axis, log2_x with log_x, equal_axes with mixed or log2 axes, a colour with characters
// other than letters, digits and '#', or a size below the minimum.
std::string render_svg(const PlotSpec& spec);

// Ascending ticks with a step of 1, 2 or 5 times a power of ten, about target_count intervals,
// the first <= lo and the last >= hi (e.g. [0, 97], 5 -> 0, 20, ..., 100). A zero-width range
// is widened around its value. Throws std::invalid_argument for non-finite bounds, lo > hi or
// target_count < 1.
std::vector<double> nice_ticks(double lo, double hi, int target_count);

// `text` with &, <, >, " and ' as XML (and HTML) entities.
std::string xml_escape(std::string_view text);

}  // namespace dlsim::simulator
