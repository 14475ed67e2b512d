#pragma once
// Plots of the published-run comparisons (docs/validate.md, "Plots"), drawn with
// simulator/plot.hpp: per figure of a cases file, measured points against predicted lines; and
// one parity plot of every comparison.

#include <string>
#include <vector>

#include "validate/published.hpp"

namespace dlsim::validate {

struct Figure {
  std::string data_set;  // the cases file's name; empty for the parity plot
  std::string title;
  std::string file;  // its file name in --svg-dir: "<data set>.svg", "<data set>-<figure>.svg"
  std::string svg;
};

// One figure per (data set, case `figure`), in order of first appearance, then the parity
// plot ("parity.svg"). A figure plots scaling efficiency in % against GPUs (log2) when each of
// its cases is anchored or a scaling_efficiency claim: measured per-GPU throughput over the
// anchor row's (or the claim itself) as markers, the same ratio of the predictions as lines.
// Otherwise it plots throughput (samples/s, log10). One colour per case; anchor rows are
// markers like the others. The parity plot is log-log, predicted against measured in each
// comparison's unit, one colour per data set, with y = x and the ±10 % band; anchor rows are
// left out.
std::vector<Figure> render_figures(const std::vector<Comparison>& comparisons,
                                   const std::vector<Curve>& curves);

}  // namespace dlsim::validate
