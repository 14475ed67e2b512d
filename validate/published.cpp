#include "validate/published.hpp"

#include <fmt/format.h>
#include <charconv>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace dlsim::validate {
namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';  // "" inside quotes
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

std::map<std::string, std::string> string_map(const ConfigNode& n) {
  std::map<std::string, std::string> m;
  for (const auto& k : n.keys()) m[k] = n.get<std::string>(k);
  n.finish();
  return m;
}

bool matches(const Row& row, const std::map<std::string, std::string>& exact,
             const std::map<std::string, std::string>& contains) {
  for (const auto& [k, v] : exact) {
    if (row.at(k) != v) return false;
  }
  for (const auto& [k, v] : contains) {
    if (row.at(k).find(v) == std::string::npos) return false;
  }
  return true;
}

// A number written in decimal digits (no hexadecimal, no padding, finite), as dlsim's flags take.
double number(const Table& t, std::size_t i, const std::string& column) {
  const auto& text = t.rows[i].at(column);
  if (const auto v = parse_number(text)) return *v;
  fail_at({t.path, t.lines[i]}, column,
          fmt::format("'{}' is not a number written in decimal digits", text));
}

// A measured value of a row: a positive, finite number (errors are relative to it, and the
// plots take its logarithm).
// Bounds of a row: a GPU count as the programs take one (2^20 ranks), and a measurement far
// above any published figure (samples/s or %), so that errors and plots stay finite.
constexpr int kMaxRowGpus = 1 << 20;
constexpr int kMaxRowBatch = 1 << 24;  // dlsim's largest batch per GPU (model::kMaxBatch)
constexpr double kMaxMeasurement = 1e12;

double measurement(const Table& t, std::size_t i, const std::string& column) {
  const double v = number(t, i, column);
  if (!(v > 0) || !std::isfinite(v) || v > kMaxMeasurement) {
    fail_at({t.path, t.lines[i]}, column,
            fmt::format("'{}' is not a positive measurement (at most {:g})", t.rows[i].at(column),
                        kMaxMeasurement));
  }
  return v;
}

// A count of a row ("num_gpus"): a whole number in [1, max].
int count(const Table& t, std::size_t i, const std::string& column, int max) {
  const double v = number(t, i, column);
  if (!(v >= 1 && v <= max) || v != std::floor(v)) {
    fail_at({t.path, t.lines[i]}, column,
            fmt::format("'{}' is not a whole number in 1..{}", t.rows[i].at(column), max));
  }
  return static_cast<int>(v);
}

// The units a throughput row may be in: samples of some kind per second, of the job or "(total)".
bool throughput_unit(const std::string& unit) {
  static const std::regex units(R"((images|samples|sentences|sequences|tokens)/s( \(total\))?)");
  return std::regex_match(unit, units);
}

// Nearest-rank percentile of sorted values (q in (0, 1]).
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::max<std::size_t>(rank, 1) - 1];
}

}  // namespace

Table read_table(const std::string& path) {
  refuse_non_file(path, "--data");
  std::ifstream in(path);
  if (!in) fail_at({path}, "--data", "cannot open the file");
  Table t;
  t.path = path;
  t.name = std::filesystem::path(path).stem().string();
  std::string line;
  if (!std::getline(in, line)) fail_at({path}, "", "empty file (no header row)");
  // A spreadsheet's UTF-8 byte-order mark is no part of the first column's name.
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  t.columns = split_csv(line);
  for (std::size_t i = 0; i < t.columns.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (t.columns[i] == t.columns[j]) {
        fail_at({path, 1}, t.columns[i],
                fmt::format("column given twice (fields {} and {})", j + 1, i + 1));
      }
    }
  }
  int no = 1;
  while (std::getline(in, line)) {
    ++no;
    if (line.empty() || line == "\r") continue;
    const auto cells = split_csv(line);
    if (cells.size() != t.columns.size()) {
      fail_at({path, no}, "",
              fmt::format("{} fields where the header has {} (a cut or misquoted row)",
                          cells.size(), t.columns.size()));
    }
    Row r;
    for (std::size_t i = 0; i < cells.size(); ++i) r[t.columns[i]] = cells[i];
    t.rows.push_back(std::move(r));
    t.lines.push_back(no);
  }
  return t;
}

namespace {

CaseFile cases_from(const ConfigNode& root, const std::string& path) {
  CaseFile f;
  f.path = path;
  if (root.get<std::string>("kind") != "validation-cases") {
    root.child("kind").fail("expected 'validation-cases'");
  }
  f.name = root.get<std::string>("name");
  f.description = root.get<std::string>("description");
  f.source = root.get<std::string>("source");
  std::map<std::string, std::size_t> names;  // a case's name -> its index
  for (const auto& c : root.child("cases").elements()) {
    Case k;
    k.name = c.get<std::string>("name");
    // A case is named in the report, the gate's worst row and its plots: one name, one case
    // (a second case of one name would compare its rows twice), in plain characters.
    if (k.name.find_first_not_of(" \t") == std::string::npos) c.child("name").fail("is empty");
    if (std::any_of(k.name.begin(), k.name.end(),
                    [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; })) {
      c.child("name").fail("holds a control character (a line break or tab splits the report)");
    }
    if (const auto [it, added] = names.try_emplace(k.name, f.cases.size()); !added) {
      c.child("name").fail(fmt::format("'{}' is also the name of cases[{}]", k.name, it->second));
    }
    k.data = c.get<std::string>("data");
    k.figure = c.get_or<std::string>("figure", f.name);
    k.match = string_map(c.child("match"));
    if (c.has("contains")) k.contains = string_map(c.child("contains"));
    k.quantity = c.get<std::string>("quantity");
    if (c.has("not_gated")) {
      k.not_gated = c.get<std::string>("not_gated");
      if (k.not_gated->find_first_not_of(" \t") == std::string::npos) {
        c.child("not_gated").fail("give the measured cause that keeps the case out of the gate");
      }
    }
    if (k.quantity != "throughput" && k.quantity != "scaling_efficiency") {
      c.child("quantity").fail("must be throughput or scaling_efficiency");
    }
    if (c.has("anchor")) {
      const auto a = c.child("anchor");
      if (a.has("match")) k.anchor_match = string_map(a.child("match"));
      if (a.has("throughput")) {
        k.anchor_throughput = a.get<double>("throughput");
        if (!(*k.anchor_throughput > 0 &&
              *k.anchor_throughput <= simulator::kMaxAnchorThroughput)) {
          a.child("throughput")
              .fail(fmt::format("must be a single-GPU rate in (0, {:g}] samples/s, got {}",
                                simulator::kMaxAnchorThroughput, *k.anchor_throughput));
        }
      }
      a.finish();
      if (k.anchor_match.empty() == !k.anchor_throughput) {
        a.fail("give exactly one of match (a row of the table) or throughput (samples/s)");
      }
    }
    const auto p = c.child("predict");
    auto& o = k.predict;
    o.cluster = p.get<std::string>("cluster");
    // A cluster file (not a preset name) is relative to the cases file, like an include.
    if (o.cluster.size() > 5 && o.cluster.ends_with(".yaml") &&
        std::filesystem::path(o.cluster).is_relative()) {
      // The cases file's real folder: `..` then climbs from where the file is, also when it
      // was reached through a symbolic link.
      std::error_code ec;
      const auto real = std::filesystem::weakly_canonical(path, ec);
      o.cluster = ((ec ? std::filesystem::path(path) : real).parent_path() / o.cluster)
                      .lexically_normal()
                      .string();
    }
    o.framework = p.get_or<std::string>("framework", o.framework);
    if (p.has("strategy")) o.strategy = p.get<std::string>("strategy");
    if (p.has("library")) o.library = p.get<std::string>("library");
    if (p.has("network")) o.network = p.get<std::string>("network");
    if (p.has("precision")) {
      const auto text = p.get<std::string>("precision");
      const auto v = simulator::parse_training_precision(text);
      if (!v)
        p.child("precision")
            .fail(fmt::format("unknown precision '{}' ({})", text,
                              simulator::training_precision_names()));
      o.precision = *v;
    }
    if (p.has("optimizer")) {
      const auto text = p.get<std::string>("optimizer");
      const auto v = simulator::parse_optimizer(text);
      if (!v) {
        p.child("optimizer")
            .fail(fmt::format("unknown optimizer '{}' (sgd, momentum, adam)", text));
      }
      o.optimizer = *v;
    }
    if (p.has("engine")) {
      const auto text = p.get<std::string>("engine");
      const auto v = simulator::parse_engine(text);
      if (!v) p.child("engine").fail(fmt::format("unknown engine '{}' (des, analytic)", text));
      o.engine = *v;
    }
    if (p.has("model")) k.model = p.get<std::string>("model");
    if (p.has("batch")) {
      k.batch = p.get<std::string>("batch");
      simulator::PredictOptions probe;
      if (!simulator::set_batch(probe, *k.batch)) {
        p.child("batch").fail(fmt::format("'{}' is not a positive batch or 'max'", *k.batch));
      }
    }
    if (p.has("set")) o.model_params = string_map(p.child("set"));
    auto quantity = [&](const char* key, auto parse) {
      const auto n = p.child(key);
      try {
        return parse(n.template as<std::string>());
      } catch (const std::invalid_argument& e) {
        n.fail(e.what());
      }
    };
    if (p.has("fusion_threshold")) {
      o.framework_options.fusion_threshold = quantity("fusion_threshold", parse_whole_bytes);
    }
    if (p.has("cycle_time")) {
      // Zero or more (parse_seconds refuses negatives): 0 is HOROVOD_CYCLE_TIME=0.
      o.framework_options.cycle_time = quantity("cycle_time", parse_seconds);
    }
    if (p.has("bucket_cap")) {
      o.framework_options.bucket_cap = quantity("bucket_cap", parse_whole_bytes);
      if (!(o.framework_options.bucket_cap->value() > 0)) {
        p.child("bucket_cap").fail("must be positive");
      }
    }
    if (p.has("mode")) o.framework_options.mode = p.get<std::string>("mode");
    if (p.has("negotiation")) {
      const auto text = p.get<std::string>("negotiation");
      o.framework_options.negotiation = simulator::parse_negotiation(text);
      if (!o.framework_options.negotiation) {
        p.child("negotiation").fail(fmt::format("unknown negotiation '{}' (cache, gather)", text));
      }
    }
    if (p.has("cache_capacity")) {
      const int v = p.get<int>("cache_capacity");
      if (v < 0) p.child("cache_capacity").fail(fmt::format("must be 0 or more, got {}", v));
      o.framework_options.cache_capacity = v;
    }
    if (p.has("compression")) {
      const auto text = p.get<std::string>("compression");
      o.framework_options.compression = simulator::parse_gradient_compression(text);
      if (!o.framework_options.compression) {
        p.child("compression").fail(fmt::format("unknown compression '{}' (none, fp16)", text));
      }
    }
    if (p.has("overlap")) o.overlap = p.get<bool>("overlap");
    if (p.has("xla")) o.framework_options.xla = p.get<bool>("xla");
    if (p.has("host_staging")) o.framework_options.host_staging = p.get<bool>("host_staging");
    if (p.has("input_rate")) {
      // Samples/s per node the runs' input pipeline was measured to deliver.
      const double v = p.get<double>("input_rate");
      if (!(v > 0 && v <= simulator::kMaxInputRate)) {
        p.child("input_rate")
            .fail(fmt::format("must be positive samples/s per node, at most {:g}, got {}",
                              simulator::kMaxInputRate, v));
      }
      o.input_rate = v;
    }
    if (p.has("partition")) {
      o.framework_options.partition_bytes = quantity("partition", parse_whole_bytes);
      if (!(o.framework_options.partition_bytes->value() > 0)) {
        p.child("partition").fail("must be positive");
      }
    }
    auto count = [&](const char* key) {
      const int v = p.get<int>(key);
      if (v < 1) p.child(key).fail(fmt::format("must be at least 1, got {}", v));
      return v;
    };
    if (p.has("ps_servers")) o.framework_options.ps_servers = count("ps_servers");
    if (p.has("ps_device")) {
      const auto d = p.get<std::string>("ps_device");
      if (d != "cpu" && d != "gpu")
        p.child("ps_device").fail(fmt::format("'{}' is not cpu or gpu", d));
      o.framework_options.ps_on_gpu = d == "gpu";
    }
    if (p.has("ps_placement")) {
      const auto d = p.get<std::string>("ps_placement");
      if (d != "colocated" && d != "dedicated") {
        p.child("ps_placement").fail(fmt::format("'{}' is not colocated or dedicated", d));
      }
      o.framework_options.ps_colocated = d == "colocated";
    }
    if (p.has("ps_servers_at")) {
      // {GPUs: servers}: the rows whose runs used another server count than the rest.
      const auto at = p.child("ps_servers_at");
      for (const auto& key : at.keys()) {
        int gpus = 0;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), gpus);
        if (ec != std::errc() || end != key.data() + key.size() || gpus < 1) {
          at.child(key).fail(fmt::format("'{}' is not a GPU count", key));
        }
        const int v = at.get<int>(key);
        if (v < 1) at.child(key).fail(fmt::format("must be at least 1, got {}", v));
        k.ps_servers_at[gpus] = v;
      }
    }
    // GPUs used per node, where the cluster's nodes have more than the runs used (e.g. one rank
    // per node of a calibrated profile).
    if (p.has("gpus_per_node")) o.gpus_per_node = count("gpus_per_node");
    p.finish();
    c.finish();
    f.cases.push_back(std::move(k));
  }
  root.finish();
  if (f.cases.empty()) root.child("cases").fail("no cases");
  return f;
}

}  // namespace

CaseFile read_cases(const std::string& path) {
  return cases_from(ConfigNode::load_file(path), path);
}

CaseFile parse_cases(const std::string& text, const std::string& path) {
  return cases_from(ConfigNode::load_string(text, path), path);
}

namespace {

// Samples/s (or % for scaling_efficiency) that the case's configuration predicts.
struct Predictor {
  const CaseFile& file;
  const Case& c;

  double operator()(const std::string& model, int gpus, const std::string& batch,
                    double anchor) const {
    simulator::PredictOptions o = c.predict;
    o.model = model;
    o.gpus = gpus;
    if (!simulator::set_batch(o, batch)) {
      fail_at({file.path}, fmt::format("case '{}'", c.name),
              fmt::format("batch '{}' is not a positive integer or 'max'", batch));
    }
    if (anchor > 0) o.anchor_throughput = anchor;
    if (const auto it = c.ps_servers_at.find(gpus); it != c.ps_servers_at.end()) {
      o.framework_options.ps_servers = it->second;
    }
    try {
      const auto p = simulator::predict(o);
      return c.quantity == "scaling_efficiency" ? p.scaling_efficiency * 100 : p.throughput;
    } catch (const InputError& e) {
      fail_at({file.path}, fmt::format("case '{}'", c.name),
              fmt::format("{} GPUs: {}", gpus, e.what()));
    }
  }
};

// The single-GPU samples/s for which the prediction at `gpus` comes closest to `target`.
// Predicted throughput grows with the anchor nearly in proportion (only compute is scaled), so
// x <- x * target / predicted(x) gets close in a few steps; Horovod's cycle and the straggler
// draws make it a staircase at fine scale, so bisection between the last values below and
// above the target finishes. Fails when the closest is more than 0.5 % off.
double solve_anchor(const Predictor& predict, const std::string& model, int gpus,
                    const std::string& batch, double target) {
  double best = 0, best_miss = std::numeric_limits<double>::infinity();
  double below = 0, above = 0;  // anchors predicting less and more than the target
  const auto probe = [&](double x) {
    const double p = predict(model, gpus, batch, x);
    const double miss = std::abs(p - target) / target;
    if (miss < best_miss) {
      best = x;
      best_miss = miss;
    }
    (p < target ? below : above) = x;
    return p;
  };
  double x = target / gpus;
  for (int i = 0; i < 6 && best_miss > 1e-6; ++i) x *= target / probe(x);
  for (int i = 0; i < 20 && best_miss > 1e-6 && (below == 0 || above == 0); ++i) {
    probe(below == 0 ? best * (1 - 0.01 * (i + 1)) : best * (1 + 0.01 * (i + 1)));
  }
  for (int i = 0; i < 40 && best_miss > 1e-6 && below > 0 && above > 0; ++i) {
    if (std::abs(above - below) <= 1e-9 * above) break;
    probe(0.5 * (below + above));
  }
  if (best_miss > 5e-3) {
    fail_at({predict.file.path}, fmt::format("case '{}'", predict.c.name),
            fmt::format("no single-GPU rate reproduces its {}-GPU anchor row ({} samples/s) "
                        "within 0.5 %",
                        gpus, target));
  }
  return best;
}

}  // namespace

std::vector<Comparison> compare(const std::vector<Table>& tables, const CaseFile& file) {
  std::vector<Comparison> out;
  for (const auto& c : file.cases) {
    const auto t = std::find_if(tables.begin(), tables.end(),
                                [&](const Table& x) { return x.name == c.data; });
    const std::string where = fmt::format("case '{}'", c.name);
    if (t == tables.end()) {
      fail_at({file.path}, where, fmt::format("no --data file named '{}'", c.data));
    }
    std::vector<std::string> needed = {"num_gpus", "value", "unit"};
    if (!c.model) needed.push_back("model");
    if (!c.batch) needed.push_back("batch_per_gpu");
    for (const auto& [k, v] : c.match) needed.push_back(k);
    for (const auto& [k, v] : c.contains) needed.push_back(k);
    for (const auto& [k, v] : c.anchor_match) needed.push_back(k);
    for (const auto& col : needed) {
      if (std::find(t->columns.begin(), t->columns.end(), col) == t->columns.end()) {
        fail_at({t->path}, col,
                fmt::format("missing column (needed by {} of {})", where, file.path));
      }
    }
    // The rows of the case, one per GPU count (the first in file order).
    std::map<int, std::size_t> by_gpus;
    for (std::size_t i = 0; i < t->rows.size(); ++i) {
      if (!matches(t->rows[i], c.match, c.contains)) continue;
      by_gpus.try_emplace(count(*t, i, "num_gpus", kMaxRowGpus), i);
    }
    if (by_gpus.empty()) fail_at({file.path}, where, "matches no row of " + t->path);
    const bool efficiency = c.quantity == "scaling_efficiency";
    const auto model_of = [&](std::size_t i) {
      return c.model ? *c.model : t->rows[i].at("model");
    };
    // A batch from the table is checked at its cell (the case's own is checked with the case).
    const auto batch_of = [&](std::size_t i) {
      return c.batch ? *c.batch : std::to_string(count(*t, i, "batch_per_gpu", kMaxRowBatch));
    };
    const Predictor predict{file, c};

    std::optional<std::size_t> anchor_row;
    int anchor_gpus = 0;
    double anchor_value = 0, anchor = 0;
    if (c.anchor_throughput) {
      anchor_gpus = 1;
      anchor_value = anchor = *c.anchor_throughput;
    } else if (!c.anchor_match.empty()) {
      for (const auto& [g, i] : by_gpus) {
        if (matches(t->rows[i], c.anchor_match, {})) {
          anchor_row = i;
          anchor_gpus = g;
          break;
        }
      }
      if (!anchor_row) fail_at({file.path}, where, "its anchor matches none of its rows");
      anchor_value = measurement(*t, *anchor_row, "value");
      if (anchor_gpus == 1) {
        anchor = anchor_value;
      } else if (efficiency) {
        fail_at({file.path}, where, "a scaling_efficiency case needs a single-GPU anchor");
      } else {
        anchor = solve_anchor(predict, model_of(*anchor_row), anchor_gpus, batch_of(*anchor_row),
                              anchor_value);
      }
    }
    for (const auto& [gpus, i] : by_gpus) {
      const auto& row = t->rows[i];
      const std::string unit = row.at("unit");
      if (efficiency ? unit != "%" : !throughput_unit(unit)) {
        fail_at({t->path, t->lines[i]}, "unit",
                fmt::format("'{}' is not a {} unit ({})", unit, c.quantity, where));
      }
      Comparison k;
      k.data_set = file.name;
      k.case_name = c.name;
      k.figure = c.figure;
      k.model = model_of(i);
      k.batch = batch_of(i);
      k.gpus = gpus;
      k.measured = measurement(*t, i, "value");
      k.predicted = predict(k.model, gpus, k.batch, anchor);
      k.unit = efficiency ? "%" : "samples/s";
      k.error = (k.predicted - k.measured) / k.measured;
      k.line = t->lines[i];
      k.anchor = anchor_row && *anchor_row == i;
      k.anchor_gpus = anchor_gpus;
      k.anchor_value = anchor_value;
      k.anchor_throughput = anchor;
      k.gated = !c.not_gated;
      out.push_back(k);
    }
  }
  return out;
}

std::vector<Curve> predicted_curves(const CaseFile& file, const std::vector<Comparison>& cs) {
  std::vector<Curve> out;
  for (const auto& c : file.cases) {
    std::map<int, double> points;  // GPUs -> predicted, measured counts first
    const Comparison* first = nullptr;
    for (const auto& k : cs) {
      if (k.data_set != file.name || k.case_name != c.name) continue;
      if (!first) first = &k;
      points[k.gpus] = k.predicted;
    }
    if (!first) continue;
    const int lo = first->anchor_gpus > 0 ? std::min(first->anchor_gpus, points.begin()->first)
                                          : points.begin()->first;
    const int hi = points.rbegin()->first;
    const Predictor predict{file, c};
    for (int g = 1; g <= hi; g *= 2) {
      if (g >= lo && !points.count(g)) {
        points[g] = predict(first->model, g, first->batch, first->anchor_throughput);
      }
    }
    Curve curve{file.name, c.name, c.figure, first->unit, {}, {}};
    for (const auto& [g, v] : points) {
      curve.gpus.push_back(g);
      curve.predicted.push_back(v);
    }
    out.push_back(std::move(curve));
  }
  return out;
}

std::vector<Summary> summarize(const std::vector<Comparison>& comparisons, bool gated_only) {
  std::map<std::string, std::vector<const Comparison*>> groups;
  for (const auto& c : comparisons) {
    if (c.anchor || (gated_only && !c.gated)) continue;
    groups[c.data_set].push_back(&c);
    groups["all"].push_back(&c);
  }
  std::vector<Summary> out;
  for (auto& [name, cs] : groups) {
    Summary s;
    s.data_set = name;
    s.count = static_cast<int>(cs.size());
    std::vector<double> e;
    for (const auto* c : cs) {
      e.push_back(std::abs(c->error));
      if (std::abs(c->error) >= s.worst_abs) {
        s.worst_abs = std::abs(c->error);
        s.worst_case = fmt::format("{} {} GPUs", c->case_name, c->gpus);
      }
    }
    std::sort(e.begin(), e.end());
    s.median_abs = e.size() % 2 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
    s.p90_abs = percentile(e, 0.9);
    out.push_back(s);
  }
  // "all" last.
  std::stable_partition(out.begin(), out.end(),
                        [](const Summary& s) { return s.data_set != "all"; });
  return out;
}

}  // namespace dlsim::validate
