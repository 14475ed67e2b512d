// OSU micro-benchmarks output -> dlcalibrate results.
//
// The test is named by the header line "# OSU MPI Latency Test v7.3" (also "MPI-CUDA",
// "MPI-ROCM" and "NCCL" builds); the columns by the line "# Size  Latency (us)",
// "# Size  Bandwidth (MB/s)" or "# Size  Avg Latency(us)  Min Latency(us)  Max Latency(us)
// Iterations" (-f). What each test's numbers mean:
//   - osu_latency: half the round-trip time of a ping-pong, i.e. a one-way latency, on 2 ranks;
//   - osu_bw / osu_bibw: MB/s with MB = 1e6 B, from a window of messages in flight, so the
//     time per message (size / bandwidth) is a throughput time, not a latency; bibw counts both
//     directions;
//   - collectives: the average over ranks of the mean time per call, in us. OSU's size is each
//     rank's message; nccl-tests' (and so Measurement::bytes) is the whole gathered buffer for
//     allgather and each rank's whole send buffer for alltoall, i.e. OSU's size x ranks.
// OSU does not print the rank or node count of a collective. The importer reads them from
// comment lines a user or a job script adds ("# ranks: 16" or "# Number of processes: 16",
// "# nodes: 4"); without the rank count the file is refused. (The dlcalibrate CLI is to get
// --ranks/--nodes options that supply them instead; until then the comment is the way.)

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "calibrate/import.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace dlsim::calibrate {
namespace {

enum class Metric { kLatency, kBandwidth };

struct OsuTest {
  std::string op;
  Metric metric = Metric::kLatency;
  bool bidirectional = false;
};

// The test part of the header ("Allreduce Latency Test") -> what it measures; nullopt for tests
// this importer does not read (message rate, non-blocking, v-variants, gather, scatter, ...).
std::optional<OsuTest> test_of(const std::string& name) {
  std::string key;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  static const std::vector<std::pair<std::string, OsuTest>> tests = {
      {"latencytest", {"p2p_latency", Metric::kLatency, false}},
      {"bandwidthtest", {"p2p_bandwidth", Metric::kBandwidth, false}},
      {"bidirectionalbandwidthtest", {"p2p_bandwidth", Metric::kBandwidth, true}},
      {"allreducelatencytest", {"allreduce", Metric::kLatency, false}},
      {"allgatherlatencytest", {"allgather", Metric::kLatency, false}},
      {"reducescatterlatencytest", {"reducescatter", Metric::kLatency, false}},
      {"broadcastlatencytest", {"broadcast", Metric::kLatency, false}},
      {"bcastlatencytest", {"broadcast", Metric::kLatency, false}},
      {"reducelatencytest", {"reduce", Metric::kLatency, false}},
      {"alltoalllatencytest", {"alltoall", Metric::kLatency, false}},
      {"alltoallpersonalizedexchangelatencytest", {"alltoall", Metric::kLatency, false}},
  };
  for (const auto& [k, t] : tests) {
    if (k == key) return t;
  }
  return std::nullopt;
}

enum class Column { kSize, kLatency, kMin, kMax, kIterations, kBandwidth, kOther };

// The columns named by a "# Size ..." line, in order; an unknown column name is an error, since
// the numbers after it could not be placed.
std::vector<Column> parse_columns(const std::string& line, const SourceLocation& where) {
  static const std::regex label(
      R"(Size|Avg\s+Latency\s*\(us\)|Min\s+Latency\s*\(us\)|Max\s+Latency\s*\(us\)|)"
      R"(Latency\s*\(us\)|Bandwidth\s*\(MB/s\)|MB/s|Messages/s|Iterations|Validation|)"
      R"(P\d+\s+Tail\s+Lat\s*\(us\))",
      std::regex::icase);
  std::vector<Column> cols;
  std::string rest = line.substr(1);
  std::string leftover;
  auto from = rest.cbegin();
  for (std::sregex_iterator it(rest.begin(), rest.end(), label), end; it != end; ++it) {
    leftover.append(from, (*it)[0].first);
    from = (*it)[0].second;
    std::string l = (*it)[0].str();
    std::transform(l.begin(), l.end(), l.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (l == "size") {
      cols.push_back(Column::kSize);
    } else if (l.starts_with("min")) {
      cols.push_back(Column::kMin);
    } else if (l.starts_with("max")) {
      cols.push_back(Column::kMax);
    } else if (l.starts_with("avg") || l.starts_with("latency")) {
      cols.push_back(Column::kLatency);
    } else if (l.starts_with("bandwidth")) {
      cols.push_back(Column::kBandwidth);
    } else if (l == "iterations") {
      cols.push_back(Column::kIterations);
    } else {
      cols.push_back(Column::kOther);
    }
  }
  leftover.append(from, rest.cend());
  if (leftover.find_first_not_of(" \t") != std::string::npos) {
    fail_at(where, "",
            fmt::format("the column header has columns this importer does not know: '{}'",
                        leftover.substr(leftover.find_first_not_of(" \t"))));
  }
  if (cols.empty() || cols.front() != Column::kSize) {
    fail_at(where, "", "the column header does not start with 'Size'");
  }
  return cols;
}

std::optional<double> to_number(const std::string& s) { return parse_number(s); }

std::string dtype_of(const std::string& mpi_type) {
  static const std::vector<std::pair<std::string, std::string>> types = {
      {"MPI_CHAR", "int8"},  {"MPI_SIGNED_CHAR", "int8"}, {"MPI_BYTE", "uint8"},
      {"MPI_INT", "int32"},  {"MPI_FLOAT", "float32"},    {"MPI_DOUBLE", "float64"},
      {"MPI_LONG", "int64"}, {"MPI_SHORT", "int16"}};
  for (const auto& [k, v] : types) {
    if (k == mpi_type) return v;
  }
  std::string s = mpi_type.starts_with("MPI_") ? mpi_type.substr(4) : mpi_type;
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Results import_osu(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_at({path}, "", "cannot open the OSU micro-benchmarks output");
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const bool ends_with_newline = !text.empty() && text.back() == '\n';
  std::vector<std::string> lines;
  std::istringstream ls(text);
  for (std::string l; std::getline(ls, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }

  static const std::regex header(R"(^#\s*OSU\s+(\S+)\s+(.*?Test)\b\s*(?:v(\S+))?\s*$)");
  static const std::regex ranks_line(
      R"(^#\s*(?:ranks|number of processes|processes|np)\s*[:=]\s*(\d+)\s*$)", std::regex::icase);
  static const std::regex nodes_line(R"(^#\s*nodes\s*[:=]\s*(\d+)\s*$)", std::regex::icase);
  static const std::regex datatype_line(R"(^#\s*Datatype:\s*(\w+))");
  static const std::regex buffers_line(R"(Send Buffer on (\w+).*Receive Buffer on (\w+))");
  static const std::regex size_line(R"(^#\s*Size\b)", std::regex::icase);

  // First pass: the header, and the comments that apply to the whole file.
  std::optional<OsuTest> test;
  std::string test_name, family, version, datatype, buffers;
  int header_line = 0;
  std::optional<int> ranks_comment, nodes_comment;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int line_no = static_cast<int>(i) + 1;
    std::smatch m;
    if (std::regex_search(lines[i], m, header)) {
      if (header_line != 0) {
        fail_at({path, line_no}, "",
                fmt::format("a second OSU test header (the first is on line {}): import one test "
                            "per file",
                            header_line));
      }
      header_line = line_no;
      family = m[1].str();
      test_name = m[2].str();
      version = m[3].str();
      test = test_of(test_name);
      if (!test) {
        fail_at({path, line_no}, "",
                fmt::format("OSU test '{} {}' is not supported (latency, bw, bibw, allreduce, "
                            "allgather, reduce_scatter, bcast, reduce and alltoall are)",
                            family, test_name));
      }
    } else if (std::regex_search(lines[i], m, ranks_line)) {
      ranks_comment = std::stoi(m[1].str());
    } else if (std::regex_search(lines[i], m, nodes_line)) {
      nodes_comment = std::stoi(m[1].str());
    } else if (std::regex_search(lines[i], m, datatype_line)) {
      datatype = m[1].str();
    } else if (std::regex_search(lines[i], m, buffers_line)) {
      buffers = fmt::format("send {}, receive {}", m[1].str(), m[2].str());
    }
  }
  if (!test) {
    const auto first = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
      return l.find_first_not_of(" \t") != std::string::npos;
    });
    fail_at({path, first == lines.end() ? 0 : static_cast<int>(first - lines.begin()) + 1}, "",
            "not OSU micro-benchmarks output: no '# OSU ... Test' header line");
  }
  const bool p2p = test->op.starts_with("p2p_");

  Results r;
  r.provenance.tool = version.empty() ? "osu-micro-benchmarks" : "osu-micro-benchmarks " + version;
  r.provenance.source = path;
  if (!version.empty()) r.provenance.versions["osu-micro-benchmarks"] = version;

  int ranks = 2;
  if (!p2p) {
    if (!ranks_comment) {
      fail_at({path}, "",
              "the number of ranks is not in the file (OSU does not print it): add a line "
              "'# ranks: N' to it");
    }
    ranks = *ranks_comment;
  } else if (ranks_comment && *ranks_comment != 2) {
    r.provenance.notes.push_back(fmt::format(
        "{}: the file says {} ranks; a point-to-point test uses 2 of them", path, *ranks_comment));
  }
  if (ranks < 1) fail_at({path}, "ranks", "must be at least 1");
  int nodes = 1;
  if (nodes_comment) {
    nodes = *nodes_comment;
    if (nodes < 1 || nodes > ranks) {
      fail_at({path}, "nodes", fmt::format("must be 1 ... ranks ({}), not {}", ranks, nodes));
    }
  } else {
    r.provenance.notes.push_back(fmt::format(
        "{}: no '# nodes: N' line; the {} ranks are assumed to be on one node", path, ranks));
  }
  const std::string dtype = !datatype.empty() ? dtype_of(datatype)
                            : p2p             ? "int8"
                                              : "float32";  // OSU's defaults
  const std::string backend = family.starts_with("NCCL") ? "nccl" : "mpi";

  std::optional<std::vector<Column>> cols;
  for (std::size_t i = static_cast<std::size_t>(header_line); i < lines.size(); ++i) {
    const int line_no = static_cast<int>(i) + 1;
    const SourceLocation where{path, line_no};
    const std::string& l = lines[i];
    const auto start = l.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    if (l[start] == '#') {
      if (std::regex_search(l, size_line)) cols = parse_columns(l.substr(start), where);
      continue;
    }
    std::istringstream ts(l);
    std::vector<std::string> tokens;
    for (std::string t; ts >> t;) tokens.push_back(t);
    if (!std::all_of(tokens[0].begin(), tokens[0].end(),
                     [](unsigned char c) { return std::isdigit(c); })) {
      continue;  // a launcher or library message between rows
    }
    if (!cols) fail_at(where, "", "a data row before the '# Size ...' column header");
    const bool last = i + 1 == lines.size();
    if (last && !ends_with_newline) {
      fail_at(where, "", "truncated: the last row has no end of line (the output was cut short)");
    }
    if (tokens.size() < cols->size()) {
      fail_at(where, "",
              fmt::format("truncated: the row has {} of the {} columns of the header",
                          tokens.size(), cols->size()));
    }
    if (tokens.size() > cols->size()) {
      fail_at(where, "",
              fmt::format("the row has {} columns but the header names {}", tokens.size(),
                          cols->size()));
    }

    Measurement meas;
    meas.op = test->op;
    meas.backend = backend;
    meas.ranks = ranks;
    meas.nodes = nodes;
    meas.dtype = dtype;
    meas.params["source_line"] = std::to_string(line_no);
    meas.params["osu_test"] = family + " " + test_name;
    if (!datatype.empty()) meas.params["osu_datatype"] = datatype;
    if (!buffers.empty()) meas.params["osu_buffers"] = buffers;
    std::optional<double> size, latency, bandwidth;
    for (std::size_t c = 0; c < cols->size(); ++c) {
      if ((*cols)[c] == Column::kOther) continue;
      const auto v = to_number(tokens[c]);
      if (!v) fail_at(where, "", fmt::format("column {}: '{}' is not a number", c + 1, tokens[c]));
      switch ((*cols)[c]) {
        case Column::kSize:
          size = *v;
          break;
        case Column::kLatency:
          latency = *v;
          break;
        case Column::kBandwidth:
          bandwidth = *v;
          break;
        case Column::kMin:
          meas.params["min_latency_us"] = tokens[c];
          break;
        case Column::kMax:
          meas.params["max_latency_us"] = tokens[c];
          break;
        case Column::kIterations:
          meas.params["iterations"] = tokens[c];
          break;
        case Column::kOther:
          break;
      }
    }
    if (test->metric == Metric::kLatency) {
      if (!latency) fail_at(where, "", "a latency test without a latency column");
      if (!(*latency > 0)) fail_at(where, "latency", "must be a positive time in us");
      meas.samples_s = {*latency * 1e-6};
      meas.params["osu_metric"] = p2p ? "one-way latency" : "average latency";
    } else {
      if (!bandwidth) fail_at(where, "", "a bandwidth test without a 'Bandwidth (MB/s)' column");
      if (!(*bandwidth > 0)) fail_at(where, "bandwidth", "must be positive (MB/s)");
      // MB/s with MB = 1e6 B: the time per message of a window in flight.
      meas.samples_s = {*size / (*bandwidth * 1e6)};
      meas.params["osu_metric"] = "bandwidth";
      meas.params["bandwidth_MBps"] = fmt::format("{}", *bandwidth);
      if (test->bidirectional) meas.params["direction"] = "bidirectional";
    }
    meas.bytes = *size;
    if (test->op == "allgather" || test->op == "alltoall") {
      meas.bytes = *size * ranks;
      meas.params["osu_size_bytes"] = tokens[0];
    }
    if (!(meas.samples_s.front() > 0)) {
      fail_at(where, "", "a size of 0 B has no bandwidth time");
    }
    r.measurements.push_back(std::move(meas));
  }
  if (!cols) fail_at({path}, "", "no '# Size ...' column header after the OSU header");
  if (r.measurements.empty()) fail_at({path}, "", "the OSU output has no data rows");
  return r;
}

}  // namespace dlsim::calibrate
