#pragma once
// Published runs against dlsim's predictions (docs/validate.md, "Published runs"). A data set is
// any CSV with a header row (the columns of ../shared/validation/throughput.csv or
// scaling_claims.csv); a cases file maps its rows to dlsim configurations, so adding a published
// table needs data only, no code.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "simulator/predict.hpp"

namespace dlsim::validate {

using Row = std::map<std::string, std::string>;

struct Table {
  std::string name;  // the file's stem: cases select it with `data:`
  std::string path;
  std::vector<std::string> columns;
  std::vector<Row> rows;
  std::vector<int> lines;  // 1-based file line of each row
};
// Reads a CSV (RFC 4180 quoting). A row with another number of fields than the header, or a
// missing file, is an InputError naming the file and line.
Table read_table(const std::string& path);

// One case: the rows it selects and the dlsim configuration that predicts them.
struct Case {
  std::string name;
  std::string data;                                 // table name
  std::string figure;                               // plot it belongs to (default: the file's name)
  std::map<std::string, std::string> match;         // column -> exact value
  std::map<std::string, std::string> contains;      // column -> substring
  std::string quantity;                             // throughput | scaling_efficiency
  std::map<std::string, std::string> anchor_match;  // the row whose value anchors compute
  std::optional<double> anchor_throughput;          // or a given single-GPU samples/s
  simulator::PredictOptions predict;                // model, gpus and batch come from the row
  std::optional<std::string> model;                 // else the row's model (a zoo name)
  std::optional<std::string> batch;                 // else the row's batch_per_gpu
  // Parameter servers by the row's GPU count, where a table changed them (else predict's).
  std::map<int, int> ps_servers_at;
  // Why this case's rows stay out of the gate, where they do (a measured cause in words,
  // docs/validate.md); the rows are still reported.
  std::optional<std::string> not_gated;
};
struct CaseFile {
  std::string name, description, source, path;
  std::vector<Case> cases;
};
// Reads a cases file; unknown keys, a bad quantity or predict option are InputErrors naming the
// file, line and key.
CaseFile read_cases(const std::string& path);
// The cases of a YAML text that is (or will be) the file at `path`: errors name that path, and a
// relative cluster file is found from its folder.
CaseFile parse_cases(const std::string& text, const std::string& path);

struct Comparison {
  std::string data_set;  // the cases file's name
  std::string case_name, figure, model, batch;
  int gpus = 0;
  double measured = 0, predicted = 0;  // in the quantity's unit (samples/s or %)
  std::string unit;
  double error = 0;     // (predicted - measured) / measured
  int line = 0;         // of the measured row
  bool anchor = false;  // the row that anchored compute (error 0 by construction; not counted)
  bool gated = true;    // false: its case is out of the gate (Case::not_gated)
  // The anchor: its GPU count and measured samples/s (1 and the given rate for a throughput
  // anchor; 0 without one), and the single-GPU samples/s compute was scaled to (0: none).
  int anchor_gpus = 0;
  double anchor_value = 0, anchor_throughput = 0;
};

// Runs every case against the tables; a case that matches no row, or whose anchor row is
// missing, is an InputError naming the cases file and the case. An anchor row of more than one
// GPU (a table without a single-GPU row) anchors through the single-GPU rate that reproduces
// it, found by fixed-point iteration.
std::vector<Comparison> compare(const std::vector<Table>& tables, const CaseFile& cases);

// A case's predictions at its measured GPU counts and at the powers of two between its anchor
// (or smallest row) and its largest row: the line a plot draws through the measured points.
struct Curve {
  std::string data_set, case_name, figure, unit;
  std::vector<int> gpus;
  std::vector<double> predicted;  // in the unit
};
std::vector<Curve> predicted_curves(const CaseFile& cases, const std::vector<Comparison>& c);

struct Summary {
  std::string data_set;
  int count = 0;  // comparisons counted (anchors left out)
  double median_abs = 0, p90_abs = 0, worst_abs = 0;
  std::string worst_case;
};
// Per data set and overall ("all"): median, P90 (nearest rank) and worst absolute error.
// `gated_only`: of the comparisons whose case is in the gate (what --max-median-error and
// --max-p90-error hold).
std::vector<Summary> summarize(const std::vector<Comparison>& comparisons, bool gated_only = false);

}  // namespace dlsim::validate
