// nccl-tests output -> dlcalibrate results.
//
// Text output (every version): the table's columns are found by name from its header line
//   "#       size         count      type   redop    root     time   algbw   busbw #wrong ..."
// (older versions have no redop/root columns and an "error" column instead of "#wrong"), so the
// same code reads 1.x and 2.x logs. The out-of-place time is the first "time" column. The op comes
// from "# Collective test starting: all_reduce_perf" (newer versions) or from the binary's name on
// an echoed command line; the ranks from the "#  Rank N ... on HOST device D [..] GPU" lines.
//
// JSON output (`-J FILE`, recent nccl-tests): layout as written by src/util.cu of NVIDIA/nccl-tests
// (JSON_FILE_VERSION 3): {"version", "start_time", "args": [argv...], "env": ["K=V"...],
// "nccl_version": 22703, "config": {"nthreads", "ngpus", ..., "devices": [{"rank", "group", "pid",
// "hostname", "device", "device_hex", "device_info"}]}, "results": [{"size", "count", "type",
// "redop", "root", "out_of_place": {"time" | "cpu_time", "alg_bw", "bus_bw", "nwrong"} | null,
// "in_place": {...}, "actual_iterations", "experiment_name"}], "out_of_bounds", ...}.
// With MPI, "devices" holds one entry per process (the first GPU of each), so the rank count is
// nthreads x ngpus x devices.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "calibrate/import.hpp"
#include "common/error.hpp"

namespace dlsim::calibrate {
namespace {

constexpr const char* kTool = "nccl-tests";
// busbw may differ from algbw x bus factor by this much (plus the printed rounding) before the
// row is taken as misread: nccl-tests computes both from the same time.
constexpr double kBusbwTolerance = 0.02;

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

std::optional<double> to_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); });
}

// Half of the last printed digit of a number as nccl-tests prints it ("%.2f", "%.1f", "%.0f" or
// "%.1e"): the rounding the printed value may carry.
double half_unit(const std::string& token) {
  const auto e = token.find_first_of("eE");
  const std::string mantissa = token.substr(0, e);
  const int exponent = e == std::string::npos ? 0 : std::atoi(token.c_str() + e + 1);
  const auto dot = mantissa.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(mantissa.size() - dot - 1);
  return 0.5 * std::pow(10.0, exponent - decimals);
}

// nccl-tests binary name (all_reduce_perf, ./build/all_gather_perf_mpi, ...) -> results op.
// An empty result: the name is not a supported test.
std::string op_from_test(const std::string& test) {
  static const std::map<std::string, std::string> ops = {
      {"all_reduce", "allreduce"}, {"all_gather", "allgather"}, {"reduce_scatter", "reducescatter"},
      {"broadcast", "broadcast"},  {"reduce", "reduce"},        {"alltoall", "alltoall"}};
  const auto it = ops.find(test);
  return it == ops.end() ? "" : it->second;
}

// The nccl-tests test named in a line ("all_reduce" for ".../all_reduce_perf -b 8"), if any.
std::optional<std::string> test_in_line(const std::string& line) {
  static const std::regex starting(R"(Collective test starting:\s*(?:\S*/)?(\w+?)_perf)");
  static const std::regex binary(R"((?:^|[\s/])(\w+?)_perf(?:_mpi)?(?:\s|$))");
  std::smatch m;
  if (std::regex_search(line, m, starting) || std::regex_search(line, m, binary)) return m[1].str();
  return std::nullopt;
}

// nccl-tests type names -> results dtype.
std::optional<std::string> dtype_of(const std::string& type) {
  static const std::map<std::string, std::string> types = {
      {"float", "float32"},      {"half", "float16"},      {"double", "float64"},
      {"bfloat16", "bfloat16"},  {"int8", "int8"},         {"uint8", "uint8"},
      {"char", "int8"},          {"int32", "int32"},       {"int", "int32"},
      {"uint32", "uint32"},      {"int64", "int64"},       {"uint64", "uint64"},
      {"f8e4m3", "float8_e4m3"}, {"f8e5m2", "float8_e5m2"}};
  const auto it = types.find(type);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

// NCCL_VERSION_CODE -> "2.18.5" (codes from 2.9 on are major*10000 + minor*100 + patch, older
// ones major*1000 + minor*100 + patch).
std::string nccl_version_from_code(long code) {
  if (code >= 20900) {
    return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
  }
  return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
}

void record_nccl_version(Provenance& p, const std::string& version) {
  // "2.18.5+cuda12.2": NCCL's version, then the CUDA it was built with.
  const auto plus = version.find("+cuda");
  p.versions["nccl"] = version.substr(0, plus);
  if (plus != std::string::npos) p.versions.emplace("cuda", version.substr(plus + 5));
}

void add_host(Provenance& p, const std::string& host) {
  if (std::find(p.hosts.begin(), p.hosts.end(), host) == p.hosts.end()) p.hosts.push_back(host);
}

// Checks busbw against algbw x the op's bus factor: a mismatch means the columns were misread or
// the rank count is wrong, and the imported times would be wrong with it.
void check_busbw(const SourceLocation& where, const std::string& field, const std::string& op,
                 int ranks, double algbw, double busbw, double rounding) {
  const double factor = bus_factor(op, ranks);
  const double expected = algbw * factor;
  if (std::abs(busbw - expected) > kBusbwTolerance * std::abs(expected) + rounding) {
    fail_at(where, field,
            fmt::format("{} GB/s disagrees with algbw {} GB/s x {}'s bus factor {:.4g} on {} "
                        "ranks (= {:.4g} GB/s): the columns were misread or the rank count is "
                        "wrong",
                        busbw, algbw, op, factor, ranks, expected));
  }
}

// What the text log says about one run (one table), gathered from the lines before its header.
struct RunInfo {
  std::string test;  // all_reduce, ...
  std::vector<std::pair<int, std::string>> rank_hosts;
  int threads_x_gpus = 0;  // from "# nThread T nGpus G"
  int processes = 0;       // from an echoed mpirun/srun command line
};

struct Columns {
  std::size_t count = 0;  // header tokens; a data row has at least as many
  std::size_t size = 0, type = 0, time = 0, algbw = 0, busbw = 0;
  std::optional<std::size_t> in_place_time, wrong;
};

std::optional<Columns> parse_header(const std::string& line) {
  if (line.empty() || line[0] != '#') return std::nullopt;
  const auto tokens = split_ws(line.substr(1));
  Columns c;
  c.count = tokens.size();
  bool size = false, type = false, time = false, algbw = false, busbw = false;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto& t = tokens[i];
    if ((t == "size" || t == "bytes") && !size) {
      c.size = i;
      size = true;
    } else if (t == "type" && !type) {
      c.type = i;
      type = true;
    } else if (t == "time" || t == "cputime") {
      if (!time) {
        c.time = i;
        time = true;
      } else if (!c.in_place_time) {
        c.in_place_time = i;
      }
    } else if (t == "algbw" && !algbw) {
      c.algbw = i;
      algbw = true;
    } else if (t == "busbw" && !busbw) {
      c.busbw = i;
      busbw = true;
    } else if ((t == "#wrong" || t == "error" || t == "res") && !c.wrong) {
      c.wrong = i;
    }
  }
  if (!(size && time && algbw && busbw)) return std::nullopt;
  if (!type) return std::nullopt;
  return c;
}

Results import_text(const std::string& path, const std::vector<std::string>& lines) {
  static const std::regex rank_line(
      R"(^#\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*?)\s*$)");
  static const std::regex nthread(R"(^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+))");
  static const std::regex nccl_version(R"(NCCL version\s+(\S+))");
  static const std::regex tests_version(R"(nccl-tests version\s+(\S+))");
  static const std::regex library_code(R"(nccl-library=(\d+))");
  static const std::regex env_token(R"((?:^|\s)(NCCL_[A-Z0-9_]+)=(\S*))");
  static const std::regex env_info(R"(NCCL INFO\s+(NCCL_[A-Z0-9_]+) set by environment to (\S+))");
  // Before the binary's name: nccl-tests' own "-n" is its iteration count.
  static const std::regex processes(R"((?:^|\s)(?:-np|-n|--np|--ntasks)[\s=](\d+))");

  Results r;
  r.provenance.tool = kTool;
  r.provenance.source = path;
  std::set<std::string> gpus;
  std::optional<std::string> first_test;  // any test named anywhere, for a table before its name
  RunInfo run;
  std::optional<Columns> table;
  std::string op;
  int ranks = 0, nodes = 0;
  int tables = 0;

  for (const auto& l : lines) {
    if (auto t = test_in_line(l)) {
      if (!first_test) first_test = *t;
    }
  }

  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int line_no = static_cast<int>(i) + 1;
    const SourceLocation where{path, line_no};
    const std::string& l = lines[i];
    const auto tokens = split_ws(l);
    const bool data_row = !tokens.empty() && all_digits(tokens[0]);
    std::smatch m;

    if (table && data_row) {
      const Columns& c = *table;
      if (tokens.size() < c.count) {
        fail_at(where, "",
                fmt::format("truncated: the row has {} of the {} columns of the header",
                            tokens.size(), c.count));
      }
      auto number = [&](std::size_t col, const char* name) {
        const auto v = to_number(tokens[col]);
        if (!v) fail_at(where, name, fmt::format("'{}' is not a number", tokens[col]));
        return *v;
      };
      const double bytes = number(c.size, "size");
      const double time_us = number(c.time, "time");
      const double algbw = number(c.algbw, "algbw");
      const double busbw = number(c.busbw, "busbw");
      if (!(time_us > 0)) fail_at(where, "time", "must be a positive time in us");
      check_busbw(where, "busbw", op, ranks, algbw, busbw,
                  half_unit(tokens[c.busbw]) + half_unit(tokens[c.algbw]) * bus_factor(op, ranks));
      const auto dtype = dtype_of(tokens[c.type]);
      if (!dtype) fail_at(where, "type", fmt::format("unknown data type '{}'", tokens[c.type]));

      Measurement meas;
      meas.op = op;
      meas.backend = "nccl";
      meas.ranks = ranks;
      meas.nodes = nodes;
      meas.bytes = bytes;
      meas.dtype = *dtype;
      meas.samples_s = {time_us * 1e-6};
      meas.params["source_line"] = std::to_string(line_no);
      if (c.in_place_time) {
        number(*c.in_place_time, "in-place time");
        meas.params["in_place_time_us"] = tokens[*c.in_place_time];
      }
      if (c.wrong) {
        const auto wrong = to_number(tokens[*c.wrong]);
        if (wrong && *wrong != 0) meas.params["wrong_elements"] = tokens[*c.wrong];
      }
      r.measurements.push_back(std::move(meas));
      continue;
    }
    if (table && l.find("Avg bus bandwidth") != std::string::npos) {
      table.reset();
      continue;
    }
    if (data_row) continue;  // a row with no header before it: not a table we can read

    if (auto t = test_in_line(l)) run.test = *t;
    if (std::regex_search(l, m, nthread)) {
      // A new run: its device lines follow.
      run.rank_hosts.clear();
      run.threads_x_gpus = std::stoi(m[1].str()) * std::stoi(m[2].str());
    } else if (std::regex_search(l, m, rank_line)) {
      run.rank_hosts.emplace_back(std::stoi(m[1].str()), m[2].str());
      add_host(r.provenance, m[2].str());
      if (m[3].length() > 0) gpus.insert(m[3].str());
    }
    if (std::regex_search(l, m, nccl_version)) {
      record_nccl_version(r.provenance, m[1].str());
    } else if (std::regex_search(l, m, library_code) && !r.provenance.versions.count("nccl")) {
      r.provenance.versions["nccl"] = nccl_version_from_code(std::stol(m[1].str()));
    }
    if (std::regex_search(l, m, tests_version)) r.provenance.versions["nccl-tests"] = m[1].str();
    if (std::regex_search(l, m, env_info)) {
      r.provenance.environment[m[1].str()] = m[2].str();
    } else {
      for (std::sregex_iterator it(l.begin(), l.end(), env_token), end; it != end; ++it) {
        r.provenance.environment[(*it)[1].str()] = (*it)[2].str();
      }
    }
    if (l.empty() || l[0] != '#') {
      if (test_in_line(l)) {
        if (r.provenance.command.empty())
          r.provenance.command = l.substr(l.find_first_not_of("+$ "));
        const std::string launcher = l.substr(0, l.find("_perf"));
        if (std::regex_search(launcher, m, processes)) run.processes = std::stoi(m[1].str());
      }
      continue;
    }

    if (auto c = parse_header(l)) {
      const std::string test = !run.test.empty() ? run.test : first_test.value_or("");
      if (test.empty()) {
        fail_at(where, "",
                "cannot tell which collective this table measured: the file names no nccl-tests "
                "binary (no '# Collective test starting:' line or *_perf command line)");
      }
      op = op_from_test(test);
      if (op.empty()) {
        fail_at(where, "",
                fmt::format("nccl-tests test '{}_perf' is not supported (all_reduce, all_gather, "
                            "reduce_scatter, broadcast, reduce and alltoall are)",
                            test));
      }
      std::set<int> rank_ids;
      std::set<std::string> hosts;
      for (const auto& [rank, host] : run.rank_hosts) {
        rank_ids.insert(rank);
        hosts.insert(host);
      }
      if (!rank_ids.empty()) {
        ranks = static_cast<int>(rank_ids.size());
        nodes = static_cast<int>(hosts.size());
      } else {
        // No device lines: nThread x nGpus per process, times the processes of an echoed
        // mpirun/srun line (one without); the node count is then unknown.
        ranks = std::max(1, run.threads_x_gpus) * std::max(1, run.processes);
        nodes = 1;
        r.provenance.notes.push_back(fmt::format(
            "{}:{}: no '#  Rank' device lines: {} ranks from nThread x nGpus x processes, "
            "node count assumed 1",
            path, line_no, ranks));
      }
      table = c;
      ++tables;
    }
  }
  if (table) {
    fail_at({path, static_cast<int>(lines.size())}, "",
            fmt::format("truncated: the file ends at line {} inside the results table (no "
                        "'# Avg bus bandwidth' line after it)",
                        lines.size()));
  }
  if (tables == 0) {
    fail_at({path}, "",
            "not nccl-tests output: no column header line ('#  size  count  type ... time  algbw  "
            "busbw ...')");
  }
  if (r.measurements.empty()) fail_at({path}, "", "the nccl-tests results table has no rows");
  if (!gpus.empty()) {
    std::string all;
    for (const auto& g : gpus) all += (all.empty() ? "" : ", ") + g;
    r.provenance.devices["gpu"] = all;
  }
  return r;
}

// ---- JSON (-J) ----

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& path,
                             const std::string& field) {
  if (!j.is_object() || !j.contains(key)) fail_at({path}, field + key, "missing");
  return j.at(key);
}

double json_number(const nlohmann::json& j, const std::string& path, const std::string& field) {
  if (!j.is_number()) {
    fail_at({path}, field, fmt::format("'{}' is not a number", j.dump()));
  }
  return j.get<double>();
}

Results import_json(const std::string& path, const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const std::size_t at = std::min(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const int line = 1 + static_cast<int>(std::count(
                             text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    const bool at_end = text.find_first_not_of(" \t\r\n", at) == std::string::npos;
    fail_at({path, line}, "",
            at_end ? "truncated: the JSON ends before its objects are closed (an interrupted run)"
                   : fmt::format("not valid JSON: {}", e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number out of range
    fail_at({path}, "", fmt::format("not valid JSON: {}", e.what()));
  }
  if (!doc.is_object() || !doc.contains("results")) {
    fail_at({path}, "", "not nccl-tests -J output: no 'results' list");
  }
  Results r;
  r.provenance.tool = kTool;
  r.provenance.source = path;
  if (doc.contains("version"))
    r.provenance.notes.push_back(
        fmt::format("nccl-tests JSON format version {}", doc["version"].dump()));
  if (doc.contains("start_time") && doc["start_time"].is_string()) {
    // "%Y-%m-%d %H:%M:%S" in the run's local time zone.
    std::string date = doc["start_time"].get<std::string>();
    if (date.size() > 10 && date[10] == ' ') date[10] = 'T';
    r.provenance.date = date;
  }
  std::string test;
  if (doc.contains("args") && doc["args"].is_array()) {
    for (const auto& a : doc["args"]) {
      if (!a.is_string()) continue;
      r.provenance.command += (r.provenance.command.empty() ? "" : " ") + a.get<std::string>();
    }
    if (auto t = test_in_line(r.provenance.command)) test = *t;
  }
  if (test.empty()) {
    fail_at({path}, "args",
            "cannot tell which collective was measured: no nccl-tests binary in 'args'");
  }
  const std::string op = op_from_test(test);
  if (op.empty()) {
    fail_at({path}, "args",
            fmt::format("nccl-tests test '{}_perf' is not supported (all_reduce, all_gather, "
                        "reduce_scatter, broadcast, reduce and alltoall are)",
                        test));
  }
  if (doc.contains("env") && doc["env"].is_array()) {
    for (const auto& e : doc["env"]) {
      if (!e.is_string()) continue;
      const auto s = e.get<std::string>();
      const auto eq = s.find('=');
      if (s.starts_with("NCCL_") && eq != std::string::npos) {
        r.provenance.environment[s.substr(0, eq)] = s.substr(eq + 1);
      }
    }
  }
  if (doc.contains("nccl_version") && doc["nccl_version"].is_number_integer()) {
    r.provenance.versions["nccl"] = nccl_version_from_code(doc["nccl_version"].get<long>());
  }

  const auto& config = member(doc, "config", path, "");
  const double threads =
      json_number(member(config, "nthreads", path, "config."), path, "config.nthreads");
  const double gpus = json_number(member(config, "ngpus", path, "config."), path, "config.ngpus");
  std::size_t processes = 1;
  std::set<std::string> hosts, models;
  if (config.contains("devices") && config["devices"].is_array() && !config["devices"].empty()) {
    processes = config["devices"].size();
    for (const auto& d : config["devices"]) {
      if (d.contains("hostname") && d["hostname"].is_string()) {
        hosts.insert(d["hostname"].get<std::string>());
        add_host(r.provenance, d["hostname"].get<std::string>());
      }
      if (d.contains("device_info") && d["device_info"].is_string()) {
        models.insert(d["device_info"].get<std::string>());
      }
    }
  }
  const int ranks = static_cast<int>(threads * gpus) * static_cast<int>(processes);
  const int nodes = std::max<int>(1, static_cast<int>(hosts.size()));
  if (ranks < 1) fail_at({path}, "config", "nthreads x ngpus must be at least 1");
  if (!models.empty()) {
    std::string all;
    for (const auto& g : models) all += (all.empty() ? "" : ", ") + g;
    r.provenance.devices["gpu"] = all;
  }

  const auto& results = doc["results"];
  if (!results.is_array()) fail_at({path}, "results", "must be a list");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& row = results[i];
    const std::string field = fmt::format("results[{}].", i);
    const double bytes = json_number(member(row, "size", path, field), path, field + "size");
    const auto& type = member(row, "type", path, field);
    const auto dtype = type.is_string() ? dtype_of(type.get<std::string>()) : std::nullopt;
    if (!dtype) fail_at({path}, field + "type", fmt::format("unknown data type {}", type.dump()));
    // Out-of-place is null when only in-place was run (trace replay): use in-place then.
    const bool out_of_place = row.contains("out_of_place") && !row["out_of_place"].is_null();
    const std::string which = out_of_place ? "out_of_place" : "in_place";
    const auto& body = member(row, which.c_str(), path, field);
    const std::string bfield = field + which + ".";
    const char* time_key = body.contains("cpu_time") ? "cpu_time" : "time";
    const double time_us =
        json_number(member(body, time_key, path, bfield), path, bfield + time_key);
    const double algbw = json_number(member(body, "alg_bw", path, bfield), path, bfield + "alg_bw");
    const double busbw = json_number(member(body, "bus_bw", path, bfield), path, bfield + "bus_bw");
    if (!(time_us > 0)) fail_at({path}, bfield + time_key, "must be a positive time in us");
    // Printed with "%lf": six decimals.
    check_busbw({path}, bfield + "bus_bw", op, ranks, algbw, busbw,
                1e-6 * (1 + bus_factor(op, ranks)));

    Measurement meas;
    meas.op = op;
    meas.backend = "nccl";
    meas.ranks = ranks;
    meas.nodes = nodes;
    meas.bytes = bytes;
    meas.dtype = *dtype;
    meas.samples_s = {time_us * 1e-6};
    meas.params["source_index"] = std::to_string(i);
    if (!out_of_place) meas.params["variant"] = "in_place";
    if (out_of_place && row.contains("in_place") && row["in_place"].is_object() &&
        row["in_place"].contains(time_key) && row["in_place"][time_key].is_number()) {
      meas.params["in_place_time_us"] = fmt::format("{}", row["in_place"][time_key].get<double>());
    }
    r.measurements.push_back(std::move(meas));
  }
  if (r.measurements.empty()) fail_at({path}, "results", "has no rows");
  return r;
}

}  // namespace

Results import_nccl_tests(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_at({path}, "", "cannot open the nccl-tests output");
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) fail_at({path}, "", "the file is empty");
  if (text[first] == '{' || text[first] == '[') return import_json(path, text);

  std::vector<std::string> lines;
  std::istringstream ls(text);
  for (std::string l; std::getline(ls, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }
  return import_text(path, lines);
}

}  // namespace dlsim::calibrate
