#pragma once
// The published-run report as Markdown, JSON and one self-contained HTML page
// (docs/validate.md, "Output").

#include <string>
#include <vector>

#include "validate/published.hpp"
#include "validate/report_plots.hpp"

namespace dlsim::validate {

struct ReportContext {
  std::string command;  // the command line that produced the report
  std::string version;  // dlsim's
  // Markdown: the folder of the figures' SVG files, relative to the report; empty: no images.
  std::string image_dir;
};

std::string report_markdown(const std::vector<Comparison>& c, const std::vector<Summary>& s,
                            const std::vector<CaseFile>& files, const std::vector<Figure>& figures,
                            const ReportContext& context);

// {context, summary, comparisons, curves}.
std::string report_json(const std::vector<Comparison>& c, const std::vector<Summary>& s,
                        const std::vector<Curve>& curves, const ReportContext& context);

// One page with no external references: the command and version, the summary, the parity plot,
// then per data set its description, figures (SVG inlined) and per-case table. Every element is
// closed, so the page also parses as XML.
std::string report_html(const std::vector<Comparison>& c, const std::vector<Summary>& s,
                        const std::vector<CaseFile>& files, const std::vector<Figure>& figures,
                        const ReportContext& context);

}  // namespace dlsim::validate
