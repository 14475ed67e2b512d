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
#include <fmt/ranges.h>

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
#include "calibrate/log_text.hpp"
#include "common/cli.hpp"
#include "common/collective_op.hpp"
#include "common/error.hpp"
#include "common/json_text.hpp"
#include "common/units.hpp"

namespace dlsim::calibrate {
namespace {

// A message size of a row: a whole number of bytes, 0 .. 2^60.
void check_size(const SourceLocation& where, const std::string& field, double bytes) {
  if (!(bytes >= 0) || std::floor(bytes) != bytes) {
    fail_at(where, field, fmt::format("'{}' is not a whole number of bytes", bytes));
  }
  if (bytes > kMaxBytes.value()) fail_at(where, field, "is above 2^60 B");
}

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
      {"broadcast", "broadcast"},  {"reduce", "reduce"},        {"alltoall", "alltoall"},
      {"sendrecv", "sendrecv"}};
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

// Element size of an nccl-tests type name (B).
double type_bytes(const std::string& type) {
  static const std::map<std::string, double> sizes = {
      {"float", 4}, {"half", 2},   {"double", 8}, {"bfloat16", 2}, {"int8", 1},
      {"uint8", 1}, {"char", 1},   {"int32", 4},  {"int", 4},      {"uint32", 4},
      {"int64", 8}, {"uint64", 8}, {"f8e4m3", 1}, {"f8e5m2", 1}};
  const auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

const char* const kOpChoices = "allreduce, allgather, reducescatter, broadcast, reduce, alltoall";

// What the log says about one run (one table), gathered from the lines before its header.
// --transport as the INFO lines spell it: SHM, P2P, NET.
std::string transport_name(std::string given) {
  std::transform(given.begin(), given.end(), given.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  return given;
}

struct RunInfo {
  std::string test;                       // all_reduce, ... ("" when the run does not name it)
  int test_line = 0;                      // where it was named
  std::map<int, std::string> rank_hosts;  // rank -> host, from "#  Rank N ... on HOST"
  int threads_x_gpus = 0;                 // from "# nThread T nGpus G"
  double max_bytes = 0;                   // from "... maxBytes N" on that line (0: not given)
  int processes = 0;                      // from an echoed mpirun/srun line, or SLURM_NTASKS=
  int nodes = 0;                          // from an echoed srun -N / SLURM_NNODES=
  std::set<std::string> transports;       // SHM, P2P, NET: from NCCL INFO channel lines
};

struct Columns {
  std::size_t count = 0;  // header tokens; a complete data row has at least as many
  std::size_t size = 0, count_col = 0, type = 0, time = 0, algbw = 0, busbw = 0;
  std::optional<std::size_t> redop, root, in_place_time, wrong;
  bool wrong_is_count = false;  // 2.x "#wrong" (elements that failed the check), not 1.x "error"
};

std::optional<Columns> parse_header(const std::string& line) {
  if (line.empty() || line[0] != '#') return std::nullopt;
  const auto tokens = split_ws(line.substr(1));
  Columns c;
  c.count = tokens.size();
  bool size = false, count = false, type = false, time = false, algbw = false, busbw = false;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto& t = tokens[i];
    if ((t == "size" || t == "bytes") && !size) {
      c.size = i;
      size = true;
    } else if (t == "count" && !count) {
      c.count_col = i;
      count = true;
    } else if (t == "type" && !type) {
      c.type = i;
      type = true;
    } else if (t == "redop" && !c.redop) {
      c.redop = i;
    } else if (t == "root" && !c.root) {
      c.root = i;
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
      c.wrong_is_count = t == "#wrong";
    }
  }
  if (!(size && count && type && time && algbw && busbw)) return std::nullopt;
  return c;
}

// One data row, as printed.
struct Row {
  int line = 0;
  std::vector<std::string> tokens;
};

// A row cut by the test's own failure report ("node0: Test CUDA failure common.cu:389 ...").
std::optional<std::string> failure_in(const std::string& text) {
  static const std::regex failure(
      R"((Test (CUDA |NCCL )?failure.*|Test failure.*|NCCL failure.*))");
  std::smatch m;
  if (std::regex_search(text, m, failure)) return m[1].str();
  return std::nullopt;
}

// The collective a table measured, from its columns and the values of its first row, where they
// decide it: a root means broadcast (no reduction) or reduce; without one, a reduction is an
// allreduce when each rank's count is the whole buffer and a reduce-scatter when it is a 1/n
// share; no reduction and a 1/n share is an allgather or an alltoall, which nothing printed
// tells apart. "" when undecided; `choices` then names the candidates.
std::string op_from_columns(const Columns& c, const Row& first, const Row& last, int ranks,
                            std::string& choices) {
  const auto& t = first.tokens;
  // busbw / algbw of the largest row: 2(n-1)/n (allreduce, in [1, 2) for n >= 2) or (n-1)/n
  // (reduce-scatter, allgather, alltoall: below 1), nccl-tests doc/PERFORMANCE.md.
  const double algbw = to_number(last.tokens[c.algbw]).value_or(0);
  const double busbw = to_number(last.tokens[c.busbw]).value_or(0);
  std::optional<bool> full_factor;  // the ratio is allreduce's, not a 1/n share's
  if (algbw > 0 && busbw > 0) {
    if (busbw > algbw * 1.01) full_factor = true;
    if (busbw < algbw * 0.99) full_factor = false;
  }
  std::optional<bool> reduces, rooted;
  if (c.redop) reduces = t[*c.redop] != "none";
  if (c.root) {
    const auto root = to_number(t[*c.root]);
    rooted = root && *root >= 0;
  }
  // Old layouts: a root column alone (broadcast), a redop column alone (a reduction, unrooted).
  if (c.root && !c.redop) reduces = false;
  if (c.redop && !c.root) rooted = false;
  const double bytes = to_number(t[c.size]).value_or(0);
  const double count = to_number(t[c.count_col]).value_or(0);
  const double elem = type_bytes(t[c.type]);
  std::optional<bool> share;  // count is a 1/n share of the size
  if (elem > 0 && bytes > 0 && count > 0 && ranks > 1) {
    if (std::abs(count * elem - bytes) < 0.5) share = false;
    if (std::abs(count * elem * ranks - bytes) < 0.5 * ranks) share = true;
  }
  if (rooted && *rooted) {
    if (reduces) return *reduces ? "reduce" : "broadcast";
    choices = "broadcast, reduce";
    return "";
  }
  if (reduces && *reduces && rooted) {
    if (share) return *share ? "reducescatter" : "allreduce";
    if (full_factor) return *full_factor ? "allreduce" : "reducescatter";
    choices = "allreduce, reducescatter";
    return "";
  }
  if (reduces && !*reduces && rooted) {
    choices = share && !*share ? "sendrecv (not imported)" : "allgather, alltoall";
    return "";
  }
  choices = kOpChoices;
  return "";
}

// Ranks from the ratio busbw / algbw = F(n) of the largest row, for ops whose bus factor depends
// on n (nccl-tests doc/PERFORMANCE.md): 2(n-1)/n or (n-1)/n.
std::optional<int> ranks_from_bus_factor(const std::string& op, double algbw, double busbw) {
  if (!(algbw > 0) || !(busbw > 0)) return std::nullopt;
  const double r = busbw / algbw;
  double n = 0;
  if (op == "allreduce") {
    if (r >= 2) return std::nullopt;
    n = 2 / (2 - r);
  } else if (op == "allgather" || op == "reducescatter" || op == "alltoall") {
    if (r >= 1) return std::nullopt;
    n = 1 / (1 - r);
  } else {
    return std::nullopt;
  }
  const double rounded = std::round(n);
  if (rounded < 1 || std::abs(n - rounded) > 0.05 * rounded) return std::nullopt;
  return static_cast<int>(rounded);
}

struct TextReader {
  const LogText& log;
  const ImportOptions& options;
  Results r;
  std::set<std::string> gpus;
  RunInfo run;
  std::optional<Columns> table;
  int table_line = 0;
  std::vector<Row> rows;
  bool elided = false;
  int tables = 0;

  SourceLocation at(int line) const { return {log.path, line}; }

  void metadata(const std::string& l, int line) {
    const SourceLocation where = at(line);
    static const std::regex rank_line(
        R"(^#\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*?)\s*$)");
    static const std::regex nthread(R"(^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+))");
    static const std::regex nccl_version(R"(NCCL version\s+(\d+\.\d+\.\d+\S*))");
    static const std::regex tests_version(R"(nccl-tests version\s+(\S+))");
    static const std::regex library_code(R"(nccl-library=(\d+))");
    static const std::regex env_token(R"((?:^|\s)(NCCL_[A-Z0-9_]+)=(\S*))");
    static const std::regex env_info(
        R"(NCCL INFO\s+(NCCL_[A-Z0-9_]+) set by environment to (\S+))");
    static const std::regex slurm_tasks(R"(^SLURM_NTASKS=(\d+)\s*$)");
    static const std::regex slurm_nodes(R"(^SLURM_(?:JOB_)?NNODES=(\d+)\s*$)");
    // NCCL_DEBUG=INFO's connection lines: "Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"
    // (2.5 on), "Ring 00 : 0[0] -> 1[1] via direct shared memory" or "via P2P/IPC" (2.4).
    static const std::regex channel(
        R"(NCCL INFO\s+(?:Channel|Ring)\s+\d+\S*\s*:.*\bvia\s+(SHM|P2P|NET|direct shared memory))");
    std::smatch m;
    if (std::regex_search(l, m, channel)) {
      const std::string t = m[1].str();
      run.transports.insert(t == "direct shared memory" ? "SHM" : t);
    }
    if (std::regex_search(l, m, nthread)) {
      run.rank_hosts.clear();  // a new run: its device lines follow
      run.transports.clear();
      run.threads_x_gpus = std::min(1 << 20, log_count(m[1].str(), where, "nThread")) *
                           std::min(1 << 10, log_count(m[2].str(), where, "nGpus"));
      static const std::regex max_bytes(R"(\bmaxBytes\s+(\d+))");
      std::smatch mb;
      run.max_bytes = std::regex_search(l, mb, max_bytes) ? std::stod(mb[1].str()) : 0;
    } else if (std::regex_search(l, m, rank_line)) {
      run.rank_hosts[std::min(1 << 20, log_count(m[1].str(), where, "Rank"))] = m[2].str();
      add_host(r.provenance, m[2].str());
      if (m[3].length() > 0) gpus.insert(m[3].str());
    }
    if (std::regex_search(l, m, nccl_version)) {
      record_nccl_version(r.provenance, m[1].str());
    } else if (std::regex_search(l, m, library_code) && !r.provenance.versions.count("nccl")) {
      r.provenance.versions["nccl"] =
          nccl_version_from_code(log_count(m[1].str(), where, "nccl-library"));
    }
    if (std::regex_search(l, m, tests_version)) r.provenance.versions["nccl-tests"] = m[1].str();
    if (std::regex_search(l, m, env_info)) {
      std::string value = m[2].str();
      if (value.size() > 1 && value.back() == '.')
        value.pop_back();  // "... set by environment to 0."
      r.provenance.environment[m[1].str()] = value;
    } else if (l.find("NCCL INFO") == std::string::npos) {
      for (std::sregex_iterator it(l.begin(), l.end(), env_token), end; it != end; ++it) {
        r.provenance.environment[(*it)[1].str()] = (*it)[2].str();
      }
    }
    if (std::regex_search(l, m, slurm_tasks))
      run.processes = log_count(m[1].str(), where, "SLURM_NTASKS");
    if (std::regex_search(l, m, slurm_nodes))
      run.nodes = log_count(m[1].str(), where, "SLURM_NNODES");
  }

  // A command line or shell prompt that starts a test: the test it names, the processes of the
  // launcher before it (mpirun -np N, srun -n N, -N nodes).
  void command(const LogLine& line, const std::string& test) {
    static const std::regex processes(R"((?:^|\s)(?:-np|-n|--np|--ntasks)[\s=](\d+))");
    static const std::regex nodes(R"((?:^|\s)(?:-N|--nodes)[\s=](\d+))");
    const std::string& l = line.text;
    run.test = test;
    run.test_line = line.number;
    if (l.find("Collective test starting") != std::string::npos) return;
    if (r.provenance.command.empty()) {
      const auto from = l.find_first_not_of("+$>#: ");
      r.provenance.command = from == std::string::npos ? l : l.substr(from);
    }
    const std::string launcher = l.substr(0, l.find("_perf"));
    std::smatch m;
    if (std::regex_search(launcher, m, processes)) {
      run.processes = log_count(m[1].str(), at(line.number), "processes");
    }
    if (std::regex_search(launcher, m, nodes))
      run.nodes = log_count(m[1].str(), at(line.number), "nodes");
  }

  // Turns the table's rows into measurements, once the table has ended.
  void finish_table(bool footer) {
    const Columns c = *table;
    table.reset();
    if (rows.empty()) {
      fail_at(at(table_line), "", "the nccl-tests results table has no rows");
    }
    if (!footer && run.max_bytes > 0) {
      // A table that stops short of the run's last size, with no footer, was cut off (an
      // interrupted run, a log copied in part); a table copied whole but without its footer
      // still reaches maxBytes.
      const auto last = to_number(rows.back().tokens[c.size]);
      if (last && *last < run.max_bytes) {
        fail_at(
            at(rows.back().line), "",
            fmt::format("truncated: the table ends at {:.0f} B, the run's maxBytes is {:.0f} B, "
                        "and no '# Avg bus bandwidth' line follows",
                        *last, run.max_bytes));
      }
    }
    if (!footer) {
      r.provenance.notes.push_back(fmt::format(
          "{}:{}: the table has no '# Avg bus bandwidth' line after it (the log as copied ends "
          "the table at line {})",
          log.path, table_line, rows.back().line));
    }
    if (elided) {
      r.provenance.notes.push_back(
          fmt::format("{}:{}: rows of the table were left out where the log was copied ('...')",
                      log.path, table_line));
      elided = false;
    }
    // Ranks: the device lines (the highest rank + 1: a copy may list only some), else threads
    // x GPUs x processes, else the user's --ranks, else the bus factor of the largest row.
    int ranks = 0;
    std::string ranks_from;
    if (!run.rank_hosts.empty()) {
      ranks = run.rank_hosts.rbegin()->first + 1;
      ranks_from = "its '#  Rank' device lines";
    } else if (run.processes > 0) {
      ranks = std::max(1, run.threads_x_gpus) * run.processes;
      ranks_from = "nThread x nGpus x the processes of its launcher";
    } else if (options.ranks) {
      ranks = *options.ranks;
      ranks_from = "--ranks";
    }
    if (options.ranks && ranks != *options.ranks && ranks_from != "--ranks") {
      fail_at(at(table_line), "--ranks",
              fmt::format("the log says {} ranks ({}), not {}", ranks, ranks_from, *options.ranks));
    }

    // The operation: named by the run, by --op, or decided by the columns.
    std::string op = run.test.empty() ? std::string() : op_from_test(run.test);
    if (!run.test.empty() && op.empty()) {
      fail_at(at(run.test_line), "",
              fmt::format("nccl-tests test '{}_perf' is not imported (all_reduce, all_gather, "
                          "reduce_scatter, broadcast, reduce, alltoall and sendrecv are)",
                          run.test));
    }
    if (!options.op.empty()) {
      if (!op.empty() && op != options.op) {
        fail_at(at(run.test_line), "--op",
                fmt::format("the log names {}_perf ({}), not {}", run.test, op, options.op));
      }
      op = options.op;
    }
    if (op.empty()) {
      std::string choices;
      const int known = ranks > 0 ? ranks : std::max(1, run.threads_x_gpus);
      // The first row that moves bytes says whether a count is a 1/n share.
      const auto moving = std::find_if(rows.begin(), rows.end(), [&](const Row& row) {
        return to_number(row.tokens[c.size]).value_or(0) > 0;
      });
      op = op_from_columns(c, moving == rows.end() ? rows.front() : *moving, rows.back(), known,
                           choices);
      if (op.empty()) {
        fail_at(at(table_line), "",
                fmt::format("cannot tell which collective this table measured (the log names no "
                            "*_perf binary and its columns fit {}): give --op with one of {}",
                            choices, kOpChoices));
      }
      r.provenance.notes.push_back(
          fmt::format("{}:{}: the operation ({}) was decided by the table's columns and counts",
                      log.path, table_line, op));
    }
    if (ranks == 0) {
      const auto& last = rows.back().tokens;
      if (auto n = ranks_from_bus_factor(op, to_number(last[c.algbw]).value_or(0),
                                         to_number(last[c.busbw]).value_or(0))) {
        ranks = *n;
        ranks_from = "busbw / algbw of its largest row";
      } else if (run.threads_x_gpus > 0) {
        ranks = run.threads_x_gpus;
        ranks_from = "nThread x nGpus (one process)";
      } else {
        fail_at(at(table_line), "",
                "cannot tell how many ranks ran: the log has no '#  Rank' device lines, no "
                "launcher line and no '# nThread' line, and the bus factor does not decide: give "
                "--ranks");
      }
    }
    if (run.rank_hosts.empty()) {
      r.provenance.notes.push_back(
          fmt::format("{}:{}: {} ranks from {}", log.path, table_line, ranks, ranks_from));
    }
    int nodes = 0;
    if (!run.rank_hosts.empty()) {
      std::set<std::string> hosts;
      for (const auto& [rank, host] : run.rank_hosts) hosts.insert(host);
      nodes = static_cast<int>(hosts.size());
    }
    if (options.nodes) {
      if (nodes > 0 && nodes != *options.nodes) {
        fail_at(at(table_line), "--nodes",
                fmt::format("the log's device lines name {} hosts, not {}", nodes, *options.nodes));
      }
      nodes = *options.nodes;
    }
    if (nodes == 0 && run.nodes > 0) nodes = run.nodes;
    if (nodes == 0) {
      nodes = 1;
      r.provenance.notes.push_back(fmt::format(
          "{}:{}: the log names no hosts; the {} ranks are taken as one node (give --nodes)",
          log.path, table_line, ranks));
    }
    if (nodes > ranks) {
      fail_at(at(table_line), "--nodes", fmt::format("{} nodes for {} ranks", nodes, ranks));
    }
    std::string transport = fmt::format("{}", fmt::join(run.transports, "+"));
    if (!options.transport.empty()) {
      const std::string given = transport_name(options.transport);
      if (!transport.empty() && transport != given) {
        fail_at(at(table_line), "--transport",
                fmt::format("the log's NCCL INFO lines say {}, not {}", transport, given));
      }
      transport = given;
    }

    double previous_bytes = 0;  // nccl-tests steps its sizes up (-f, -i); equal ones can round
    for (const auto& row : rows) {
      const SourceLocation where = at(row.line);
      const auto& tokens = row.tokens;
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
      check_size(where, "size", bytes);
      if (bytes < previous_bytes) {
        fail_at(where, "size",
                fmt::format("{:.0f} B after {:.0f} B: nccl-tests prints a table's sizes in "
                            "ascending order (rows of two runs run together?)",
                            bytes, previous_bytes));
      }
      previous_bytes = bytes;
      check_busbw(where, "busbw", op, ranks, algbw, busbw,
                  half_unit(tokens[c.busbw]) + half_unit(tokens[c.algbw]) * bus_factor(op, ranks));
      const auto dtype = dtype_of(tokens[c.type]);
      if (!dtype) fail_at(where, "type", fmt::format("unknown data type '{}'", tokens[c.type]));
      // nccl-tests' count is the whole buffer's elements for allreduce, broadcast and reduce,
      // and each rank's share for allgather, reducescatter and alltoall (src/*.cu,
      // *GetCollByteCount): with the type, it gives the size exactly.
      {
        const auto count = to_number(tokens[c.count_col]);
        if (!count || *count < 0 || *count != std::floor(*count)) {
          fail_at(where, "count",
                  fmt::format("'{}' is not a count of elements", tokens[c.count_col]));
        }
        const auto known = dlsim::parse_op(op);
        const bool share = known && dlsim::count_is_share(*known);
        const double elem = type_bytes(tokens[c.type]);
        const double expected = *count * elem * (share ? ranks : 1);
        if (elem > 0 && std::abs(expected - bytes) >= 0.5) {
          fail_at(
              where, "count",
              fmt::format("{:.0f} element(s) of {} {}make {:.0f} B, not the row's {:.0f} B", *count,
                          tokens[c.type], share ? fmt::format("on each of {} ranks ", ranks) : "",
                          expected, bytes));
        }
      }

      Measurement meas;
      meas.op = op;
      meas.backend = "nccl";
      meas.ranks = ranks;
      meas.nodes = nodes;
      meas.bytes = bytes;
      meas.dtype = *dtype;
      meas.samples_s = {sample_from_us(time_us, where, "time")};
      meas.params["source_line"] = std::to_string(row.line);
      meas.params["busbw_GBps"] = tokens[c.busbw];
      if (!transport.empty()) meas.params["transport"] = transport;
      if (c.in_place_time && *c.in_place_time < tokens.size()) {
        if (to_number(tokens[*c.in_place_time])) {
          meas.params["in_place_time_us"] = tokens[*c.in_place_time];
        }
      }
      if (c.wrong && *c.wrong < tokens.size()) {
        const auto wrong = to_number(tokens[*c.wrong]);
        // nccl-tests -c 1 checks the result: a wrong element means the collective failed,
        // and its time is not one of a working collective.
        if (wrong && *wrong != 0 && c.wrong_is_count) {
          fail_at(where, "#wrong",
                  fmt::format("{} elements failed nccl-tests' check: not a working collective's "
                              "time",
                              tokens[*c.wrong]));
        }
        if (wrong && *wrong != 0) meas.params["wrong_elements"] = tokens[*c.wrong];
      }
      r.measurements.push_back(std::move(meas));
    }
    rows.clear();
    ++tables;
  }

  void read() {
    r.provenance.tool = kTool;
    r.provenance.source = log.path;
    const auto& lines = log.lines;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const LogLine& line = lines[i];
      const std::string& l = line.text;
      const bool noise = is_library_noise(l);
      if (noise) {
        metadata(l, line.number);
        continue;  // NCCL INFO, UCX, MPI lines: also inside a table
      }
      const auto tokens = split_ws(l);
      const bool data_row = !tokens.empty() && all_digits(tokens[0]);
      if (table) {
        if (data_row) {
          if (auto f = failure_in(l)) {
            fail_at(at(line.number), "", fmt::format("the run failed in this row: {}", *f));
          }
          if (tokens.size() < table->count) {
            const bool last = i + 1 == lines.size();
            if (i + 1 < lines.size()) {
              if (auto f = failure_in(lines[i + 1].text)) {
                fail_at(at(line.number), "", fmt::format("the run failed in this row: {}", *f));
              }
            }
            fail_at(at(line.number), "",
                    fmt::format("truncated: the row has {} of the {} columns of the header{}",
                                tokens.size(), table->count,
                                last && !log.ends_with_newline ? " (the file ends in it)" : ""));
          }
          if (i + 1 == lines.size() && !log.ends_with_newline) {
            fail_at(at(line.number), "",
                    "truncated: the last row has no end of line (the output was cut short)");
          }
          if (tokens.size() > table->count) {
            fail_at(at(line.number), "",
                    fmt::format("the row has {} columns where the header has {}", tokens.size(),
                                table->count));
          }
          rows.push_back({line.number, tokens});
          continue;
        }
        if (l.find("Avg bus bandwidth") != std::string::npos ||
            l.find("Collective test concluded") != std::string::npos) {
          finish_table(true);
          continue;
        }
        // A row of the table's width whose size is not a whole number ("-512", "5x2") is a
        // garbled row, not the end of the table: ending there would drop the rows after it.
        if (tokens.size() >= table->count && !tokens[0].empty() &&
            (std::isdigit(static_cast<unsigned char>(tokens[0][0])) || tokens[0][0] == '-' ||
             tokens[0][0] == '+')) {
          fail_at(at(line.number), "size",
                  fmt::format("'{}' is not a whole number of bytes", tokens[0]));
        }
        if (l.find("Out of bounds values") != std::string::npos || l == "#" || l.empty()) {
          continue;
        }
        if (l.find_first_not_of('.') == std::string::npos) {
          elided = true;  // "..." where a document left rows out
          continue;
        }
        if (l[0] == '#' && !parse_header(l) && l.find("nThread") == std::string::npos &&
            l.find("Collective test starting") == std::string::npos) {
          continue;  // the units line "(B) (elements) ..." and the like
        }
        if (auto f = failure_in(l)) {
          fail_at(at(line.number), "", fmt::format("the run failed: {}", *f));
        }
        finish_table(false);  // prose, a fence, the next run: the table ended without a footer
      }
      if (data_row) continue;  // a row with no header before it: not a table we can read
      if (auto t = test_in_line(l)) command(line, *t);
      metadata(l, line.number);
      if (auto c = parse_header(l)) {
        table = c;
        table_line = line.number;
      }
    }
    if (table) finish_table(false);
    if (tables == 0) {
      fail_at({log.path}, "",
              "not nccl-tests output: no column header line ('#  size  count  type ... time  "
              "algbw  busbw ...')");
    }
    if (!gpus.empty()) {
      std::string all;
      for (const auto& g : gpus) all += (all.empty() ? "" : ", ") + g;
      r.provenance.devices["gpu"] = all;
    }
  }
};

// ---- JSON (-J) ----

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& path,
                             const std::string& field) {
  if (!j.is_object() || !j.contains(key)) fail_at({path}, field + key, "missing");
  return j.at(key);
}

double json_number(const nlohmann::json& j, const std::string& path, const std::string& field) {
  if (!j.is_number()) {
    fail_at({path}, field, fmt::format("'{}' is not a number", json_text(j)));
  }
  return j.get<double>();
}

Results import_json(const std::string& path, const std::string& text,
                    const ImportOptions& options) {
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
                   : fmt::format("not valid JSON: {}", json_problem(e)));
  } catch (const nlohmann::json::exception& e) {  // a number out of range
    fail_at({path}, "", fmt::format("not valid JSON: {}", json_problem(e)));
  }
  if (!doc.is_object() || !doc.contains("results")) {
    fail_at({path}, "", "not nccl-tests -J output: no 'results' list");
  }
  Results r;
  r.provenance.tool = kTool;
  r.provenance.source = path;
  if (doc.contains("version"))
    r.provenance.notes.push_back(
        fmt::format("nccl-tests JSON format version {}", json_text(doc["version"])));
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
  std::string op = test.empty() ? std::string() : op_from_test(test);
  if (!test.empty() && op.empty()) {
    fail_at({path}, "args",
            fmt::format("nccl-tests test '{}_perf' is not imported (all_reduce, all_gather, "
                        "reduce_scatter, broadcast, reduce and alltoall are)",
                        test));
  }
  if (!options.op.empty()) {
    if (!op.empty() && op != options.op) {
      fail_at({path}, "--op",
              fmt::format("the log names {}_perf ({}), not {}", test, op, options.op));
    }
    op = options.op;
  }
  if (op.empty()) {
    fail_at({path}, "args",
            fmt::format("cannot tell which collective was measured (no nccl-tests binary in "
                        "'args'): give --op with one of {}",
                        kOpChoices));
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
  for (const auto& [v, name] : {std::pair{threads, "config.nthreads"}, {gpus, "config.ngpus"}}) {
    if (!(v >= 1 && v <= kMaxRanks) || std::floor(v) != v) {
      fail_at({path}, name, fmt::format("must be a whole number in 1..{}, got {}", kMaxRanks, v));
    }
  }
  if (threads * gpus * static_cast<double>(processes) > kMaxRanks) {
    fail_at({path}, "config", fmt::format("more than {} ranks", kMaxRanks));
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
    check_size({path}, field + "size", bytes);
    const auto& type = member(row, "type", path, field);
    const auto dtype = type.is_string() ? dtype_of(type.get<std::string>()) : std::nullopt;
    if (!dtype)
      fail_at({path}, field + "type", fmt::format("unknown data type {}", json_text(type)));
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
    meas.samples_s = {sample_from_us(time_us, {path}, bfield + time_key)};
    meas.params["source_index"] = std::to_string(i);
    if (!options.transport.empty()) meas.params["transport"] = transport_name(options.transport);
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

Results import_nccl_tests(const std::string& path, const ImportOptions& options) {
  static const std::set<std::string> ops = {"allreduce", "allgather", "reducescatter",
                                            "broadcast", "reduce",    "alltoall"};
  if (!options.op.empty() && !ops.count(options.op)) {
    fail_at({}, "--op", fmt::format("unknown operation '{}' ({})", options.op, kOpChoices));
  }
  const LogText log = read_log_text(path, "the nccl-tests output");
  const auto first = log.content.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) fail_at({path}, "", "the file is empty");
  // JSON (-J) is known by parsing, not by its first character: a log may begin with "[" (a
  // UCX line's timestamp). A file that starts with "{" and does not parse is JSON cut short.
  if (log.content[first] == '{' || log.content[first] == '[') {
    const auto doc = nlohmann::json::parse(log.content, nullptr, false);
    if (!doc.is_discarded() && doc.is_object()) return import_json(path, log.content, options);
    if (log.content[first] == '{') return import_json(path, log.content, options);
  }
  TextReader reader{log, options, {}, {}, {}, {}, 0, {}, false, 0};
  reader.read();
  return std::move(reader.r);
}

}  // namespace dlsim::calibrate
