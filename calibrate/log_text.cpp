#include "calibrate/log_text.hpp"

#include <fmt/format.h>
#include <charconv>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/error.hpp"

namespace dlsim::calibrate {

std::string strip_launcher_tags(std::string_view line, bool* from_stderr) {
  // Open MPI's --tag-output: "[jobid,rank]<stdout>:" (also nested under srun labels).
  static const std::regex ompi_tag(R"(^\s*\[\d+,\d+\]<(stdout|stderr)>:)");
  // srun --label: "rank: " before every line.
  static const std::regex srun_label(R"(^\s*\d+: )");
  std::string s(line);
  if (!s.empty() && s.back() == '\r') s.pop_back();
  for (int pass = 0; pass < 4; ++pass) {
    std::smatch m;
    if (std::regex_search(s, m, ompi_tag)) {
      if (from_stderr && m[1].str() == "stderr") *from_stderr = true;
      s = m.suffix().str();
    } else if (std::regex_search(s, m, srun_label)) {
      s = m.suffix().str();
    } else {
      break;
    }
  }
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

int log_count(const std::string& digits, const SourceLocation& where, std::string_view field) {
  int v = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v < 0) {
    fail_at(where, field, "'" + digits + "' is not a count that fits (0 .. 2^31-1)");
  }
  return v;
}

std::vector<std::string> split_tokens(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool is_library_noise(std::string_view text) {
  static const std::regex noise(
      R"(\bNCCL (INFO|WARN|TRACE)\b|\bUCX\s+(WARN|ERROR|INFO|DIAG)\b|^\[\d+\.\d+\]\s*\[[^\]]+\]|)"
      R"(^Warning: Permanently added|^\[[\w.-]+:\d+\]\s|^--------------------------------|)"
      R"(^(WARNING|Warning): .*(Open MPI|OpenFabrics|PMIx|hwloc|btl|mca))");
  const std::string s(text);
  return std::regex_search(s, noise);
}

void refuse_long_line(const SourceLocation& where, std::size_t length, std::string_view what) {
  if (length <= kMaxLogLine) return;
  fail_at(where, "",
          fmt::format("a line of {} characters, longer than any line {} prints ({} at most)",
                      length, what, kMaxLogLine));
}

LogText read_log_text(const std::string& path, const std::string& what) {
  refuse_non_file(path, "");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_at({path}, "", "cannot open " + what);
  std::ostringstream buf;
  buf << in.rdbuf();
  LogText t;
  t.path = path;
  t.content = buf.str();
  if (t.content.rfind("\xEF\xBB\xBF", 0) == 0) t.content.erase(0, 3);  // UTF-8 byte order mark
  t.ends_with_newline = !t.content.empty() && t.content.back() == '\n';
  std::istringstream ls(t.content);
  int number = 0;
  for (std::string l; std::getline(ls, l);) {
    LogLine line;
    line.number = ++number;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    refuse_long_line({path, number}, l.size(), what);
    line.raw = l;
    line.text = strip_launcher_tags(l, &line.from_stderr);
    t.lines.push_back(std::move(line));
  }
  return t;
}

}  // namespace dlsim::calibrate
