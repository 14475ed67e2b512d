// The public log corpus (tests/fixtures/logs, each file's source in SOURCES.csv): every log
// imports as the job wrote it, with the run's operation, ranks, nodes and rows, the first and
// last row's size, time and busbw as the log prints them (expected.csv, taken from the logs by
// hand and script, not from the importer), every record traceable to its own line, and the
// hosts, GPUs and NCCL version the log names in the provenance. The two logs that cannot import
// (a run that failed, an OSU collective whose rank count nothing gives) fail with one line.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/import.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

namespace cal = dlsim::calibrate;

namespace {

const std::string kDir = DLSIM_LOG_CORPUS;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char c : s) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == sep && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const auto header = split(line, ',');
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto cells = split(line, ',');
    REQUIRE(cells.size() == header.size());
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

cal::ImportOptions options_of(const std::string& args) {
  cal::ImportOptions o;
  const auto w = words(args);
  for (std::size_t i = 0; i + 1 < w.size(); i += 2) {
    if (w[i] == "--ranks") o.ranks = std::stoi(w[i + 1]);
    if (w[i] == "--nodes") o.nodes = std::stoi(w[i + 1]);
    if (w[i] == "--op") o.op = w[i + 1];
  }
  return o;
}

cal::Results import(const std::map<std::string, std::string>& e) {
  const auto path = kDir + "/" + e.at("file");
  const auto o = options_of(e.at("args"));
  return e.at("importer") == "osu" ? cal::import_osu(path, o) : cal::import_nccl_tests(path, o);
}

// The records of one run: consecutive records of the same operation and ranks on nearby lines.
std::vector<std::vector<const cal::Measurement*>> runs_of(const cal::Results& r) {
  std::vector<std::vector<const cal::Measurement*>> runs;
  int last_line = 0;
  for (const auto& m : r.measurements) {
    const int line = std::stoi(m.params.at("source_line"));
    if (runs.empty() || runs.back().back()->op != m.op || runs.back().back()->ranks != m.ranks ||
        line - last_line > 3) {
      runs.emplace_back();
    }
    runs.back().push_back(&m);
    last_line = line;
  }
  return runs;
}

double number(const std::string& s) { return dlsim::parse_number(s).value(); }

// The value a row of the expectations names: out-of-place time (nccl-tests), latency or
// non-blocking communication time (OSU latency tests, us), or MB/s (OSU bandwidth tests).
void check_value(const cal::Measurement& m, const std::string& want) {
  if (m.params.count("bandwidth_MBps")) {
    CHECK(m.params.at("bandwidth_MBps") == want);
  } else if (m.params.count("pure_comm_us")) {
    CHECK(m.params.at("pure_comm_us") == want);
  } else {
    CHECK(m.samples_s.at(0) * 1e6 == dlsim_test::approx(number(want)).epsilon(1e-12));
  }
}

void check_size(const cal::Measurement& m, const std::string& want) {
  if (m.params.count("osu_size_bytes")) {
    CHECK(m.params.at("osu_size_bytes") == want);  // OSU's per-rank size; bytes = size x ranks
  } else if (m.params.count("pairs")) {
    CHECK(m.bytes == number(want) * std::stoi(m.params.at("pairs")));
  } else {
    CHECK(m.bytes == number(want));
  }
}

// The log's own line of a record holds the record's size and time as printed tokens.
void check_traceable(const std::string& file, const cal::Measurement& m,
                     const std::vector<std::string>& lines) {
  const auto line = static_cast<std::size_t>(std::stoi(m.params.at("source_line")));
  REQUIRE(line >= 1);
  REQUIRE(line <= lines.size());
  const auto tokens = words(lines[line - 1]);
  const double size = m.params.count("osu_size_bytes") ? number(m.params.at("osu_size_bytes"))
                      : m.params.count("pairs")        ? m.bytes / std::stoi(m.params.at("pairs"))
                                                       : m.bytes;
  bool has_size = false, has_time = false;
  for (const auto& t : tokens) {
    const auto v = dlsim::parse_number(t);
    if (!v) continue;
    has_size = has_size || *v == size;
    // A time printed in us; a bandwidth test's time is size / MB/s, so its MB/s token instead.
    has_time = has_time || std::abs(*v * 1e-6 - m.samples_s.at(0)) <= 1e-15 ||
               (m.params.count("bandwidth_MBps") && t == m.params.at("bandwidth_MBps"));
  }
  CAPTURE(file);
  CAPTURE(line);
  CHECK(has_size);
  CHECK(has_time);
}

std::vector<std::string> file_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("every_log_of_the_public_corpus_imports_with_the_logs_own_numbers") {
  const auto expected = read_csv(kDir + "/expected.csv");
  const auto sources = read_csv(kDir + "/SOURCES.csv");
  std::map<std::string, int> files_by_kind;
  std::set<std::string> repositories;
  for (const auto& s : sources) {
    ++files_by_kind[s.at("kind")];
    repositories.insert(s.at("repository"));
  }
  // The corpus the importers are held to: 20 nccl-tests and 10 OSU logs from 5 sites at least.
  CHECK(files_by_kind["nccl-tests"] >= 20);
  CHECK(files_by_kind["osu"] >= 10);
  CHECK(repositories.size() >= 5);

  std::map<std::string, cal::Results> imported;
  int imports = 0, refusals = 0;
  for (const auto& e : expected) {
    const std::string key = e.at("file") + " " + e.at("args");
    CAPTURE(key);
    CAPTURE(e.at("run"));
    if (!e.at("error").empty()) {
      CHECK_THROWS_WITH_AS(import(e), doctest::Contains(e.at("error").c_str()), dlsim::InputError);
      ++refusals;
      continue;
    }
    if (!imported.count(key)) {
      imported.emplace(key, import(e));
      ++imports;
      const auto lines = file_lines(kDir + "/" + e.at("file"));
      for (const auto& m : imported.at(key).measurements) check_traceable(key, m, lines);
    }
    const auto& r = imported.at(key);
    const auto runs = runs_of(r);
    const auto run = static_cast<std::size_t>(std::stoi(e.at("run")));
    REQUIRE(run <= runs.size());
    const auto& rows = runs[run - 1];
    CHECK(rows.front()->op == e.at("op"));
    CHECK(rows.size() == static_cast<std::size_t>(std::stoi(e.at("rows"))));
    CHECK(rows.front()->ranks == std::stoi(e.at("ranks")));
    CHECK(rows.front()->nodes == std::stoi(e.at("nodes")));
    check_size(*rows.front(), e.at("first_size"));
    check_size(*rows.back(), e.at("last_size"));
    check_value(*rows.front(), e.at("first_value"));
    check_value(*rows.back(), e.at("last_value"));
    if (!e.at("first_busbw").empty()) {
      CHECK(rows.front()->params.at("busbw_GBps") == e.at("first_busbw"));
      CHECK(rows.back()->params.at("busbw_GBps") == e.at("last_busbw"));
    }
    CHECK(r.provenance.hosts.size() == static_cast<std::size_t>(std::stoi(e.at("hosts"))));
    CHECK(r.provenance.devices.count("gpu") ? r.provenance.devices.at("gpu") == e.at("gpu")
                                            : e.at("gpu").empty());
    CHECK(r.provenance.versions.count("nccl") ? r.provenance.versions.at("nccl") == e.at("nccl")
                                              : e.at("nccl").empty());
  }
  MESSAGE(imports << " logs imported, " << refusals << " refused as expected");
  CHECK(imports >= 30);
}
