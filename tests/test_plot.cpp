#include <doctest/doctest.h>

#include "approx.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "simulator/plot.hpp"

using namespace dlsim::simulator;

namespace {

PlotSpec scaling_spec() {
  PlotSpec spec;
  spec.title = "ResNet-50 scaling";
  spec.x_label = "GPUs";
  spec.y_label = "throughput (samples/s)";
  spec.log2_x = true;
  PlotSeries measured;
  measured.label = "predicted";
  PlotSeries ideal;
  ideal.label = "ideal";
  ideal.dashed = true;
  ideal.markers = false;
  for (double g = 1; g <= 256; g *= 2) {
    measured.x.push_back(g);
    measured.y.push_back(380 * g * (g == 1 ? 1.0 : 0.9));
    measured.point_labels.push_back(g == 1 ? "100%" : "90%");
    ideal.x.push_back(g);
    ideal.y.push_back(380 * g);
  }
  spec.series = {measured, ideal};
  return spec;
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

// The text of the <g class="NAME"> element, up to its closing tag.
std::string group(const std::string& svg, const std::string& name) {
  const std::size_t start = svg.find("<g class=\"" + name + "\"");
  REQUIRE(start != std::string::npos);
  const std::size_t end = svg.find("</g>", start);
  REQUIRE(end != std::string::npos);
  return svg.substr(start, end - start);
}

// Contents and x attributes of the <text> elements in a fragment, in order.
void texts(const std::string& fragment, std::vector<std::string>& contents,
           std::vector<double>& xs) {
  for (std::size_t pos = fragment.find("<text"); pos != std::string::npos;
       pos = fragment.find("<text", pos + 1)) {
    const std::size_t x = fragment.find("x=\"", pos) + 3;
    xs.push_back(std::stod(fragment.substr(x, fragment.find('"', x) - x)));
    const std::size_t open = fragment.find('>', pos) + 1;
    contents.push_back(fragment.substr(open, fragment.find("</text>", open) - open));
  }
}

}  // namespace

TEST_CASE("svg_output_is_one_document_with_balanced_groups") {
  const std::string svg = render_svg(scaling_spec());
  CHECK(svg.rfind("<svg", 0) == 0);
  REQUIRE(svg.size() > 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  CHECK(count(svg, "<svg") == 1);
  const std::size_t opened = count(svg, "<g ") + count(svg, "<g>");
  CHECK(opened > 0);
  CHECK(opened == count(svg, "</g>"));
  CHECK(count(svg, "<text") == count(svg, "</text>"));
  CHECK(svg.find("width=\"720\" height=\"480\"") != std::string::npos);
}

TEST_CASE("every_label_is_xml_escaped") {
  PlotSpec spec;
  spec.title = "a<b & c";
  spec.x_label = "x \"quoted\"";
  spec.y_label = "y's > 0";
  PlotSeries s;
  s.label = "s<1>";
  s.x = {1, 2};
  s.y = {3, 4};
  s.point_labels = {"p&q", ""};
  spec.series = {s};
  const std::string svg = render_svg(spec);
  CHECK(svg.find("a&lt;b &amp; c") != std::string::npos);
  CHECK(svg.find("x &quot;quoted&quot;") != std::string::npos);
  CHECK(svg.find("y&apos;s &gt; 0") != std::string::npos);
  CHECK(svg.find("s&lt;1&gt;") != std::string::npos);
  CHECK(svg.find("p&amp;q") != std::string::npos);
  CHECK(svg.find("a<b") == std::string::npos);
  CHECK(svg.find("s<1>") == std::string::npos);
}

TEST_CASE("log2_x_axis_has_evenly_spaced_ticks_at_powers_of_two") {
  PlotSpec spec;
  spec.log2_x = true;
  PlotSeries s;
  for (int g = 1; g <= 256; ++g) {
    s.x.push_back(g);
    s.y.push_back(g);
  }
  spec.series = {s};
  std::vector<std::string> labels;
  std::vector<double> xs;
  texts(group(render_svg(spec), "x-ticks"), labels, xs);
  CHECK(labels == std::vector<std::string>{"1", "2", "4", "8", "16", "32", "64", "128", "256"});
  REQUIRE(xs.size() == 9);
  for (std::size_t i = 2; i < xs.size(); ++i) {
    CHECK(xs[i] - xs[i - 1] == dlsim_test::approx(xs[1] - xs[0]).epsilon(1e-3));
  }
}

TEST_CASE("log10_y_axis_has_ticks_at_powers_of_ten") {
  PlotSpec spec;
  spec.log_y = true;
  PlotSeries s;
  s.x = {1, 2, 3};
  s.y = {0.5, 30, 4000};
  spec.series = {s};
  std::vector<std::string> labels;
  std::vector<double> xs;
  texts(group(render_svg(spec), "y-ticks"), labels, xs);
  CHECK(labels == std::vector<std::string>{"0.1", "1", "10", "100", "1000", "10000"});
}

TEST_CASE("nice_ticks_use_1_2_5_steps_covering_the_range") {
  CHECK(nice_ticks(0, 97, 5) == std::vector<double>{0, 20, 40, 60, 80, 100});
  CHECK(nice_ticks(0.3, 0.9, 6) == std::vector<double>{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9});
  CHECK(nice_ticks(-12, 37, 5) == std::vector<double>{-20, -10, 0, 10, 20, 30, 40});
  CHECK(nice_ticks(1200, 5100, 4) == std::vector<double>{1000, 2000, 3000, 4000, 5000, 6000});
  const std::vector<double> flat = nice_ticks(5, 5, 5);
  REQUIRE(flat.size() >= 2);
  CHECK(flat.front() < 5);
  CHECK(flat.back() > 5);
  CHECK_THROWS_AS(nice_ticks(1, 0, 5), std::invalid_argument);
  CHECK_THROWS_AS(nice_ticks(0, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(nice_ticks(0, std::numeric_limits<double>::infinity(), 5), std::invalid_argument);
}

TEST_CASE("the_same_spec_renders_to_identical_bytes") {
  const std::string a = render_svg(scaling_spec());
  const std::string b = render_svg(scaling_spec());
  CHECK(a == b);
  PlotSpec changed = scaling_spec();
  changed.series[0].y[3] *= 1.5;
  CHECK(render_svg(changed) != a);
}

TEST_CASE("invalid_specs_throw_invalid_argument") {
  PlotSpec none;
  CHECK_THROWS_AS(render_svg(none), std::invalid_argument);

  PlotSpec empty = scaling_spec();
  empty.series[1].x.clear();
  empty.series[1].y.clear();
  CHECK_THROWS_AS(render_svg(empty), std::invalid_argument);

  PlotSpec mismatch = scaling_spec();
  mismatch.series[0].y.pop_back();
  CHECK_THROWS_WITH_AS(render_svg(mismatch), doctest::Contains("'predicted'"),
                       std::invalid_argument);

  PlotSpec labels = scaling_spec();
  labels.series[0].point_labels.pop_back();
  CHECK_THROWS_AS(render_svg(labels), std::invalid_argument);

  PlotSpec nan = scaling_spec();
  nan.series[0].y[2] = std::nan("");
  CHECK_THROWS_AS(render_svg(nan), std::invalid_argument);

  PlotSpec inf = scaling_spec();
  inf.series[0].x[2] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(render_svg(inf), std::invalid_argument);

  PlotSpec zero_on_log2 = scaling_spec();
  zero_on_log2.series[0].x[0] = 0;
  CHECK_THROWS_AS(render_svg(zero_on_log2), std::invalid_argument);

  PlotSpec negative_on_log10 = scaling_spec();
  negative_on_log10.log_y = true;
  negative_on_log10.series[1].y[0] = -1;
  CHECK_THROWS_AS(render_svg(negative_on_log10), std::invalid_argument);

  PlotSpec equal_log = scaling_spec();
  equal_log.equal_axes = true;
  CHECK_THROWS_AS(render_svg(equal_log), std::invalid_argument);
}

TEST_CASE("point_labels_appear_next_to_their_points") {
  const std::string svg = render_svg(scaling_spec());
  CHECK(count(svg, ">100%</text>") == 1);
  CHECK(count(svg, ">90%</text>") == 8);
  CHECK(svg.find("stroke-dasharray") != std::string::npos);
}

TEST_CASE("equal_axes_give_both_axes_the_same_ticks_in_a_square_area") {
  PlotSpec spec;
  spec.equal_axes = true;
  PlotSeries s;
  s.label = "predicted vs measured";
  s.line = false;
  s.x = {10, 42, 80};
  s.y = {12, 40, 95};
  PlotSeries diagonal;
  diagonal.label = "y = x";
  diagonal.dashed = true;
  diagonal.markers = false;
  diagonal.x = diagonal.y = {10, 95};
  spec.series = {s, diagonal};
  const std::string svg = render_svg(spec);
  std::vector<std::string> x_labels, y_labels;
  std::vector<double> unused;
  texts(group(svg, "x-ticks"), x_labels, unused);
  texts(group(svg, "y-ticks"), y_labels, unused);
  CHECK(x_labels == y_labels);
  CHECK(x_labels.front() == "0");
  CHECK(x_labels.back() == "100");
  CHECK(svg.find("width=\"372.00\" height=\"372.00\"") != std::string::npos);
}

TEST_CASE("log10_x_axis_has_ticks_at_powers_of_ten") {
  PlotSpec spec;
  spec.log_x = true;
  PlotSeries s;
  s.x = {3, 250, 40000};
  s.y = {1, 2, 3};
  spec.series = {s};
  std::vector<std::string> labels;
  std::vector<double> xs;
  texts(group(render_svg(spec), "x-ticks"), labels, xs);
  CHECK(labels == std::vector<std::string>{"1", "10", "100", "1000", "10000", "100000"});
  REQUIRE(xs.size() == 6);
  for (std::size_t i = 2; i < xs.size(); ++i) {
    CHECK(xs[i] - xs[i - 1] == dlsim_test::approx(xs[1] - xs[0]).epsilon(1e-3));
  }
  PlotSpec both = spec;
  both.log2_x = true;
  CHECK_THROWS_AS(render_svg(both), std::invalid_argument);
  PlotSpec zero = spec;
  zero.series[0].x[0] = 0;
  CHECK_THROWS_AS(render_svg(zero), std::invalid_argument);
}

TEST_CASE("equal_log_axes_share_decades_in_a_square_area") {
  PlotSpec spec;
  spec.equal_axes = true;
  spec.log_x = spec.log_y = true;
  PlotSeries s;
  s.line = false;
  s.x = {20, 900, 15000};
  s.y = {22, 850, 16000};
  spec.series = {s};
  const std::string svg = render_svg(spec);
  std::vector<std::string> x_labels, y_labels;
  std::vector<double> unused;
  texts(group(svg, "x-ticks"), x_labels, unused);
  texts(group(svg, "y-ticks"), y_labels, unused);
  CHECK(x_labels == y_labels);
  CHECK(x_labels == std::vector<std::string>{"10", "100", "1000", "10000", "100000"});
  CHECK(svg.find("width=\"372.00\" height=\"372.00\"") != std::string::npos);
  // One log axis and one linear axis cannot share a range.
  PlotSpec mixed = spec;
  mixed.log_y = false;
  CHECK_THROWS_AS(render_svg(mixed), std::invalid_argument);
}

TEST_CASE("a_series_colour_overrides_the_cycle_and_pairs_series") {
  PlotSpec spec = scaling_spec();
  spec.series[0].colour = "#123456";
  spec.series[1].colour = "#123456";
  const std::string svg = render_svg(spec);
  CHECK(svg.find("#1f77b4") == std::string::npos);  // the cycle's first colour is not used
  CHECK(svg.find("#ff7f0e") == std::string::npos);
  CHECK(count(svg, "stroke=\"#123456\"") >= 2);  // both polylines and the legend lines
  PlotSpec injected = scaling_spec();
  injected.series[0].colour = "red\" onload=\"x";
  CHECK_THROWS_AS(render_svg(injected), std::invalid_argument);
}

TEST_CASE("unset_colours_keep_the_cycle_by_series_position") {
  PlotSpec spec = scaling_spec();
  spec.series[0].colour = "grey";
  const std::string svg = render_svg(spec);
  CHECK(svg.find("stroke=\"grey\"") != std::string::npos);
  CHECK(svg.find("stroke=\"#ff7f0e\"") != std::string::npos);  // the second series' own colour
}

TEST_CASE("y_include_widens_the_y_axis_to_cover_its_values") {
  PlotSpec spec;
  PlotSeries s;
  s.x = {1, 8};
  s.y = {100, 92};
  spec.series = {s};
  std::vector<std::string> labels;
  std::vector<double> unused;
  texts(group(render_svg(spec), "y-ticks"), labels, unused);
  REQUIRE(!labels.empty());
  CHECK(labels.front() != "0");
  spec.y_include = {0};
  labels.clear();
  texts(group(render_svg(spec), "y-ticks"), labels, unused);
  CHECK(labels.front() == "0");
  CHECK(std::stod(labels.back()) >= 100);
  PlotSpec log_zero = spec;
  log_zero.log_y = true;
  CHECK_THROWS_AS(render_svg(log_zero), std::invalid_argument);
  PlotSpec nan = spec;
  nan.y_include = {std::nan("")};
  CHECK_THROWS_AS(render_svg(nan), std::invalid_argument);
}

TEST_CASE("legend_box_sits_in_the_requested_corner") {
  PlotSpec spec = scaling_spec();
  const auto box = [](const std::string& svg) {
    const std::string legend = group(svg, "legend");
    const std::size_t x = legend.find("x=\"") + 3;
    const std::size_t y = legend.find("y=\"") + 3;
    return std::pair<double, double>{std::stod(legend.substr(x, legend.find('"', x) - x)),
                                     std::stod(legend.substr(y, legend.find('"', y) - y))};
  };
  const auto top_left = box(render_svg(spec));
  spec.legend = LegendPosition::kBottomRight;
  const auto bottom_right = box(render_svg(spec));
  spec.legend = LegendPosition::kTopRight;
  const auto top_right = box(render_svg(spec));
  spec.legend = LegendPosition::kBottomLeft;
  const auto bottom_left = box(render_svg(spec));
  CHECK(top_left.first == dlsim_test::approx(90));   // left margin 80 + 10
  CHECK(top_left.second == dlsim_test::approx(54));  // top margin 44 + 10
  CHECK(bottom_right.first > top_left.first);
  CHECK(bottom_right.second > top_left.second);
  CHECK(top_right.first == dlsim_test::approx(bottom_right.first));
  CHECK(top_right.second == dlsim_test::approx(top_left.second));
  CHECK(bottom_left.first == dlsim_test::approx(top_left.first));
  CHECK(bottom_left.second == dlsim_test::approx(bottom_right.second));
}
