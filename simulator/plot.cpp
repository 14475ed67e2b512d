#include "simulator/plot.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace dlsim::simulator {

namespace {

// Matplotlib's "tab10": distinguishable, and familiar to readers of ML papers.
constexpr std::array<std::string_view, 10> kColours = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                       "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                       "#bcbd22", "#17becf"};

constexpr int kMinWidth = 240;
constexpr int kMinHeight = 160;

// Coordinates with two decimals: finer than a pixel matters to nobody, and a fixed format keeps
// the bytes stable across platforms.
std::string px(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << v;
  std::string s = os.str();
  if (s == "-0.00") s = "0.00";
  return s;
}

std::string tick_text(double v) {
  if (v == 0.0) return "0";
  // GPU counts and throughputs read better as "1024" and "250000" than in exponent form.
  if (std::abs(v) < 1e7 && v == std::round(v)) {
    std::ostringstream os;
    os << static_cast<long long>(v);
    return os.str();
  }
  std::ostringstream os;
  os << std::setprecision(6) << v;
  return os.str();
}

// Legend boxes are sized without font metrics; a code point count times an average glyph
// width is close enough for the 12px sans-serif used here.
std::size_t display_chars(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// Rounds an exponent computed in floating point onto the integer it is meant to be, so exact
// powers (256, 1000) are not pushed into the next tick interval.
double snapped(double exponent) {
  const double r = std::round(exponent);
  return std::abs(exponent - r) < 1e-9 ? r : exponent;
}

struct Axis {
  bool log = false;
  bool base2 = false;
  double lo = 0, hi = 1;  // in transformed (log) units when log
  std::vector<double> ticks;

  double transform(double v) const {
    if (!log) return v;
    return base2 ? std::log2(v) : std::log10(v);
  }
  double fraction(double v) const { return (transform(v) - lo) / (hi - lo); }
};

Axis linear_axis(double mn, double mx, int target_count) {
  Axis a;
  a.ticks = nice_ticks(mn, mx, target_count);
  a.lo = a.ticks.front();
  a.hi = a.ticks.back();
  return a;
}

Axis log_axis(double mn, double mx, bool base2) {
  Axis a;
  a.log = true;
  a.base2 = base2;
  int e0 = static_cast<int>(std::floor(snapped(a.transform(mn))));
  int e1 = static_cast<int>(std::ceil(snapped(a.transform(mx))));
  if (e0 == e1) {
    --e0;
    ++e1;
  }
  // Past about ten labels they collide, so wide ranges label every second (third, ...) power
  // and the range is stretched to end on a labelled one.
  const int stride = std::max(1, (e1 - e0 + 9) / 10);
  e1 = e0 + stride * ((e1 - e0 + stride - 1) / stride);
  const double base = base2 ? 2.0 : 10.0;
  // A log10 axis over one or two decades would have only two or three labels; 2 and 5 in
  // between keep it readable.
  const bool intermediate = !base2 && e1 - e0 <= 2;
  for (int e = e0; e <= e1; e += stride) {
    const double p = std::pow(base, e);
    a.ticks.push_back(p);
    if (intermediate && e < e1) {
      a.ticks.push_back(2 * p);
      a.ticks.push_back(5 * p);
    }
  }
  a.lo = e0;
  a.hi = e1;
  return a;
}

std::string colour_of(const PlotSpec& spec, std::size_t series) {
  const std::string& own = spec.series[series].colour;
  return own.empty() ? std::string(kColours[series % kColours.size()]) : own;
}

void validate(const PlotSpec& spec) {
  if (spec.width < kMinWidth || spec.height < kMinHeight) {
    throw std::invalid_argument("plot: size " + std::to_string(spec.width) + "x" +
                                std::to_string(spec.height) + " is below the minimum " +
                                std::to_string(kMinWidth) + "x" + std::to_string(kMinHeight));
  }
  if (spec.series.empty()) throw std::invalid_argument("plot: no series to draw");
  if (spec.log2_x && spec.log_x) throw std::invalid_argument("plot: log2_x and log_x both set");
  if (spec.equal_axes && (spec.log2_x || spec.log_x != spec.log_y)) {
    throw std::invalid_argument("plot: equal_axes needs both axes linear or both log10");
  }
  for (double v : spec.y_include) {
    if (!std::isfinite(v)) throw std::invalid_argument("plot: y_include value is not finite");
    if (spec.log_y && v <= 0)
      throw std::invalid_argument("plot: y_include value <= 0 on a log axis");
  }
  for (const PlotSeries& s : spec.series) {
    const std::string name = "plot: series '" + s.label + "'";
    const bool plain = std::all_of(s.colour.begin(), s.colour.end(), [](char c) {
      return c == '#' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    });
    if (!plain) throw std::invalid_argument(name + " has colour '" + s.colour + "'");
    if (s.x.empty()) throw std::invalid_argument(name + " has no points");
    if (s.x.size() != s.y.size()) {
      throw std::invalid_argument(name + " has " + std::to_string(s.x.size()) + " x values but " +
                                  std::to_string(s.y.size()) + " y values");
    }
    if (!s.point_labels.empty() && s.point_labels.size() != s.x.size()) {
      throw std::invalid_argument(name + " has " + std::to_string(s.point_labels.size()) +
                                  " point labels for " + std::to_string(s.x.size()) + " points");
    }
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        throw std::invalid_argument(name + " point " + std::to_string(i) + " is not finite");
      }
      if ((spec.log2_x || spec.log_x) && s.x[i] <= 0) {
        throw std::invalid_argument(name + " point " + std::to_string(i) +
                                    " has x <= 0 on a log axis");
      }
      if (spec.log_y && s.y[i] <= 0) {
        throw std::invalid_argument(name + " point " + std::to_string(i) +
                                    " has y <= 0 on a log axis");
      }
    }
  }
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target_count) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    throw std::invalid_argument("nice_ticks: bounds must be finite");
  }
  if (lo > hi) throw std::invalid_argument("nice_ticks: lo > hi");
  if (target_count < 1) throw std::invalid_argument("nice_ticks: target_count < 1");
  if (lo == hi) {
    const double d = lo == 0 ? 1.0 : std::abs(lo) * 0.5;
    lo -= d;
    hi += d;
  }
  const double raw = (hi - lo) / target_count;
  const int k = static_cast<int>(std::floor(std::log10(raw)));
  const double norm = raw / std::pow(10.0, k);
  double nice = norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10;
  // Ticks are i * nice * 10^k. For k < 0 dividing by the exact integer 10^-k gives the double
  // nearest the decimal (0.3, not 0.30000000000000004), so labels and ends come out clean.
  const double scale = std::pow(10.0, std::abs(k));
  const auto value = [&](double i) { return (k < 0 ? i * nice / scale : i * nice * scale) + 0.0; };
  const double step = value(1);
  const double i0 = std::floor(lo / step + 1e-9);
  const double i1 = std::ceil(hi / step - 1e-9);
  if (i1 - i0 > 10000) throw std::logic_error("nice_ticks: step computation failed");
  std::vector<double> ticks;
  for (double i = i0; i <= i1; ++i) ticks.push_back(value(i));
  if (ticks.size() < 2) ticks.push_back(value(i1 + 1));
  return ticks;
}

std::string render_svg(const PlotSpec& spec) {
  validate(spec);

  const double width = spec.width, height = spec.height;
  double left = 80, top = 44;
  double plot_w = width - left - 24, plot_h = height - top - 64;
  if (spec.equal_axes) {
    const double side = std::min(plot_w, plot_h);
    left += (plot_w - side) / 2;
    plot_w = plot_h = side;
  }
  const double bottom = top + plot_h, right = left + plot_w;

  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min;
  double y_min = x_min, y_max = x_max;
  for (const PlotSeries& s : spec.series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      x_min = std::min(x_min, s.x[i]);
      x_max = std::max(x_max, s.x[i]);
      y_min = std::min(y_min, s.y[i]);
      y_max = std::max(y_max, s.y[i]);
    }
  }
  for (double v : spec.y_include) {
    y_min = std::min(y_min, v);
    y_max = std::max(y_max, v);
  }
  // Roughly one label per 100px across and 60px up keeps labels apart at any size.
  const int x_target = std::max(2, static_cast<int>(plot_w / 100));
  const int y_target = std::max(2, static_cast<int>(plot_h / 60));
  Axis xa, ya;
  if (spec.equal_axes) {
    const double mn = std::min(x_min, y_min), mx = std::max(x_max, y_max);
    xa = ya =
        spec.log_x ? log_axis(mn, mx, false) : linear_axis(mn, mx, std::min(x_target, y_target));
  } else if (spec.log2_x || spec.log_x) {
    xa = log_axis(x_min, x_max, spec.log2_x);
  } else {
    xa = linear_axis(x_min, x_max, x_target);
  }
  if (!spec.equal_axes) {
    ya = spec.log_y ? log_axis(y_min, y_max, false) : linear_axis(y_min, y_max, y_target);
  }
  const auto X = [&](double v) { return left + xa.fraction(v) * plot_w; };
  const auto Y = [&](double v) { return bottom - ya.fraction(v) * plot_h; };

  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << spec.width << "\" height=\""
     << spec.height << "\" viewBox=\"0 0 " << spec.width << ' ' << spec.height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"" << spec.width << "\" height=\"" << spec.height << "\" fill=\"white\"/>\n";
  if (!spec.title.empty()) {
    os << "<text class=\"title\" x=\"" << px(left + plot_w / 2)
       << "\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">"
       << xml_escape(spec.title) << "</text>\n";
  }

  os << "<g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
  for (double t : xa.ticks) {
    os << "<line x1=\"" << px(X(t)) << "\" y1=\"" << px(top) << "\" x2=\"" << px(X(t)) << "\" y2=\""
       << px(bottom) << "\"/>\n";
  }
  for (double t : ya.ticks) {
    os << "<line x1=\"" << px(left) << "\" y1=\"" << px(Y(t)) << "\" x2=\"" << px(right)
       << "\" y2=\"" << px(Y(t)) << "\"/>\n";
  }
  os << "</g>\n";

  os << "<g class=\"x-ticks\" text-anchor=\"middle\">\n";
  for (double t : xa.ticks) {
    os << "<line x1=\"" << px(X(t)) << "\" y1=\"" << px(bottom) << "\" x2=\"" << px(X(t))
       << "\" y2=\"" << px(bottom + 5) << "\" stroke=\"#333\"/>\n";
    os << "<text x=\"" << px(X(t)) << "\" y=\"" << px(bottom + 19) << "\">" << tick_text(t)
       << "</text>\n";
  }
  os << "</g>\n";
  os << "<g class=\"y-ticks\" text-anchor=\"end\">\n";
  for (double t : ya.ticks) {
    os << "<line x1=\"" << px(left - 5) << "\" y1=\"" << px(Y(t)) << "\" x2=\"" << px(left)
       << "\" y2=\"" << px(Y(t)) << "\" stroke=\"#333\"/>\n";
    os << "<text x=\"" << px(left - 8) << "\" y=\"" << px(Y(t) + 4) << "\">" << tick_text(t)
       << "</text>\n";
  }
  os << "</g>\n";
  os << "<rect class=\"frame\" x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\""
     << px(plot_w) << "\" height=\"" << px(plot_h) << "\" fill=\"none\" stroke=\"#333\"/>\n";
  if (!spec.x_label.empty()) {
    os << "<text class=\"x-label\" x=\"" << px(left + plot_w / 2) << "\" y=\"" << px(height - 16)
       << "\" text-anchor=\"middle\">" << xml_escape(spec.x_label) << "</text>\n";
  }
  if (!spec.y_label.empty()) {
    os << "<text class=\"y-label\" transform=\"translate(" << px(left - 58) << ','
       << px(top + plot_h / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
       << xml_escape(spec.y_label) << "</text>\n";
  }

  for (std::size_t si = 0; si < spec.series.size(); ++si) {
    const PlotSeries& s = spec.series[si];
    const std::string colour = colour_of(spec, si);
    os << "<g class=\"series\">\n";
    if (s.line && s.x.size() > 1) {
      os << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"";
      if (s.dashed) os << " stroke-dasharray=\"6 4\"";
      os << " points=\"";
      for (std::size_t i = 0; i < s.x.size(); ++i) {
        os << (i ? " " : "") << px(X(s.x[i])) << ',' << px(Y(s.y[i]));
      }
      os << "\"/>\n";
    }
    if (s.markers) {
      for (std::size_t i = 0; i < s.x.size(); ++i) {
        os << "<circle cx=\"" << px(X(s.x[i])) << "\" cy=\"" << px(Y(s.y[i]))
           << "\" r=\"3.5\" fill=\"" << colour << "\" stroke=\"white\" stroke-width=\"1\"/>\n";
      }
    }
    for (std::size_t i = 0; i < s.point_labels.size(); ++i) {
      if (s.point_labels[i].empty()) continue;
      // Below-right of the point keeps the text off a rising curve and off an ideal line above
      // it; near the frame's right or bottom edge it flips so it stays inside the picture.
      const double cx = X(s.x[i]), cy = Y(s.y[i]);
      const bool flip_x = cx > right - 40, flip_y = cy > bottom - 18;
      os << "<text x=\"" << px(flip_x ? cx - 6 : cx + 6) << "\" y=\""
         << px(flip_y ? cy - 6 : cy + 14) << "\"" << (flip_x ? " text-anchor=\"end\"" : "")
         << " font-size=\"10\" fill=\"" << colour << "\">" << xml_escape(s.point_labels[i])
         << "</text>\n";
    }
    os << "</g>\n";
  }

  // Top-left by default: rising scaling curves and parity plots both leave it empty; falling
  // efficiency curves leave the bottom empty instead.
  std::size_t entries = 0, longest = 0;
  for (const PlotSeries& s : spec.series) {
    if (s.label.empty()) continue;
    ++entries;
    longest = std::max(longest, display_chars(s.label));
  }
  if (entries > 0) {
    const double row = 18;
    const double box_w = 48 + 7 * static_cast<double>(longest);
    const double box_h = 8 + row * static_cast<double>(entries);
    const bool at_right =
        spec.legend == LegendPosition::kTopRight || spec.legend == LegendPosition::kBottomRight;
    const bool at_bottom =
        spec.legend == LegendPosition::kBottomLeft || spec.legend == LegendPosition::kBottomRight;
    const double x0 = at_right ? right - 10 - box_w : left + 10;
    const double y0 = at_bottom ? bottom - 10 - box_h : top + 10;
    os << "<g class=\"legend\">\n";
    os << "<rect x=\"" << px(x0) << "\" y=\"" << px(y0) << "\" width=\"" << px(box_w)
       << "\" height=\"" << px(box_h)
       << "\" fill=\"white\" fill-opacity=\"0.9\" stroke=\"#999\"/>\n";
    double y = y0 + 4 + row / 2;
    for (std::size_t si = 0; si < spec.series.size(); ++si) {
      const PlotSeries& s = spec.series[si];
      if (s.label.empty()) continue;
      const std::string colour = colour_of(spec, si);
      if (s.line) {
        os << "<line x1=\"" << px(x0 + 8) << "\" y1=\"" << px(y) << "\" x2=\"" << px(x0 + 32)
           << "\" y2=\"" << px(y) << "\" stroke=\"" << colour << "\" stroke-width=\"2\"";
        if (s.dashed) os << " stroke-dasharray=\"6 4\"";
        os << "/>\n";
      }
      if (s.markers) {
        os << "<circle cx=\"" << px(x0 + 20) << "\" cy=\"" << px(y) << "\" r=\"3.5\" fill=\""
           << colour << "\" stroke=\"white\" stroke-width=\"1\"/>\n";
      }
      os << "<text x=\"" << px(x0 + 40) << "\" y=\"" << px(y + 4) << "\">" << xml_escape(s.label)
         << "</text>\n";
      y += row;
    }
    os << "</g>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace dlsim::simulator
