// Log and timeline readers (validate/readers.hpp). The formats are those of the print statements
// and writers named in docs/validate-readers.md, "Sources".

#include "validate/readers.hpp"
#include "common/json_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "calibrate/log_text.hpp"
#include "common/units.hpp"
#include "model/loader.hpp"

namespace dlsim::validate {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") + 1 - b);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::optional<double> to_number(const std::string& s) { return parse_number(s); }

// ---------------------------------------------------------------------------------------------
// Log lines

struct LogLine {
  std::string text;  // without the rank tag and trailing '\r'
  int rank = -1;
  int line = 0;
};

// Strips an output tag: Open MPI --tag-output "[1,3]<stdout>:", horovodrun "[3]<stdout>:",
// srun --label "3: ". Returns the rank, or -1 when the line has no tag.
int strip_tag(std::string& s, const SourceLocation& where) {
  static const std::regex mpi(R"(^\[(?:\d+,)?(\d+)\]<std(?:out|err)>:)");
  static const std::regex srun(R"(^\s*(\d+): )");
  std::smatch m;
  if (!s.empty() && s[0] == '[' && std::regex_search(s, m, mpi)) {
    const int rank = calibrate::log_count(m[1].str(), where, "rank tag");
    s.erase(0, static_cast<std::size_t>(m.length(0)));
    return rank;
  }
  if (!s.empty() && std::regex_search(s, m, srun)) {
    const int rank = calibrate::log_count(m[1].str(), where, "rank tag");
    s.erase(0, static_cast<std::size_t>(m.length(0)));
    return rank;
  }
  return -1;
}

std::vector<LogLine> read_lines(const std::string& path) {
  refuse_non_file(path, "");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_at({path}, "", "cannot open the file");
  std::vector<LogLine> out;
  std::string s;
  int no = 0;
  while (std::getline(in, s)) {
    ++no;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    calibrate::refuse_long_line({path, no}, s.size(), "a training framework's log");
    LogLine l;
    l.rank = strip_tag(s, {path, no});
    l.text = std::move(s);
    l.line = no;
    out.push_back(std::move(l));
  }
  if (out.empty()) fail_at({path}, "", "empty file");
  return out;
}

// The value after `prefix` ("Model:") when the line starts with it.
std::optional<std::string> after(const std::string& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return std::nullopt;
  return trim(text.substr(prefix.size()));
}

// Header values of a log; a field printed again (by another rank) must say the same.
class Header {
 public:
  explicit Header(std::string path) : path_(std::move(path)) {}
  void set(const std::string& field, const std::string& value, int line) {
    const auto [it, added] = values_.try_emplace(field, value, line);
    if (!added && it->second.first != value) {
      fail_at({path_, line}, field,
              fmt::format("'{}' where line {} says '{}' (two runs in one log?)", value,
                          it->second.second, it->second.first));
    }
  }
  bool has(const std::string& field) const { return values_.count(field) > 0; }
  const std::string& value(const std::string& field) const { return values_.at(field).first; }
  int line(const std::string& field) const { return values_.at(field).second; }
  std::string get_or(const std::string& field, const std::string& fallback = {}) const {
    return has(field) ? value(field) : fallback;
  }
  // A required field; its absence is an error naming the line that would print it.
  void require(const std::string& field, const std::string& printed_as) const {
    if (!has(field)) fail_at({path_}, "", fmt::format("no '{}' line", printed_as));
  }
  // The field as a positive whole number (printed as "64" or "64.0") that an int holds.
  int count(const std::string& field) const {
    const auto v = to_number(value(field));
    if (!v || *v < 1 || std::floor(*v) != *v) {
      fail_at({path_, line(field)}, field,
              fmt::format("'{}' is not a positive whole number", value(field)));
    }
    if (*v > std::numeric_limits<int>::max()) {
      fail_at({path_, line(field)}, field,
              fmt::format("'{}' is out of range (at most 2^31-1)", value(field)));
    }
    return static_cast<int>(*v);
  }

 private:
  std::string path_;
  std::map<std::string, std::pair<std::string, int>> values_;
};

double number_at(const std::string& text, const std::string& path, int line,
                 const std::string& field) {
  const auto v = to_number(text);
  if (!v) fail_at({path, line}, field, fmt::format("'{}' is not a number", text));
  return *v;
}

constexpr double kMaxRate = 1e15;

// A throughput the log reports: a positive number (a rate of 0 or below is a broken log line,
// and a report could not divide by it).
double rate_at(const std::string& text, const std::string& path, int line,
               const std::string& field) {
  const double v = number_at(text, path, line, field);
  if (!(v > 0)) fail_at({path, line}, field, fmt::format("'{}' is not a positive rate", text));
  // Far above any machine's rate, and small enough that a rate times the GPUs stays finite.
  if (v > kMaxRate) {
    fail_at({path, line}, field,
            fmt::format("'{}' is out of range (at most {:g}/s)", text, kMaxRate));
  }
  return v;
}

// "where the log ends" for a missing total line.
std::string log_end(const std::vector<LogLine>& lines, const std::vector<StepValue>& steps,
                    const char* step_word) {
  const int end = lines.back().line;
  if (steps.empty())
    return fmt::format("the log ends at line {} before its first {}", end, step_word);
  const auto& last = steps.back();
  if (last.line == end) {
    return fmt::format("the log ends with {} {}: was the job stopped before its end?", step_word,
                       last.step);
  }
  return fmt::format(
      "the log ends at line {}, after {} {} (line {}): was the job stopped before "
      "its end?",
      end, step_word, last.step, last.line);
}

void set_model(Measurement& m, const Header& h, const LogOptions& o) {
  m.model_printed = h.value("Model");
  m.lines["model"] = h.line("Model");
  if (!o.model.empty()) {
    const auto names = model::zoo_names();
    if (std::find(names.begin(), names.end(), o.model) == names.end()) {
      fail_at(
          {}, "--model",
          fmt::format("'{}' is not a dlsim zoo model{}", o.model, did_you_mean(o.model, names)));
    }
    m.model = o.model;
  } else {
    m.model = zoo_model_name(m.model_printed, {m.path, h.line("Model")});
  }
}

// ---------------------------------------------------------------------------------------------
// tf_cnn_benchmarks

const std::regex& tf_step_line() {
  // benchmark_one_step: '%i\t%s\t%.*f' % (step + 1, get_perf_timing_str(...), 3, loss), where
  // get_perf_timing_str is 'images/sec: %.1f +/- %.1f (jitter = %.1f)' (or 'images/sec: %.1f'),
  // optionally followed by top-1 and top-5 accuracy.
  static const std::regex r(
      R"(^(\d+)\s+images/sec:\s*(\S+)(?:\s+\+/-\s+(\S+)\s+\(jitter\s*=\s*(\S+)\))?(?:\s+(\S+))?.*$)");
  return r;
}

bool is_tf_step(const std::string& t) {
  return !t.empty() && std::isdigit(static_cast<unsigned char>(t[0])) &&
         t.find("images/sec:") != std::string::npos;
}

// Devices: "['/gpu:0', '/gpu:1']" or "['horovod/gpu:0', ...]" -> the entries.
std::vector<std::string> device_list(const std::string& s, const std::string& path, int line) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') {
    fail_at({path, line}, "Devices", fmt::format("'{}' is not a list like ['/gpu:0']", s));
  }
  std::vector<std::string> out;
  std::string item;
  for (char c : s.substr(1, s.size() - 2) + ",") {
    if (c == ',') {
      item = trim(item);
      if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"')) {
        item = item.substr(1, item.size() - 2);
      }
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  return out;
}

// print_info's lines "Label:   value" (the batch size aside) -> (label, value).
std::optional<std::pair<std::string, std::string>> tf_header_field(const std::string& t) {
  static const char* const labels[] = {"TensorFlow", "Model",       "Dataset",   "Mode",
                                       "Devices",    "Data format", "Optimizer", "Variables",
                                       "AllReduce",  "Horovod on",  "Sync"};
  for (const char* label : labels) {
    if (auto v = after(t, std::string(label) + ":")) return std::pair{std::string(label), *v};
  }
  return std::nullopt;
}

struct RankTotal {
  double value = 0;
  int rank = -1;
  int line = 0;
};

Measurement read_tf_cnn_benchmarks(const std::string& path, const std::vector<LogLine>& lines,
                                   const LogOptions& o) {
  Measurement m;
  m.format = "tf_cnn_benchmarks";
  m.path = path;
  Header h(path);
  std::vector<std::pair<int, int>> headers;  // (rank, line) of each "Model:"
  std::vector<RankTotal> totals;
  for (const auto& l : lines) {
    const auto& t = l.text;
    std::smatch s;
    if (const auto field = tf_header_field(t)) {
      if (field->first == "Model") headers.emplace_back(l.rank, l.line);
      h.set(field->first, field->second, l.line);
    } else if (const auto batch = after(t, "Batch size:")) {
      // print_info: 'Batch size:  %s global', then '             %s per device'.
      static const std::regex global(R"(^(\S+)\s+global$)");
      if (!std::regex_match(*batch, s, global)) {
        fail_at({path, l.line}, "Batch size",
                fmt::format("'{}' is not 'N global' (a tf_cnn_benchmarks header)", *batch));
      }
      h.set("Batch size", s[1].str(), l.line);
    } else if (t.starts_with(" ") && trim(t).ends_with("per device")) {
      static const std::regex per(R"(^(\S+)\s+per device$)");
      const std::string v = trim(t);
      if (!std::regex_match(v, s, per)) {
        fail_at({path, l.line}, "Batch size", fmt::format("'{}' is not 'N per device'", v));
      }
      h.set("per device", s[1].str(), l.line);
    } else if (const auto total = after(t, "total images/sec:")) {
      totals.push_back({rate_at(*total, path, l.line, "total images/sec"), l.rank, l.line});
    } else if (is_tf_step(t)) {
      if (!std::regex_match(t, s, tf_step_line())) {
        fail_at({path, l.line}, "",
                "not a step line 'STEP<tab>images/sec: R +/- U (jitter = J)<tab>LOSS'");
      }
      StepValue sv;
      sv.rank = l.rank;
      sv.step = calibrate::log_count(s[1].str(), {path, l.line}, "step");
      sv.rate = rate_at(s[2].str(), path, l.line, "images/sec");
      if (s[3].matched) sv.spread = number_at(s[3].str(), path, l.line, "images/sec +/-");
      if (s[4].matched) number_at(s[4].str(), path, l.line, "jitter");
      if (s[5].matched) {
        // A diverged run prints nan; that is a value, not a malformed line.
        const std::string loss = lower(s[5].str());
        if (loss != "nan" && loss != "inf" && loss != "-inf") {
          sv.loss = number_at(s[5].str(), path, l.line, "loss");
        }
      }
      sv.line = l.line;
      m.steps.push_back(sv);
    }
  }
  if (headers.empty()) {
    fail_at({path}, "", "not a tf_cnn_benchmarks log: no 'Model:' line");
  }
  h.require("Batch size", "Batch size:  N global");
  h.require("per device", "             N per device");
  h.require("Variables", "Variables:");
  set_model(m, h, o);
  m.variables = h.value("Variables");
  m.lines["variables"] = h.line("Variables");
  if (h.has("AllReduce")) {
    m.all_reduce = h.value("AllReduce");
    m.lines["all_reduce"] = h.line("AllReduce");
  }
  m.horovod_device = h.get_or("Horovod on");
  m.distributed = h.has("Sync");
  m.dataset = h.get_or("Dataset");
  m.mode = h.get_or("Mode");
  m.data_format = h.get_or("Data format");
  m.optimizer = h.get_or("Optimizer");
  m.tensorflow = h.get_or("TensorFlow");
  if (!m.mode.empty() && m.mode != "training") {
    fail_at({path, h.line("Mode")}, "Mode",
            fmt::format("'{}': only training runs are compared with predictions", m.mode));
  }

  // print_info prints the global batch (per-device batch x GPUs per worker x workers) and the
  // per-device batch, so their ratio is the job's GPU count; Devices lists the same GPUs for a
  // local or Horovod run (a distributed parameter-server worker lists only its own).
  m.batch_per_gpu = h.count("per device");
  m.lines["batch_per_gpu"] = h.line("per device");
  const int global = h.count("Batch size");
  if (global % m.batch_per_gpu != 0) {
    fail_at({path, h.line("Batch size")}, "Batch size",
            fmt::format("{} global is not a multiple of {} per device", global, m.batch_per_gpu));
  }
  m.gpus = global / m.batch_per_gpu;
  m.lines["gpus"] = h.line("Batch size");
  if (h.has("Devices")) {
    const auto devices = device_list(h.value("Devices"), path, h.line("Devices"));
    const bool cpu = std::all_of(devices.begin(), devices.end(), [](const std::string& d) {
      return lower(d).find("cpu") != std::string::npos;
    });
    if (!devices.empty() && cpu) {
      fail_at({path, h.line("Devices")}, "Devices",
              fmt::format("the run used CPUs ({}), not GPUs", devices.front()));
    }
    if (!m.distributed && static_cast<int>(devices.size()) != m.gpus) {
      fail_at({path, h.line("Devices")}, "Devices",
              fmt::format("{} devices where the batch sizes say {} GPUs ({} global / {} per "
                          "device)",
                          devices.size(), m.gpus, global, m.batch_per_gpu));
    }
  }

  // Every run (every rank's header) ends with its total.
  if (totals.empty()) {
    fail_at({path, lines.back().line}, "",
            fmt::format("no 'total images/sec' line: {}", log_end(lines, m.steps, "step")));
  }
  const bool horovod = m.variables == "horovod";
  if (!horovod && headers.size() > 1) {
    fail_at({path, headers[1].second}, "",
            fmt::format("a second run starts here (the first at line {}): one run per log",
                        headers[0].second));
  }
  std::set<int> header_ranks, total_ranks;
  for (const auto& [r, line] : headers) header_ranks.insert(r);
  for (const auto& t : totals) {
    if (!total_ranks.insert(t.rank).second && t.rank >= 0) {
      fail_at({path, t.line}, "", fmt::format("rank {} prints a second total", t.rank));
    }
  }
  for (int r : header_ranks) {
    if (r >= 0 && !total_ranks.count(r)) {
      int last = 0;
      for (const auto& l : lines) {
        if (l.rank == r) last = l.line;
      }
      fail_at({path, last}, "",
              fmt::format("rank {}'s output ends here without its 'total images/sec'", r));
    }
  }
  if (headers.size() != totals.size()) {
    fail_at({path, totals.back().line}, "",
            fmt::format("{} runs or ranks print a header ('Model:') but {} print 'total "
                        "images/sec': a rank's output is cut or two logs are mixed",
                        headers.size(), totals.size()));
  }
  for (const auto& t : totals) {
    m.rank_totals.push_back(t.value);
    m.total_lines.push_back(t.line);
  }
  m.lines["total"] = totals.front().line;

  // The last step line of a rank: its mean rate since the warm-up and that mean's +/-.
  auto last_step = [&](int rank) -> const StepValue* {
    const StepValue* last = nullptr;
    for (const auto& s : m.steps) {
      if (s.rank == rank) last = &s;
    }
    return last;
  };
  if (!horovod) {
    m.total = totals.front().value;
    const auto* s = last_step(totals.front().rank);
    if (s && s->spread > 0) {
      m.spread = s->spread;
      m.spread_kind = fmt::format("the last step line's, step {}", s->step);
      m.lines["spread"] = s->line;
    } else {
      m.spread_kind = "no +/- printed";
    }
    return m;
  }

  // Horovod: tf_cnn_benchmarks prints on every rank num_workers x that rank's images/sec (the
  // whole job's rate seen from one rank); older copies printed the rank's own rate. The ratio of
  // a rank's total to its last step rate (this process's own images/sec) tells which.
  const int workers = m.gpus;
  bool per_rank = false;
  for (const auto& t : totals) {
    const auto* s = last_step(t.rank);
    if (!s || t.rank < 0 || workers == 1) continue;
    const double ratio = t.value / s->rate;
    const bool job = std::abs(ratio / workers - 1) < 0.25;
    const bool own = std::abs(ratio - 1) < 0.25;
    if (!job && !own) {
      fail_at({path, t.line}, "total images/sec",
              fmt::format("{} is neither rank {}'s rate ({} images/s at line {}) nor {} times it",
                          t.value, t.rank, s->rate, s->line, workers));
    }
    per_rank = per_rank || own;
  }
  double sum = 0, lo = totals.front().value, hi = lo;
  for (const auto& t : totals) {
    sum += t.value;
    lo = std::min(lo, t.value);
    hi = std::max(hi, t.value);
  }
  if (per_rank) {
    if (static_cast<int>(totals.size()) != workers) {
      fail_at({path, totals.back().line}, "total images/sec",
              fmt::format("each rank prints its own rate, but {} of {} ranks print a total",
                          totals.size(), workers));
    }
    m.total = sum;
    m.spread = (hi - lo) / 2 * workers;
    m.spread_kind = "half the range of the ranks' own rates, times the ranks";
  } else {
    m.total = sum / static_cast<double>(totals.size());
    if (totals.size() > 1) {
      m.spread = (hi - lo) / 2;
      m.spread_kind = fmt::format("half the range of the {} ranks' totals", totals.size());
    } else if (const auto* s = last_step(totals.front().rank); s && s->spread > 0) {
      m.spread = s->spread * workers;
      m.spread_kind = "the last step line's, times the ranks";
      m.lines["spread"] = s->line;
    } else {
      m.spread_kind = "no +/- printed";
    }
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// Horovod synthetic benchmarks

Measurement read_horovod(const std::string& path, const std::vector<LogLine>& lines,
                         const LogOptions& o) {
  Measurement m;
  m.format = "horovod";
  m.path = path;
  Header h(path);
  // log('Model: %s'), log('Batch size: %d'), log('Number of %ss: %d' % (device, hvd.size())),
  // log('Iter #%d: %.1f img/sec per %s'), log('Img/sec per %s: %.1f +-%.1f'),
  // log('Total img/sec on %d %s(s): %.1f +-%.1f').
  static const std::regex devices(R"(^Number of (\w+)s:\s*(\S+)$)");
  static const std::regex iter(R"(^Iter #(\d+):\s*(\S+) img/sec per (\w+)$)");
  static const std::regex per(R"(^Img/sec per (\w+):\s*(\S+)\s*\+-\s*(\S+)$)");
  static const std::regex total(R"(^Total img/sec on (\d+) (\w+)\(s\):\s*(\S+)\s*\+-\s*(\S+)$)");
  std::vector<int> total_lines;
  std::smatch s;
  for (const auto& l : lines) {
    const auto& t = l.text;
    if (const auto model = after(t, "Model:")) {
      h.set("Model", *model, l.line);
    } else if (const auto batch = after(t, "Batch size:")) {
      h.set("Batch size", *batch, l.line);
    } else if (t.starts_with("Number of ")) {
      if (!std::regex_match(t, s, devices)) {
        fail_at({path, l.line}, "", "not 'Number of GPUs: N'");
      }
      if (s[1].str() != "GPU") {
        fail_at({path, l.line}, "", fmt::format("the run used {}s, not GPUs", s[1].str()));
      }
      h.set("Number of GPUs", s[2].str(), l.line);
    } else if (t.starts_with("Iter #")) {
      if (!std::regex_match(t, s, iter)) {
        fail_at({path, l.line}, "", "not 'Iter #N: R img/sec per GPU'");
      }
      StepValue sv;
      sv.rank = l.rank;
      sv.step = calibrate::log_count(s[1].str(), {path, l.line}, "step");
      sv.rate = rate_at(s[2].str(), path, l.line, "img/sec");
      sv.line = l.line;
      m.steps.push_back(sv);
    } else if (t.starts_with("Img/sec per ")) {
      if (!std::regex_match(t, s, per)) {
        fail_at({path, l.line}, "", "not 'Img/sec per GPU: R +-C'");
      }
      number_at(s[2].str(), path, l.line, "Img/sec per GPU");
      number_at(s[3].str(), path, l.line, "Img/sec per GPU +-");
    } else if (t.starts_with("Total img/sec on ")) {
      if (!std::regex_match(t, s, total)) {
        fail_at({path, l.line}, "", "not 'Total img/sec on N GPU(s): R +-C'");
      }
      if (!total_lines.empty()) {
        fail_at({path, l.line}, "",
                fmt::format("a second total (the first at line {}): one run per log",
                            total_lines.front()));
      }
      h.set("Total img/sec on", s[1].str(), l.line);
      m.total = rate_at(s[3].str(), path, l.line, "Total img/sec");
      m.spread = number_at(s[4].str(), path, l.line, "Total img/sec +-");
      total_lines.push_back(l.line);
    }
  }
  h.require("Model", "Model:");
  h.require("Batch size", "Batch size:");
  h.require("Number of GPUs", "Number of GPUs:");
  set_model(m, h, o);
  m.batch_per_gpu = h.count("Batch size");
  m.lines["batch_per_gpu"] = h.line("Batch size");
  m.gpus = h.count("Number of GPUs");
  m.lines["gpus"] = h.line("Number of GPUs");
  if (total_lines.empty()) {
    fail_at({path, lines.back().line}, "",
            fmt::format("no 'Total img/sec on N GPU(s)' line: {}",
                        log_end(lines, m.steps, "iteration")));
  }
  if (h.count("Total img/sec on") != m.gpus) {
    fail_at({path, total_lines.front()}, "",
            fmt::format("the total is on {} GPUs where line {} says {}",
                        h.value("Total img/sec on"), h.line("Number of GPUs"), m.gpus));
  }
  m.total_lines = total_lines;
  m.lines["total"] = total_lines.front();
  m.lines["spread"] = total_lines.front();
  m.spread_kind = "1.96 x the standard deviation of the iterations, times the GPUs";
  return m;
}

// Which benchmark printed the log, from lines only one of them prints.
std::string detect_format(const std::string& path, const std::vector<LogLine>& lines) {
  static const std::regex tf_batch(R"(^Batch size:\s+\S+\s+global$)");
  int tf = 0, hvd = 0;
  for (const auto& l : lines) {
    const auto& t = l.text;
    if (t.starts_with("total images/sec:") || is_tf_step(t) || std::regex_match(t, tf_batch)) {
      tf = tf ? tf : l.line;
    } else if (t.starts_with("Total img/sec on ") || t.starts_with("Number of GPUs:") ||
               t.starts_with("Iter #")) {
      hvd = hvd ? hvd : l.line;
    }
  }
  if (tf && hvd) {
    fail_at({path}, "",
            fmt::format("both tf_cnn_benchmarks (line {}) and Horovod synthetic benchmark (line "
                        "{}) lines: give --format",
                        tf, hvd));
  }
  if (tf) return "tf_cnn_benchmarks";
  if (hvd) return "horovod";
  fail_at({path}, "",
          "neither a tf_cnn_benchmarks log ('Batch size:  N global', 'total images/sec:') nor a "
          "Horovod synthetic benchmark log ('Number of GPUs:', 'Total img/sec on')");
}

std::string fmt_number(double v) { return fmt::format("{}", v); }

// ---------------------------------------------------------------------------------------------
// Timeline

class TimelineReader {
 public:
  explicit TimelineReader(std::string path) : path_(std::move(path)) { s_.path = path_; }

  TimelineSummary read() {
    refuse_non_file(path_, "");
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail_at({path_}, "", "cannot open the file");
    in_ = &in;
    int c = skip_space();
    if (c == EOF) fail_at({path_}, "", "empty file (a Horovod timeline starts with '[')");
    if (c != '[') {
      fail_at({path_, line_}, "",
              fmt::format("expected '[' (the Chrome trace event array Horovod writes), found {}",
                          describe(c)));
    }
    bool expect_record = true;
    std::string record;
    while (true) {
      c = skip_space();
      if (c == EOF) break;  // not closed: written record by record, as chrome://tracing reads
      if (c == ']') {
        s_.closed = true;
        c = skip_space();
        if (c != EOF) {
          fail_at({path_, line_}, "", fmt::format("{} after the closing ']'", describe(c)));
        }
        break;
      }
      if (!expect_record) {
        if (c != ',') {
          fail_at({path_, line_}, "",
                  fmt::format("expected ',' or ']' after a record, found {}", describe(c)));
        }
        expect_record = true;
        continue;
      }
      if (c != '{') {
        fail_at({path_, line_}, "",
                fmt::format("expected a record ('{{') or ']', found {}", describe(c)));
      }
      const int start = line_;
      read_record(record, start);
      handle(record, start);
      expect_record = false;
    }
    finish();
    return s_;
  }

 private:
  struct Open {
    std::string name;
    double ts = 0;
    bool activity = false;
  };

  int get() {
    const int c = in_->get();
    if (c == '\n') ++line_;
    return c;
  }
  int skip_space() {
    int c = get();
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = get();
    return c;
  }
  static std::string describe(int c) {
    if (c == EOF) return "the end of the file";
    if (std::isprint(c)) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02x}", c & 0xff);
  }

  // One JSON object, from its '{' (already read) to the matching '}'.
  void read_record(std::string& record, int start) {
    record = "{";
    int depth = 1;
    bool quoted = false, escaped = false;
    while (depth > 0) {
      const int c = get();
      if (c == EOF) {
        fail_at({path_, start}, "",
                "the record that starts on this line is cut at the end of the file (the job "
                "stopped while Horovod was writing it)");
      }
      record += static_cast<char>(c);
      if (quoted) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          quoted = false;
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}') {
        --depth;
      }
    }
  }

  [[noreturn]] void fail(int line, const std::string& field, const std::string& problem) const {
    fail_at({path_, line}, field, problem);
  }
  const nlohmann::json& field(const nlohmann::json& j, const char* key, int line) const {
    if (!j.contains(key)) fail(line, key, "missing");
    return j.at(key);
  }
  std::string text(const nlohmann::json& j, const char* key, int line) const {
    const auto& v = field(j, key, line);
    if (!v.is_string()) fail(line, key, fmt::format("{} is not a string", json_text(v)));
    if (v.get_ref<const std::string&>().empty()) fail(line, key, "is empty");
    return v.get<std::string>();
  }
  double number(const nlohmann::json& j, const char* key, int line) const {
    const auto& v = field(j, key, line);
    if (!v.is_number()) fail(line, key, fmt::format("{} is not a number", json_text(v)));
    return v.get<double>();
  }
  // A time stamp or duration in us: Horovod counts from the timeline's start, so never below 0,
  // and no job runs past the simulator's clock (1e6 s).
  double micros(const nlohmann::json& j, const char* key, int line) const {
    const double us = number(j, key, line);
    const double max_us = kMaxSeconds.value() * 1e6;
    if (!(us >= 0 && us <= max_us)) {
      fail(line, key,
           fmt::format("{} us is not a time in a timeline (0 .. {:g} us)", json_text(j.at(key)),
                       max_us));
    }
    return us;
  }
  long long integer(const nlohmann::json& j, const char* key, int line) const {
    const auto& v = field(j, key, line);
    if (!v.is_number_integer()) fail(line, key, fmt::format("{} is not an integer", json_text(v)));
    return v.get<long long>();
  }

  TimelinePhase& phase(const std::string& name, bool activity) {
    const auto [it, added] = phase_index_.try_emplace(name, s_.phases.size());
    if (added) {
      TimelinePhase p;
      p.name = name;
      p.activity = activity;
      s_.phases.push_back(p);
    }
    return s_.phases[it->second];
  }
  void add(const std::string& name, bool activity, double us) {
    auto& p = phase(name, activity);
    ++p.intervals;
    p.total_ms += us / 1000;
    p.longest_ms = std::max(p.longest_ms, us / 1000);
  }
  void stamp(double ts) {
    first_ts_ = std::min(first_ts_, ts);
    last_ts_ = std::max(last_ts_, ts);
  }

  void handle(const std::string& record, int line) {
    nlohmann::json j;
    // A key given twice in one object: JSON readers keep either one, so the record is ambiguous.
    std::vector<std::set<std::string>> keys;
    std::string twice;
    const auto check_keys = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      using E = nlohmann::json::parse_event_t;
      if (event == E::object_start) keys.emplace_back();
      if (event == E::object_end && !keys.empty()) keys.pop_back();
      if (event == E::key && !keys.empty() &&
          !keys.back().insert(parsed.get<std::string>()).second && twice.empty()) {
        twice = parsed.get<std::string>();
      }
      return true;
    };
    try {
      j = nlohmann::json::parse(record, check_keys);
    } catch (const nlohmann::json::exception& e) {  // parse errors, numbers out of range
      fail(line, "", fmt::format("the record is not JSON ({})", json_problem(e)));
    }
    if (!twice.empty()) fail(line, twice, "given twice in one record");
    ++s_.records;
    const std::string ph = text(j, "ph", line);
    if (ph == "M") {
      text(j, "name", line);
      integer(j, "pid", line);
      return;  // process names and sort indices: the tensors are counted from their events
    }
    if (ph == "i" || ph == "I") {
      const std::string name = text(j, "name", line);
      stamp(micros(j, "ts", line));
      if (name == "CYCLE_START") ++s_.cycles;
      return;
    }
    if (ph != "B" && ph != "E" && ph != "X") {
      fail(line, "ph",
           fmt::format("'{}' is not an event phase Horovod writes (M, B, E, X or i)", ph));
    }
    const double ts = micros(j, "ts", line);
    const long long pid = integer(j, "pid", line);
    // Horovod numbers its timeline's rows (one per tensor) from 0.
    if (pid < 0) fail(line, "pid", fmt::format("{} is not a tensor's row (0 or more)", pid));
    stamp(ts);
    tensors_.insert(pid);
    auto& stack = open_[pid];
    if (ph == "B") {
      const std::string name = text(j, "name", line);
      const bool activity = !stack.empty();
      if (!activity && !name.starts_with("NEGOTIATE_")) ++operations_[pid];
      phase(name, activity);  // listed in the order they begin
      stack.push_back({name, ts, activity});
    } else if (ph == "E") {
      if (stack.empty()) {
        ++s_.unmatched_ends;
        return;
      }
      const Open b = stack.back();
      stack.pop_back();
      if (ts < b.ts) {
        fail(line, "ts",
             fmt::format("{} ends '{}' before it began (ts {})", fmt_number(ts), b.name,
                         fmt_number(b.ts)));
      }
      add(b.name, b.activity, ts - b.ts);
    } else {
      const std::string name = text(j, "name", line);
      const double dur = j.contains("dur") ? micros(j, "dur", line) : 0.0;
      stamp(ts + dur);
      // Timeline::NegotiateRankReady names its tick by the rank that became ready.
      const bool rank_tick = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      });
      if (rank_tick) {
        ++s_.rank_ready;
      } else {
        add(name, !stack.empty(), dur);
      }
    }
  }

  void finish() {
    if (s_.records == 0) fail_at({path_}, "", "no records");
    s_.tensors = static_cast<int>(tensors_.size());
    for (const auto& [pid, n] : operations_) s_.steps = std::max(s_.steps, n);
    for (const auto& [pid, stack] : open_) s_.open_at_end += static_cast<int>(stack.size());
    if (last_ts_ >= first_ts_) s_.span_ms = (last_ts_ - first_ts_) / 1000;
    for (auto& p : s_.phases) p.per_step_ms = s_.steps > 0 ? p.total_ms / s_.steps : 0;
  }

  std::string path_;
  std::istream* in_ = nullptr;
  int line_ = 1;
  TimelineSummary s_;
  std::map<std::string, std::size_t> phase_index_;
  std::set<long long> tensors_;
  std::map<long long, std::vector<Open>> open_;
  std::map<long long, int> operations_;
  double first_ts_ = HUGE_VAL, last_ts_ = -HUGE_VAL;
};

}  // namespace

std::string zoo_model_name(const std::string& printed, const SourceLocation& where) {
  const auto names = model::zoo_names();
  const std::string key = lower(printed);
  if (std::find(names.begin(), names.end(), key) != names.end()) return key;
  // tf_cnn_benchmarks' and Keras applications' spellings of zoo models. tf_cnn_benchmarks'
  // resnet50 is v1 and the zoo's is v1.5 (the stride in the 3x3 convolution): the same
  // parameters and about 6 % more FLOPs.
  static const std::map<std::string, std::string> aliases = {
      {"inception3", "inception_v3"},   // tf_cnn_benchmarks
      {"inceptionv3", "inception_v3"},  // Keras InceptionV3
      {"resnet50_v1.5", "resnet50"},    // tf_cnn_benchmarks, NVIDIA Deep Learning Examples
  };
  const auto it = aliases.find(key);
  if (it != aliases.end()) return it->second;
  fail_at(where, "model",
          fmt::format("'{}' is not a dlsim zoo model{}; give --model with a zoo name ({})", printed,
                      did_you_mean(key, names), fmt::join(names, ", ")));
}

Measurement read_log(const std::string& path, const LogOptions& options) {
  const auto lines = read_lines(path);
  const std::string format = options.format == "auto" ? detect_format(path, lines) : options.format;
  if (format == "tf_cnn_benchmarks") return read_tf_cnn_benchmarks(path, lines, options);
  if (format == "horovod") return read_horovod(path, lines, options);
  fail_at({}, "--format",
          fmt::format("'{}' is not tf_cnn_benchmarks, horovod or auto", options.format));
}

const std::vector<std::string>& throughput_columns() {
  static const std::vector<std::string> columns = {
      "source_id",     "model",  "task",       "framework",  "comm",
      "precision",     "gpu",    "num_gpus",   "num_nodes",  "gpus_per_node",
      "batch_per_gpu", "data",   "intra_node", "inter_node", "value",
      "unit",          "approx", "locator",    "notes"};
  return columns;
}

Row to_row(const Measurement& m, const RowOptions& o) {
  Row r;
  for (const auto& c : throughput_columns()) r[c] = "";
  const bool tf = m.format == "tf_cnn_benchmarks";
  r["source_id"] = o.source_id;
  r["model"] = m.model;
  r["task"] = o.task;
  r["framework"] = !o.framework.empty() ? o.framework : tf ? "tensorflow(tf_cnn_benchmarks)" : "";
  if (!o.comm.empty()) {
    r["comm"] = o.comm;
  } else if (!tf) {
    r["comm"] = "horovod";
  } else if (m.variables == "replicated" || m.variables == "distributed_all_reduce" ||
             m.variables == "collective_all_reduce") {
    const bool spec = !m.all_reduce.empty() && m.all_reduce != "None";
    r["comm"] = spec ? fmt::format("{}({})", m.variables, m.all_reduce) : m.variables;
  } else if (m.variables == "horovod" && !m.horovod_device.empty()) {
    r["comm"] = fmt::format("horovod({})", m.horovod_device);
  } else {
    r["comm"] = m.variables;
  }
  r["precision"] = o.precision;
  r["gpu"] = o.gpu;
  r["num_gpus"] = std::to_string(m.gpus);
  // A local tf_cnn_benchmarks run (no Horovod, no job name) is one process on one machine.
  std::optional<int> nodes = o.nodes, per_node = o.gpus_per_node;
  if (!nodes && !per_node && tf && m.variables != "horovod" && !m.distributed) nodes = 1;
  if (nodes && !per_node) {
    if (m.gpus % *nodes != 0) {
      fail_at(
          {}, "--nodes",
          fmt::format("{} GPUs ({}) do not split evenly over {} nodes", m.gpus, m.path, *nodes));
    }
    per_node = m.gpus / *nodes;
  } else if (per_node && !nodes) {
    if (m.gpus % *per_node != 0) {
      fail_at({}, "--gpus-per-node",
              fmt::format("{} GPUs ({}) are not whole nodes of {}", m.gpus, m.path, *per_node));
    }
    nodes = m.gpus / *per_node;
  } else if (nodes && per_node && *nodes * *per_node != m.gpus) {
    fail_at({}, "--nodes",
            fmt::format("{} nodes x {} GPUs per node is not the {} GPUs of {}", *nodes, *per_node,
                        m.gpus, m.path));
  }
  if (nodes) r["num_nodes"] = std::to_string(*nodes);
  if (per_node) r["gpus_per_node"] = std::to_string(*per_node);
  r["batch_per_gpu"] = std::to_string(m.batch_per_gpu);
  if (!o.data.empty()) {
    r["data"] = o.data;
  } else if (!tf) {
    r["data"] = "synthetic";  // the synthetic benchmarks feed fixed random tensors
  } else if (m.dataset.ends_with("(synthetic)")) {
    r["data"] = "synthetic";
  } else if (!m.dataset.empty()) {
    r["data"] = m.dataset == "imagenet" ? "real(ImageNet)" : fmt::format("real({})", m.dataset);
  }
  r["intra_node"] = o.intra_node;
  r["inter_node"] = o.inter_node;
  // A mean of ranks' totals carries binary noise past the printed 2 decimals.
  r["value"] = fmt_number(std::round(m.total * 1000) / 1000);
  r["unit"] = "images/s";
  r["approx"] = "no";
  std::vector<std::string> at;
  for (int l : m.total_lines) at.push_back(std::to_string(l));
  r["locator"] = fmt::format("{}:{}", m.path, fmt::join(at, ","));
  std::vector<std::string> notes;
  if (!o.notes.empty()) notes.push_back(o.notes);
  notes.push_back(tf ? (m.tensorflow.empty() ? "tf_cnn_benchmarks log"
                                             : "tf_cnn_benchmarks log, TensorFlow " + m.tensorflow)
                     : "Horovod synthetic benchmark log");
  if (m.model_printed != m.model) notes.push_back("printed model " + m.model_printed);
  if (m.rank_totals.size() > 1) {
    std::vector<std::string> totals;
    for (double t : m.rank_totals) totals.push_back(fmt_number(t));
    notes.push_back(fmt::format("rank totals {}", fmt::join(totals, " ")));
  }
  if (m.spread > 0) {
    notes.push_back(fmt::format("+/- {:.4g} images/s ({})", m.spread, m.spread_kind));
  }
  if (!m.steps.empty()) {
    notes.push_back(fmt::format("{} {} lines", m.steps.size(), tf ? "step" : "iteration"));
  }
  r["notes"] = fmt::format("{}", fmt::join(notes, "; "));
  return r;
}

std::string write_csv(const std::vector<std::string>& columns, const std::vector<Row>& rows) {
  auto cell = [](const std::string& column, const std::string& v) {
    if (v.find_first_of("\r\n") != std::string::npos) {
      fail_at({}, column, fmt::format("'{}' holds a line break", v));
    }
    if (v.find_first_of(",\"") == std::string::npos) return v;
    std::string q = "\"";
    for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::string out;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    out += (i ? "," : "") + cell("header", columns[i]);
  }
  out += "\n";
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const auto it = r.find(columns[i]);
      out += (i ? "," : "") + cell(columns[i], it == r.end() ? std::string() : it->second);
    }
    out += "\n";
  }
  return out;
}

TimelineSummary read_timeline(const std::string& path) { return TimelineReader(path).read(); }

std::string timeline_markdown(const TimelineSummary& s) {
  std::string o = fmt::format("# Horovod timeline: {}\n\n", s.path);
  o += fmt::format(
      "- {} records, {} tensors, {} steps (the most operations on one tensor), {} cycles "
      "(CYCLE_START markers), {} rank-ready ticks\n",
      s.records, s.tensors, s.steps, s.cycles, s.rank_ready);
  o += fmt::format("- span: {:.3f} ms from the first timestamp to the last\n", s.span_ms);
  o += s.closed ? "- the file ends with its closing ']'\n"
                : "- the file has no closing ']' (written record by record and not closed; read "
                  "as chrome://tracing reads it)\n";
  if (s.open_at_end > 0) {
    o += fmt::format(
        "- {} intervals begun and never ended (the job stopped mid-operation), "
        "not counted\n",
        s.open_at_end);
  }
  if (s.unmatched_ends > 0) {
    o += fmt::format(
        "- {} ends without a begin (the timeline started mid-operation), not "
        "counted\n",
        s.unmatched_ends);
  }
  o += "\nTimes are summed over tensors: each tensor of a fused operation counts its own interval,"
       " so a phase's total can exceed the wall time. An operation (NEGOTIATE_*, ALLREDUCE, ...)"
       " contains its activities. Per step = total / steps.\n\n";
  o += "| phase | kind | intervals | total (ms) | per step (ms) | longest (ms) |\n";
  o += "|---|---|--:|--:|--:|--:|\n";
  for (const auto& p : s.phases) {
    o += fmt::format("| {} | {} | {} | {:.3f} | {:.3f} | {:.3f} |\n", p.name,
                     p.activity ? "activity" : "operation", p.intervals, p.total_ms, p.per_step_ms,
                     p.longest_ms);
  }
  return o;
}

std::string timeline_json(const TimelineSummary& s, const std::string& program) {
  // Timestamps are whole microseconds: 1e-6 ms keeps every digit a mean per step can mean.
  auto ms = [](double v) { return std::round(v * 1e6) / 1e6; };
  nlohmann::json j;
  j["context"] = {{"program", program}, {"input", s.path}, {"time_unit", "ms"}};
  j["timeline"] = {{"closed", s.closed},           {"records", s.records},
                   {"tensors", s.tensors},         {"steps", s.steps},
                   {"cycles", s.cycles},           {"rank_ready_ticks", s.rank_ready},
                   {"open_at_end", s.open_at_end}, {"unmatched_ends", s.unmatched_ends},
                   {"span_ms", ms(s.span_ms)}};
  j["phases"] = nlohmann::json::array();
  for (const auto& p : s.phases) {
    j["phases"].push_back({{"name", p.name},
                           {"kind", p.activity ? "activity" : "operation"},
                           {"intervals", p.intervals},
                           {"total_ms", ms(p.total_ms)},
                           {"per_step_ms", ms(p.per_step_ms)},
                           {"longest_ms", ms(p.longest_ms)}});
  }
  return json_text(j, 2) + "\n";
}

}  // namespace dlsim::validate
