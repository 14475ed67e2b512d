// OSU micro-benchmarks output -> dlcalibrate results (docs/calibrate.md, "Importing").
//
// A run starts at its header line "# OSU MPI Latency Test v7.3" (also "MPI-CUDA", "MPI-ROCM" and
// "NCCL" builds); a file may hold several runs (a job script's loop, a pasted session). The
// columns come from the line "# Size ..." in any of OSU's layouts: "Latency (us)", "Bandwidth
// (MB/s)", "Avg/Min/Max Latency(us) Iterations" (-f), "MB/s Messages/s" (osu_mbw_mr), "P50/P90/P99
// Tail Lat(us)", and the non-blocking tests' "Overall(us) Compute(us) Pure Comm.(us) Overlap(%)".
// What each test's numbers mean:
//   - osu_latency, osu_multi_lat: half the round-trip time of a ping-pong, a one-way latency;
//   - osu_bw, osu_bibw, osu_mbw_mr: MB/s with MB = 1e6 B over a window of messages in flight, so
//     size / bandwidth is a throughput time per message, not a latency; bibw counts both
//     directions, mbw_mr adds up its pairs (a record then moves size x pairs bytes);
//   - collectives: the average over ranks of the mean time per call, in us; a non-blocking test's
//     "Pure Comm." is the collective's own time, without the overlapped compute. OSU's size is
//     each rank's message; nccl-tests' (and so Measurement::bytes) is the whole gathered buffer
//     for allgather and each rank's whole send buffer for alltoall, i.e. OSU's size x ranks.
// OSU prints no rank or node count. They come from the file where it says (a "# ranks: N" or
// "# nodes: N" comment, the launcher line a job script echoed: mpirun -np, srun -n/-N, mpiexec
// --np/--ppn), else from --ranks/--nodes; a collective without a rank count is refused.

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "calibrate/import.hpp"
#include "calibrate/log_text.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace dlsim::calibrate {
namespace {

enum class Metric { kLatency, kBandwidth };

struct OsuTest {
  std::string op;
  Metric metric = Metric::kLatency;
  std::string variant;  // bidirectional, pairs, v, w, non-blocking
};

// The test part of the header ("Allreduce Latency Test") -> what it measures; nullopt for tests
// this importer does not read (gather, scatter, one-sided, ...).
std::optional<OsuTest> test_of(const std::string& name) {
  std::string key;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  static const std::vector<std::pair<std::string, OsuTest>> tests = {
      {"latencytest", {"p2p_latency", Metric::kLatency, ""}},
      {"multilatencytest", {"p2p_latency", Metric::kLatency, "pairs"}},
      {"bandwidthtest", {"p2p_bandwidth", Metric::kBandwidth, ""}},
      {"bidirectionalbandwidthtest", {"p2p_bandwidth", Metric::kBandwidth, "bidirectional"}},
      {"multiplebandwidthmessageratetest", {"p2p_bandwidth", Metric::kBandwidth, "pairs"}},
      {"allreducelatencytest", {"allreduce", Metric::kLatency, ""}},
      {"allgatherlatencytest", {"allgather", Metric::kLatency, ""}},
      {"reducescatterlatencytest", {"reducescatter", Metric::kLatency, ""}},
      {"broadcastlatencytest", {"broadcast", Metric::kLatency, ""}},
      {"bcastlatencytest", {"broadcast", Metric::kLatency, ""}},
      {"reducelatencytest", {"reduce", Metric::kLatency, ""}},
      {"alltoalllatencytest", {"alltoall", Metric::kLatency, ""}},
      {"alltoallpersonalizedexchangelatencytest", {"alltoall", Metric::kLatency, ""}},
      {"alltoallvpersonalizedexchangelatencytest", {"alltoall", Metric::kLatency, "v"}},
      {"alltoallwpersonalizedexchangelatencytest", {"alltoall", Metric::kLatency, "w"}},
      {"nonblockingallreducelatencytest", {"allreduce", Metric::kLatency, "non-blocking"}},
      {"nonblockingallgatherlatencytest", {"allgather", Metric::kLatency, "non-blocking"}},
      {"nonblockingreducescatterlatencytest", {"reducescatter", Metric::kLatency, "non-blocking"}},
      {"nonblockingbroadcastlatencytest", {"broadcast", Metric::kLatency, "non-blocking"}},
      {"nonblockingreducelatencytest", {"reduce", Metric::kLatency, "non-blocking"}},
      {"nonblockingalltoalllatencytest", {"alltoall", Metric::kLatency, "non-blocking"}},
  };
  for (const auto& [k, t] : tests) {
    if (k == key) return t;
  }
  return std::nullopt;
}

enum class Column {
  kSize,
  kLatency,  // Latency (us), Avg Latency(us)
  kMin,
  kMax,
  kIterations,
  kBandwidth,  // Bandwidth (MB/s), MB/s
  kPureComm,   // non-blocking: the collective's own time
  kOther       // Messages/s, tail latencies, Overall, Compute, Overlap, Validation
};

// The columns named by a "# Size ..." line, in order; an unknown column name is an error, since
// the numbers after it could not be placed.
std::vector<Column> parse_columns(const std::string& line, const SourceLocation& where) {
  static const std::regex label(
      R"(Size|Avg\s+Latency\s*\(us\)|Min\s+Latency\s*\(us\)|Max\s+Latency\s*\(us\)|)"
      R"(Latency\s*\(us\)|Bandwidth\s*\(MB/s\)|MB/s|Messages/s|Iterations|Validation|)"
      R"(P\d+\s+Tail\s+Lat\s*\(us\)|Overall\s*\(us\)|Compute\s*\(us\)|Pure\s+Comm\.?\s*\(us\)|)"
      R"(Overlap\s*\(%\))",
      std::regex::icase);
  std::vector<Column> cols;
  std::string rest = line.substr(line.find('#') + 1);
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
    } else if (l.starts_with("bandwidth") || l == "mb/s") {
      cols.push_back(Column::kBandwidth);
    } else if (l == "iterations") {
      cols.push_back(Column::kIterations);
    } else if (l.starts_with("pure")) {
      cols.push_back(Column::kPureComm);
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

// An MPI datatype as OSU prints it ("MPI_CHAR", "MPI_INT", "MPI_FLOAT") -> results dtype.
std::optional<std::string> dtype_of(const std::string& mpi_type) {
  static const std::vector<std::pair<std::string, std::string>> types = {
      {"MPI_CHAR", "int8"},       {"MPI_SIGNED_CHAR", "int8"},
      {"MPI_BYTE", "uint8"},      {"MPI_UNSIGNED_CHAR", "uint8"},
      {"MPI_SHORT", "int16"},     {"MPI_INT", "int32"},
      {"MPI_UNSIGNED", "uint32"}, {"MPI_LONG", "int64"},
      {"MPI_LONG_LONG", "int64"}, {"MPI_UNSIGNED_LONG", "uint64"},
      {"MPI_FLOAT", "float32"},   {"MPI_DOUBLE", "float64"}};
  std::string name = mpi_type;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (!name.starts_with("MPI_")) name = "MPI_" + name;
  for (const auto& [k, v] : types) {
    if (k == name) return v;
  }
  return std::nullopt;
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A rank or node count a comment line gives: at least 1.
int positive_count(const std::string& digits, const SourceLocation& where, const char* field) {
  const int v = log_count(digits, where, field);
  if (v < 1) fail_at(where, field, fmt::format("'{}' is not a count of at least 1", digits));
  return v;
}

// What a launcher line says: processes, nodes, processes per node.
struct Launch {
  std::optional<int> processes, nodes, per_node;
};
std::optional<Launch> launcher_in(const std::string& l, const SourceLocation& where) {
  static const std::regex launcher(R"((^|[\s/$#])(mpirun|mpiexec|srun|aprun|orterun)\s)");
  if (!std::regex_search(l, launcher)) return std::nullopt;
  // "-n 2", "-n2", "--np=2".
  static const std::regex nn(R"((?:^|\s)(?:-N|--nodes)[\s=]*(\d+)\b)");
  static const std::regex ppn(
      R"((?:^|\s)(?:--ppn|-ppn|--ntasks-per-node|--npernode)[\s=]*(\d+)\b)");
  Launch out;
  std::smatch m;
  // (srun's -c is cpus per task, not processes.)
  static const std::regex np_only(R"((?:^|\s)(?:-np|-n|--np|--ntasks)[\s=]*(\d+)\b)");
  if (std::regex_search(l, m, np_only)) out.processes = log_count(m[1].str(), where, "processes");
  if (std::regex_search(l, m, nn)) out.nodes = log_count(m[1].str(), where, "nodes");
  if (std::regex_search(l, m, ppn))
    out.per_node = log_count(m[1].str(), where, "processes per node");
  return out;
}

struct Run {
  OsuTest test;
  std::string family, name, version, datatype, buffers;
  int header_line = 0;
  int pairs = 1;
  std::optional<int> ranks_comment, nodes_comment;
  Launch launch;  // the launcher line before the header, if any
  std::optional<std::vector<Column>> cols;
  int rows = 0;
  std::optional<double> last_size;  // B, the run's previous row's
};

struct OsuReader {
  const LogText& log;
  const ImportOptions& options;
  Results r;
  std::optional<Run> run;
  Launch pending_launch;
  int runs = 0;

  void start(const LogLine& line, const std::smatch& m) {
    finish();
    Run next;
    next.family = m[1].str();
    next.name = m[2].str();
    next.version = m[3].str();
    next.header_line = line.number;
    const auto t = test_of(next.name);
    if (!t) {
      fail_at({log.path, line.number}, "",
              fmt::format("OSU test '{} {}' is not imported (latency, multi_lat, bw, bibw, mbw_mr, "
                          "allreduce, allgather, reduce_scatter, bcast, reduce, alltoall(v/w) and "
                          "their non-blocking forms are)",
                          next.family, next.name));
    }
    next.test = *t;
    next.launch = pending_launch;
    pending_launch = {};
    if (!next.version.empty()) r.provenance.versions["osu-micro-benchmarks"] = next.version;
    run = next;
  }

  void finish() {
    if (!run) return;
    if (!run->cols) {
      fail_at({log.path, run->header_line}, "",
              "no '# Size ...' column header after the OSU header");
    }
    if (run->rows == 0) {
      fail_at({log.path, run->header_line}, "", "the OSU run has no data rows");
    }
    ++runs;
    run.reset();
  }

  // Ranks and nodes of the current run, from the file, else the options.
  std::pair<int, int> layout(int line) {
    const bool p2p = run->test.op.starts_with("p2p_");
    std::optional<int> ranks = run->ranks_comment;
    std::string from = "a '# ranks:' line";
    if (!ranks && run->launch.processes) {
      ranks = run->launch.processes;
      from = "the launcher line";
    }
    if (options.ranks) {
      if (ranks && *ranks != *options.ranks) {
        fail_at({log.path, line}, "--ranks",
                fmt::format("the file says {} ranks ({}), not {}", *ranks, from, *options.ranks));
      }
      ranks = options.ranks;
      from = "--ranks";
    }
    if (p2p) {
      const int used = 2 * run->pairs;
      if (ranks && *ranks < used) {
        fail_at({log.path, line}, options.ranks ? "--ranks" : "ranks",
                fmt::format("{} pairs need {} ranks, {} says {}", run->pairs, used, from, *ranks));
      }
      ranks = used;
    }
    if (!ranks) {
      fail_at({log.path, line}, "",
              "the number of ranks is not in the file (OSU does not print it): give --ranks N, "
              "or add a line '# ranks: N' to the file");
    }
    std::optional<int> nodes = run->nodes_comment;
    if (!nodes && run->launch.nodes) nodes = run->launch.nodes;
    if (!nodes && run->launch.per_node && run->launch.processes) {
      nodes = (*run->launch.processes + *run->launch.per_node - 1) / *run->launch.per_node;
    }
    if (options.nodes) {
      if (nodes && *nodes != *options.nodes) {
        fail_at({log.path, line}, "--nodes",
                fmt::format("the file says {} nodes, not {}", *nodes, *options.nodes));
      }
      nodes = options.nodes;
    }
    if (!nodes) {
      r.provenance.notes.push_back(fmt::format(
          "{}:{}: no node count in the file; the {} ranks are taken as one node (give --nodes)",
          log.path, run->header_line, *ranks));
      nodes = 1;
    }
    if (*nodes < 1 || *nodes > *ranks) {
      fail_at({log.path, line}, "nodes",
              fmt::format("must be 1 ... ranks ({}), not {}", *ranks, *nodes));
    }
    return {*ranks, *nodes};
  }

  void row(const LogLine& line, const std::vector<std::string>& tokens, bool last) {
    const SourceLocation where{log.path, line.number};
    if (!run->cols) fail_at(where, "", "a data row before the '# Size ...' column header");
    const auto& cols = *run->cols;
    if (last && !log.ends_with_newline) {
      fail_at(where, "", "truncated: the last row has no end of line (the output was cut short)");
    }
    if (tokens.size() < cols.size()) {
      fail_at(where, "",
              fmt::format("truncated: the row has {} of the {} columns of the header",
                          tokens.size(), cols.size()));
    }
    if (tokens.size() > cols.size()) {
      fail_at(where, "",
              fmt::format("the row has {} columns but the header names {}", tokens.size(),
                          cols.size()));
    }
    const auto [ranks, nodes] = layout(line.number);
    const auto& test = run->test;
    const bool p2p = test.op.starts_with("p2p_");
    Measurement meas;
    meas.op = test.op;
    meas.backend = run->family.starts_with("NCCL") ? "nccl" : "mpi";
    meas.ranks = ranks;
    meas.nodes = nodes;
    meas.dtype = !run->datatype.empty() ? *dtype_of(run->datatype) : p2p ? "int8" : "float32";
    meas.params["source_line"] = std::to_string(line.number);
    meas.params["osu_test"] = run->family + " " + run->name;
    if (!run->datatype.empty()) meas.params["osu_datatype"] = run->datatype;
    if (!run->buffers.empty()) meas.params["osu_buffers"] = run->buffers;
    if (!test.variant.empty() && test.variant != "pairs") meas.params["osu_variant"] = test.variant;
    if (test.variant == "pairs") meas.params["pairs"] = std::to_string(run->pairs);
    std::optional<double> size, latency, bandwidth, pure, min, max;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (cols[c] == Column::kOther) continue;
      const auto v = parse_number(tokens[c]);
      if (!v || *v < 0) {
        fail_at(where, "", fmt::format("column {}: '{}' is not a number", c + 1, tokens[c]));
      }
      switch (cols[c]) {
        case Column::kSize:
          size = *v;
          break;
        case Column::kLatency:
          latency = *v;
          meas.params["latency_us"] = tokens[c];
          break;
        case Column::kBandwidth:
          bandwidth = *v;
          break;
        case Column::kPureComm:
          pure = *v;
          meas.params["pure_comm_us"] = tokens[c];
          break;
        case Column::kMin:
          min = *v;
          meas.params["min_latency_us"] = tokens[c];
          break;
        case Column::kMax:
          max = *v;
          meas.params["max_latency_us"] = tokens[c];
          break;
        case Column::kIterations:
          if (!(*v >= 1) || std::floor(*v) != *v) {
            fail_at(where, "Iterations",
                    fmt::format("'{}' is not a count of at least 1", tokens[c]));
          }
          meas.params["iterations"] = tokens[c];
          break;
        case Column::kOther:
          break;
      }
    }
    if (*size > kMaxBytes.value()) fail_at(where, "size", "is above 2^60 B");
    // OSU steps its sizes up, each printed once: a size at or below the previous row's is two
    // runs run together, or an edited table.
    if (run->last_size && *size <= *run->last_size) {
      fail_at(where, "size",
              fmt::format("{:.0f} B after {:.0f} B: OSU prints a test's sizes once each, in "
                          "ascending order (rows of two runs run together?)",
                          *size, *run->last_size));
    }
    run->last_size = *size;
    // The average over ranks lies between the least and the greatest rank's (OSU prints each
    // with two decimals: half a unit of rounding either way).
    if (latency && ((min && *min > *latency + 0.01) || (max && *max < *latency - 0.01) ||
                    (min && max && *min > *max + 0.01))) {
      fail_at(where, "latency",
              fmt::format("the row's min {} / average {} / max {} us are out of order: not an OSU "
                          "row",
                          min ? fmt::format("{:g}", *min) : "-", *latency,
                          max ? fmt::format("{:g}", *max) : "-"));
    }
    if (test.metric == Metric::kLatency) {
      // A non-blocking test's collective alone is its "Pure Comm." time.
      const auto t = test.variant == "non-blocking" ? pure : latency;
      if (!t) fail_at(where, "", "a latency test without a latency column");
      if (!(*t > 0)) fail_at(where, "latency", "must be a positive time in us");
      meas.samples_s = {sample_from_us(*t, where, "latency")};
      meas.params["osu_metric"] = p2p                              ? "one-way latency"
                                  : test.variant == "non-blocking" ? "pure communication time"
                                                                   : "average latency";
      meas.bytes = *size;
    } else {
      if (!bandwidth) fail_at(where, "", "a bandwidth test without a bandwidth (MB/s) column");
      if (!(*bandwidth > 0)) fail_at(where, "bandwidth", "must be positive (MB/s)");
      if (!(*size > 0)) fail_at(where, "size", "a size of 0 B has no bandwidth time");
      // MB/s with MB = 1e6 B: the time per message of a window in flight; mbw_mr's pairs move
      // size x pairs bytes in that time.
      meas.bytes = *size * run->pairs;
      meas.samples_s = {sample_from_us(meas.bytes / *bandwidth, where, "bandwidth")};
      meas.params["osu_metric"] = "bandwidth";
      meas.params["bandwidth_MBps"] =
          tokens[std::find(cols.begin(), cols.end(), Column::kBandwidth) - cols.begin()];
      if (test.variant == "bidirectional") meas.params["direction"] = "bidirectional";
    }
    if (test.op == "allgather" || test.op == "alltoall") {
      meas.bytes = *size * ranks;
      meas.params["osu_size_bytes"] = tokens[0];
    }
    r.measurements.push_back(std::move(meas));
    ++run->rows;
  }

  void read() {
    static const std::regex header(R"(^#\s*OSU\s+(\S+)\s+(.*?Test)\b\s*(?:v(\S+))?\s*$)");
    // Whatever follows the key is its value: a count, or an error naming it ("x", "2.5" would
    // otherwise leave the line unread and the run on one node).
    static const std::regex ranks_line(
        R"(^#\s*(?:ranks|number of processes|processes|np)\s*[:=]\s*(.*?)\s*$)", std::regex::icase);
    static const std::regex nodes_line(R"(^#\s*nodes\s*[:=]\s*(.*?)\s*$)", std::regex::icase);
    static const std::regex datatype_line(R"(^#\s*Datatype:\s*(\w+))");
    static const std::regex buffers_line(R"(Send Buffer on (\w+).*Receive Buffer on (\w+))");
    static const std::regex pairs_line(R"(\[\s*pairs:\s*(\d+)\s*\])");
    static const std::regex size_line(R"(^#\s*Size\b)", std::regex::icase);
    r.provenance.tool = "osu-micro-benchmarks";
    r.provenance.source = log.path;
    std::set<std::string> buffers;
    for (std::size_t i = 0; i < log.lines.size(); ++i) {
      const LogLine& line = log.lines[i];
      const std::string& l = line.text;
      const SourceLocation where{log.path, line.number};
      if (l.empty() || is_library_noise(l)) continue;
      std::smatch m;
      if (std::regex_search(l, m, header)) {
        start(line, m);
        continue;
      }
      if (l[0] == '#') {
        if (std::regex_search(l, m, ranks_line)) {
          (run ? run->ranks_comment : pending_launch.processes) =
              positive_count(m[1].str(), where, "ranks");
        } else if (std::regex_search(l, m, nodes_line)) {
          (run ? run->nodes_comment : pending_launch.nodes) =
              positive_count(m[1].str(), where, "nodes");
        } else if (run && std::regex_search(l, m, datatype_line)) {
          run->datatype = m[1].str();
          if (!dtype_of(run->datatype)) {
            fail_at(where, "Datatype",
                    fmt::format("'{}' is not an MPI datatype the import knows (MPI_CHAR, "
                                "MPI_BYTE, MPI_SHORT, MPI_INT, MPI_LONG, MPI_FLOAT, MPI_DOUBLE and "
                                "their unsigned forms)",
                                run->datatype));
          }
        } else if (run && std::regex_search(l, m, buffers_line)) {
          run->buffers = fmt::format("send {}, receive {}", m[1].str(), m[2].str());
          buffers.insert(run->buffers);
        } else if (run && std::regex_search(l, m, pairs_line)) {
          run->pairs = std::max(1, std::min(1 << 19, log_count(m[1].str(), where, "pairs")));
        } else if (run && std::regex_search(l, size_line)) {
          run->cols = parse_columns(l, {log.path, line.number});
        } else if (auto launch = launcher_in(l, where)) {
          pending_launch = *launch;  // "### Running: srun -n2 -N2 ..." of a test harness
        }
        continue;
      }
      const auto tokens = split_tokens(l);
      if (run && !tokens.empty() && all_digits(tokens.front())) {
        row(line, tokens, i + 1 == log.lines.size());
        continue;
      }
      // A row whose size is not a whole number ("5x12", "-512") but whose next column is a
      // measurement: a garbled row, which would otherwise be skipped without a word.
      if (run && tokens.size() >= 2 &&
          (std::isdigit(static_cast<unsigned char>(tokens[0][0])) || tokens[0][0] == '-' ||
           tokens[0][0] == '+') &&
          parse_number(tokens[1])) {
        fail_at(where, "size", fmt::format("'{}' is not a whole number of bytes", tokens[0]));
      }
      if (auto launch = launcher_in(l, where)) {
        // The next run's launcher: the current run, if any, has ended.
        if (run && run->rows > 0) finish();
        pending_launch = *launch;
        static const std::regex device(R"((?:^|\s)-d\s+(cuda|rocm|openacc)\b)");
        if (std::regex_search(l, m, device)) r.provenance.devices["buffers"] = m[1].str();
      }
      // Anything else (a date, a separator, a library's message) is not OSU's.
    }
    if (!run && runs == 0) {
      const auto first = std::find_if(log.lines.begin(), log.lines.end(),
                                      [](const LogLine& l) { return !l.text.empty(); });
      fail_at({log.path, first == log.lines.end() ? 0 : first->number}, "",
              "not OSU micro-benchmarks output: no '# OSU ... Test' header line");
    }
    finish();
    if (!buffers.empty()) {
      std::string all;
      for (const auto& b : buffers) all += (all.empty() ? "" : "; ") + b;
      r.provenance.devices["osu_buffers"] = all;
    }
    const auto& v = r.provenance.versions;
    if (auto it = v.find("osu-micro-benchmarks"); it != v.end()) {
      r.provenance.tool = "osu-micro-benchmarks " + it->second;
    }
  }
};

}  // namespace

Results import_osu(const std::string& path, const ImportOptions& options) {
  if (!options.op.empty()) fail_at({}, "--op", "the OSU header names its test");
  const LogText log = read_log_text(path, "the OSU micro-benchmarks output");
  OsuReader reader{log, options, {}, std::nullopt, {}, 0};
  reader.read();
  return std::move(reader.r);
}

}  // namespace dlsim::calibrate
