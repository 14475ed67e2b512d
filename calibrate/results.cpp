#include "calibrate/results.hpp"
#include "common/json_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "common/collective_op.hpp"
#include "common/error.hpp"
#include "common/precision.hpp"
#include "common/units.hpp"
#include "model/analysis.hpp"

namespace dlsim::calibrate {
namespace {

constexpr const char* kTrailerKind = "dlcalibrate-trailer";

double nth(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // The median of an even count is the mean of the middle two.
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

template <typename T>
struct is_list : std::false_type {};
template <typename E>
struct is_list<std::vector<E>> : std::true_type {};

template <typename T>
T get(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) fail_at({where}, key, "missing");
  if constexpr (std::is_integral_v<T>) {
    // A count: JSON's number converts to an int by truncation (2.5 -> 2) and wraps past 2^31.
    const auto& v = j.at(key);
    if (v.is_number() &&
        (!v.is_number_integer() || v.get<long long>() < std::numeric_limits<T>::min() ||
         v.get<long long>() > std::numeric_limits<T>::max())) {
      fail_at({where}, key, fmt::format("must be a whole number, got {}", v.dump()));
    }
  }
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    const auto& v = j.at(key);
    if constexpr (is_list<T>::value) {
      // A list: name the element of the wrong type, not the list that holds it.
      for (std::size_t i = 0; v.is_array() && i < v.size(); ++i) {
        try {
          (void)v[i].get<typename T::value_type>();
        } catch (const nlohmann::json::exception&) {
          fail_at({where}, fmt::format("{}[{}]", key, i),
                  fmt::format("has the wrong type ({}: {})", v[i].type_name(), v[i].dump()));
        }
      }
    }
    fail_at({where}, key, fmt::format("has the wrong type ({})", v.type_name()));
  }
}

}  // namespace

const std::vector<std::string>& known_ops() {
  static const std::vector<std::string> ops = {
      "allreduce",     "allgather",      "reducescatter",   "broadcast",
      "reduce",        "alltoall",       "p2p_latency",     "p2p_bandwidth",
      "gemm",          "conv_fwd",       "conv_bwd_data",   "conv_bwd_filter",
      "copy",          "triad",          "launch",          "sendrecv",
      "layer_forward", "layer_backward", "optimizer_update"};
  return ops;
}

const std::vector<std::string>& known_dtypes() {
  static const std::vector<std::string> dtypes = {
      "float32", "float16", "bfloat16", "float64", "float8_e4m3", "float8_e5m2", "int8", "uint8",
      "int16",   "int32",   "uint32",   "int64",   "uint64",      "byte",        "none"};
  return dtypes;
}

double recorded_cores(const Provenance& p) {
  const auto c = p.devices.find("cpu_cores");
  return c == p.devices.end() ? 1.0 : std::max(1.0, std::atof(c->second.c_str()));
}

bool was_busy(const Provenance& p) {
  const double limit = 1.0 + 0.25 * recorded_cores(p);
  return (p.load_before && *p.load_before > limit) || (p.load_after && *p.load_after > limit);
}

double bus_factor(const std::string& op, int ranks) {
  if (const auto c = parse_op(op)) return busbw_factor(*c, ranks);
  return 1.0;
}

double Measurement::min_s() const {
  return samples_s.empty() ? 0 : *std::min_element(samples_s.begin(), samples_s.end());
}
double Measurement::median_s() const { return nth(samples_s, 0.5); }
double Measurement::max_s() const {
  return samples_s.empty() ? 0 : *std::max_element(samples_s.begin(), samples_s.end());
}
double Measurement::algbw() const {
  const double t = median_s();
  return bytes > 0 && t > 0 ? bytes / t : 0;
}
double Measurement::busbw() const { return algbw() * bus_factor(op, ranks); }
double Measurement::flop_rate() const {
  const double t = median_s();
  return flops > 0 && t > 0 ? flops / t : 0;
}

nlohmann::json to_json(const Provenance& p) {
  nlohmann::json j = {{"tool", p.tool},
                      {"command", p.command},
                      {"date", p.date},
                      {"hosts", p.hosts},
                      {"source", p.source},
                      {"versions", p.versions},
                      {"environment", p.environment},
                      {"devices", p.devices},
                      {"notes", p.notes}};
  if (p.load_before) j["load_average_before"] = *p.load_before;
  if (p.load_after) j["load_average_after"] = *p.load_after;
  return j;
}

nlohmann::json to_json(const Measurement& m) {
  nlohmann::json j = {
      {"op", m.op},       {"backend", m.backend}, {"ranks", m.ranks},        {"nodes", m.nodes},
      {"bytes", m.bytes}, {"dtype", m.dtype},     {"samples_s", m.samples_s}};
  if (m.flops > 0) j["flops"] = m.flops;
  if (!m.shape.empty()) j["shape"] = m.shape;
  if (!m.params.empty()) j["params"] = m.params;
  if (!m.host_samples_s.empty()) j["host_samples_s"] = m.host_samples_s;
  // Derived values, for readers of the file; recomputed from the samples when read.
  j["time_s"] = {{"min", m.min_s()}, {"median", m.median_s()}, {"max", m.max_s()}};
  if (m.bytes > 0) {
    j["algbw_bytes_per_s"] = m.algbw();
    j["busbw_bytes_per_s"] = m.busbw();
  }
  if (m.flops > 0) j["flop_per_s"] = m.flop_rate();
  return j;
}

Provenance provenance_from_json(const nlohmann::json& j, const std::string& file) {
  const std::string where = file + ":1";
  Provenance p;
  p.tool = get<std::string>(j, "tool", where);
  p.command = j.value("command", "");
  p.date = j.value("date", "");
  p.source = j.value("source", "");
  if (j.contains("hosts")) p.hosts = get<std::vector<std::string>>(j, "hosts", where);
  for (const char* k : {"versions", "environment", "devices"}) {
    if (!j.contains(k)) continue;
    auto m = get<std::map<std::string, std::string>>(j, k, where);
    (k[0] == 'v' ? p.versions : k[0] == 'e' ? p.environment : p.devices) = std::move(m);
  }
  if (j.contains("notes")) p.notes = get<std::vector<std::string>>(j, "notes", where);
  for (auto [key, into] : {std::pair{"load_average_before", &p.load_before},
                           std::pair{"load_average_after", &p.load_after}}) {
    if (!j.contains(key)) continue;
    const double v = get<double>(j, key, where);
    if (!(v >= 0 && std::isfinite(v))) {
      fail_at({where}, key, fmt::format("must be a non-negative load average, got {}", v));
    }
    *into = v;
  }
  return p;
}

namespace {

// The derived values to_json writes beside the samples (time_s, the bandwidths, the FLOP rate)
// are recomputed from the samples when read. One that disagrees with them was edited by hand,
// and the edit would be ignored without a word: refused, naming the field.
void check_derived(const nlohmann::json& j, const Measurement& m, const std::string& where) {
  const auto check = [&](const std::string& field, const nlohmann::json& v, double want,
                         const char* unit) {
    if (!v.is_number()) fail_at({where}, field, json_text(v) + " is not a number");
    const double got = v.get<double>();
    if (!(std::abs(got - want) <= 1e-9 * std::max(std::abs(want), 1e-300))) {
      fail_at({where}, field,
              fmt::format("{:g} {} is not what samples_s gives ({:g} {}): it is derived from the "
                          "samples when read, so edit samples_s or leave it out",
                          got, unit, want, unit));
    }
  };
  if (j.contains("time_s")) {
    const auto& t = j.at("time_s");
    if (!t.is_object()) fail_at({where}, "time_s", "must be an object of min, median and max");
    for (const auto& [k, v] : t.items()) {
      if (k == "min") {
        check("time_s.min", v, m.min_s(), "s");
      } else if (k == "median") {
        check("time_s.median", v, m.median_s(), "s");
      } else if (k == "max") {
        check("time_s.max", v, m.max_s(), "s");
      } else {
        fail_at({where}, "time_s." + k, "unknown key (min, median or max)");
      }
    }
  }
  if (j.contains("algbw_bytes_per_s")) {
    check("algbw_bytes_per_s", j.at("algbw_bytes_per_s"), m.algbw(), "B/s");
  }
  if (j.contains("busbw_bytes_per_s")) {
    check("busbw_bytes_per_s", j.at("busbw_bytes_per_s"), m.busbw(), "B/s");
  }
  if (j.contains("flop_per_s")) check("flop_per_s", j.at("flop_per_s"), m.flop_rate(), "FLOP/s");
}

// The params of dlcalibrate run torch's records (a layer's forward or backward, the optimizer's
// update): fit writes them into the profile's layer table, so they are checked where the record
// is read, and `show` and `fit` refuse the same records.
void check_torch_params(const Measurement& m, const std::string& where) {
  const bool layer = m.op == "layer_forward" || m.op == "layer_backward";
  if (m.backend != "torch" || (!layer && m.op != "optimizer_update")) return;
  const auto value = [&](const std::string& key) -> const std::string* {
    const auto it = m.params.find(key);
    return it == m.params.end() ? nullptr : &it->second;
  };
  const auto need = [&](const std::string& key) -> const std::string& {
    const auto* v = value(key);
    if (!v) fail_at({where}, "params." + key, fmt::format("missing from this {} record", m.op));
    return *v;
  };
  const auto count = [&](const std::string& key, long long max, const char* what,
                         const char* max_text) {
    const std::string& text = need(key);
    long long v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > max) {
      fail_at({where}, "params." + key,
              fmt::format("'{}' is not {} (a whole number in 1..{})", text, what, max_text));
    }
  };
  const auto one_of = [&](const std::string& key, const std::vector<std::string>& names) {
    const auto* v = value(key);
    if (v && std::find(names.begin(), names.end(), *v) == names.end()) {
      fail_at({where}, "params." + key,
              fmt::format("unknown {} '{}' ({})", key, *v, fmt::join(names, ", ")));
    }
  };
  count("threads", 4096, "a thread count", "4096");
  if (layer || value("batch")) count("batch", model::kMaxBatch, "a batch size", "2^24");
  if (layer && need("model").empty()) fail_at({where}, "params.model", "is empty");
  if (layer && m.shape.empty()) {
    fail_at({where}, "shape", "is empty: a layer record's shape is the layer's signature");
  }
  if (value("instances")) count("instances", 1 << 24, "a count of layers", "2^24");
  if (m.op == "optimizer_update") {
    count("elements", std::int64_t{1} << 58, "a count of elements", "2^58");
    count("tensors", 1 << 24, "a count of tensors", "2^24");
  }
  std::vector<std::string> precisions;
  for (const auto& [p, name] : kTrainingPrecisions) precisions.emplace_back(name);
  one_of("precision", precisions);
  one_of("device", {"cpu", "cuda"});
}

}  // namespace

Measurement measurement_from_json(const nlohmann::json& j, const std::string& file, int line) {
  const std::string where = fmt::format("{}:{}", file, line);
  if (!j.is_object()) fail_at({where}, "", "expected a JSON object");
  static const std::vector<std::string> keys = {"op",
                                                "backend",
                                                "ranks",
                                                "nodes",
                                                "bytes",
                                                "dtype",
                                                "samples_s",
                                                "host_samples_s",
                                                "flops",
                                                "shape",
                                                "params",
                                                "time_s",
                                                "algbw_bytes_per_s",
                                                "busbw_bytes_per_s",
                                                "flop_per_s"};
  for (const auto& [k, v] : j.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
      fail_at({where}, k, "unknown key" + did_you_mean(k, keys));
    }
  }
  Measurement m;
  m.op = get<std::string>(j, "op", where);
  if (std::find(known_ops().begin(), known_ops().end(), m.op) == known_ops().end()) {
    fail_at({where}, "op",
            fmt::format("unknown operation '{}'{}", m.op, did_you_mean(m.op, known_ops())));
  }
  m.backend = get<std::string>(j, "backend", where);
  // What the benchmarks and importers write (fit maps each to a field; another would be
  // measured and then left unused).
  static const std::vector<std::string> backends = {"cpu", "cuda", "gloo", "mpi", "nccl", "torch"};
  if (std::find(backends.begin(), backends.end(), m.backend) == backends.end()) {
    fail_at({where}, "backend",
            fmt::format("unknown backend '{}'{}", m.backend, did_you_mean(m.backend, backends)));
  }
  m.ranks = get<int>(j, "ranks", where);
  m.nodes = get<int>(j, "nodes", where);
  m.bytes = get<double>(j, "bytes", where);
  if (j.contains("dtype")) {
    m.dtype = get<std::string>(j, "dtype", where);
    if (std::find(known_dtypes().begin(), known_dtypes().end(), m.dtype) == known_dtypes().end()) {
      fail_at({where}, "dtype",
              fmt::format("unknown element type '{}'{}", m.dtype,
                          did_you_mean(m.dtype, known_dtypes())));
    }
  }
  m.samples_s = get<std::vector<double>>(j, "samples_s", where);
  if (j.contains("flops")) m.flops = get<double>(j, "flops", where);
  if (j.contains("shape")) m.shape = get<std::string>(j, "shape", where);
  if (j.contains("params")) {
    m.params = get<std::map<std::string, std::string>>(j, "params", where);
  }
  if (m.ranks < 1) fail_at({where}, "ranks", "must be at least 1");
  if (m.nodes < 1 || m.nodes > m.ranks) fail_at({where}, "nodes", "must be 1 ... ranks");
  if (!(m.bytes >= 0 && m.bytes <= kMaxBytes.value())) {
    fail_at({where}, "bytes", fmt::format("must be in 0 .. 2^60 B, got {}", m.bytes));
  }
  if (m.bytes != std::floor(m.bytes)) {
    fail_at({where}, "bytes", fmt::format("{} is not a whole number of bytes", m.bytes));
  }
  if (!(m.flops >= 0 && m.flops <= kMaxFlops.value())) {
    fail_at({where}, "flops", fmt::format("must be in 0 .. 1e24 FLOP, got {}", m.flops));
  }
  if (j.contains("host_samples_s")) {
    m.host_samples_s = get<std::vector<double>>(j, "host_samples_s", where);
    if (m.host_samples_s.size() != m.samples_s.size()) {
      fail_at({where}, "host_samples_s",
              fmt::format("has {} samples where samples_s has {}", m.host_samples_s.size(),
                          m.samples_s.size()));
    }
    for (double s : m.host_samples_s) {
      if (!(s > 0 && s <= kMaxSeconds.value())) {
        fail_at({where}, "host_samples_s",
                fmt::format("every sample must be a positive time in s (at most 1e6), got {}", s));
      }
    }
  }
  if (m.samples_s.empty()) fail_at({where}, "samples_s", "has no samples");
  for (double s : m.samples_s) {
    if (!(s > 0 && s <= kMaxSeconds.value())) {
      fail_at({where}, "samples_s",
              fmt::format("every sample must be a positive time in s (at most 1e6), got {}", s));
    }
  }
  check_derived(j, m, where);
  check_torch_params(m, where);
  return m;
}

double sample_from_us(double us, const SourceLocation& where, const std::string& field) {
  const double s = us * 1e-6;
  if (!(s >= kMinSeconds.value() && s <= kMaxSeconds.value())) {
    fail_at(where, field,
            fmt::format("{:g} us is not a time a results file holds (1 ps .. 1e6 s)", us));
  }
  return s;
}

Results read_results(const std::string& path, bool tolerate_truncated_tail) {
  refuse_non_file(path, "");
  std::ifstream in(path);
  if (!in) fail_at({path}, "", "cannot open the results file");
  Results r;
  std::string text;
  int line_no = 0;
  bool header = false;
  std::vector<std::string> lines;
  while (std::getline(in, text)) lines.push_back(text);
  // A file whose last byte is not a newline was cut short while a record was written.
  in.clear();
  const bool ends_with_newline = [&] {
    std::ifstream tail(path, std::ios::binary);
    tail.seekg(0, std::ios::end);
    if (tail.tellg() <= 0) return true;
    tail.seekg(-1, std::ios::end);
    return tail.get() == '\n';
  }();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    line_no = static_cast<int>(i) + 1;
    const auto& l = lines[i];
    if (l.empty()) continue;
    const bool last = i + 1 == lines.size();
    nlohmann::json j;
    std::string twice;
    try {
      j = parse_json_checking_keys(l, twice);
    } catch (const nlohmann::json::exception& e) {  // parse errors, numbers out of range
      if (last && !ends_with_newline && tolerate_truncated_tail && header) break;
      fail_at({path, line_no}, "",
              last && !ends_with_newline
                  ? "the last record is cut short (an interrupted run; --resume re-measures it)"
                  : fmt::format("not a JSON record ({})", json_problem(e)));
    }
    if (!twice.empty()) fail_at({path, line_no}, twice, "given twice in one record");
    // A value of the wrong JSON type anywhere in the record is the record's error, at its line.
    try {
      if (!header) {
        if (!j.is_object() || j.value("kind", "") != kResultsKind) {
          fail_at({path, line_no}, "kind",
                  fmt::format("not a dlcalibrate results file (the first line must be a '{}' "
                              "header)",
                              kResultsKind));
        }
        if (!j.contains("format_version") || !j["format_version"].is_number_integer()) {
          fail_at({path, line_no}, "format_version",
                  fmt::format("missing or not a whole number in the header (this dlcalibrate "
                              "reads version {})",
                              kResultsFormatVersion));
        }
        const auto version = j["format_version"].get<long long>();
        if (version != kResultsFormatVersion) {
          fail_at({path, line_no}, "format_version",
                  fmt::format("{} is not the version this dlcalibrate reads ({})", version,
                              kResultsFormatVersion));
        }
        if (!j.contains("provenance")) fail_at({path, line_no}, "provenance", "missing");
        r.provenance = provenance_from_json(j["provenance"], path);
        header = true;
        continue;
      }
      if (j.is_object() && j.value("kind", "") == kTrailerKind) {
        if (j.contains("load_average_after")) {
          const double load = j["load_average_after"].get<double>();
          if (!(load >= 0 && std::isfinite(load))) {
            fail_at({path, line_no}, "load_average_after",
                    fmt::format("must be a non-negative load average, got {}", load));
          }
          r.provenance.load_after = load;
        }
        if (j.contains("notes")) {
          for (const auto& n : j["notes"]) r.provenance.notes.push_back(n.get<std::string>());
        }
        continue;
      }
      r.measurements.push_back(measurement_from_json(j, path, line_no));
    } catch (const nlohmann::json::exception& e) {
      fail_at({path, line_no}, "", fmt::format("a value of the wrong type ({})", e.what()));
    }
  }
  if (!header) fail_at({path}, "", "empty results file (no header)");
  return r;
}

ResultsWriter::ResultsWriter(const std::string& path, const Provenance& provenance, bool append)
    : path_(path) {
  namespace fs = std::filesystem;
  if (std::error_code ec; fs::exists(path, ec)) {
    if (!append) {
      fail_at({path}, "", "already exists (use --resume to continue it, or another name)");
    }
    read_results(path, true);  // checks the header; a cut-short last record is dropped below
    // A process killed in the middle of a record's write(2) (only possible for files written
    // before records were whole writes, or copied by hand) leaves a last line without its
    // newline: cut it off in one truncate(2), so the next record starts on its own line.
    std::ifstream in(path, std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!all.empty() && all.back() != '\n') {
      const auto keep = all.rfind('\n') + 1;  // 0 when there is no newline at all
      if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
        fail_at({path}, "", "cannot cut off the incomplete last record");
      }
    }
  } else {
    // The header appears whole or not at all.
    write_output(path, json_text(nlohmann::json{{"kind", kResultsKind},
                                                {"format_version", kResultsFormatVersion},
                                                {"provenance", to_json(provenance)}}) +
                           "\n");
  }
  out_ = std::make_unique<AppendFile>(path);
}

void ResultsWriter::add(const Measurement& m) { out_->append(json_text(to_json(m)) + "\n"); }

void ResultsWriter::finish(const Provenance& p) {
  nlohmann::json j = {{"kind", kTrailerKind}, {"notes", p.notes}};
  if (p.load_after) j["load_average_after"] = *p.load_after;
  out_->append(json_text(j) + "\n");
}

std::string to_jsonl(const Results& r) {
  std::ostringstream o;
  o << json_text(nlohmann::json{{"kind", kResultsKind},
                                {"format_version", kResultsFormatVersion},
                                {"provenance", to_json(r.provenance)}})
    << '\n';
  for (const auto& m : r.measurements) o << json_text(to_json(m)) << '\n';
  return o.str();
}

}  // namespace dlsim::calibrate
