#pragma once
// Benchmark logs as jobs write them (docs/calibrate.md, "Importing"): the benchmark's own lines
// mixed with what launchers and libraries print. This reads a log into lines with the launchers'
// per-line tags taken off, so the readers see the benchmark's text as the benchmark printed it:
//   - mpirun --tag-output "[1,0]<stdout>:" and "[1,0]<stderr>:" (Open MPI),
//   - srun --label "0: " and "12: ",
//   - the indentation of a log pasted into a document,
//   - Windows line ends, a UTF-8 byte order mark.
// Everything else (MPI, UCX, NCCL INFO/WARN lines, Slurm prologues, shell prompts) stays, for the
// readers to skip or to mine for provenance.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace dlsim::calibrate {

struct LogLine {
  int number = 0;            // 1-based line in the file
  std::string text;          // without launcher tags, surrounding blanks and '\r'
  std::string raw;           // as in the file, less '\r'
  bool from_stderr = false;  // tagged as the standard error of a rank
};

struct LogText {
  std::string path;
  std::string content;  // the whole file
  std::vector<LogLine> lines;
  bool ends_with_newline = true;
};

// Reads `path`; a missing file is an InputError naming it and `what` ("the nccl-tests output").
LogText read_log_text(const std::string& path, const std::string& what);

// The longest line a log reader takes (characters). The readers' patterns backtrack per
// character: a line no benchmark or framework prints (a dump of binary data) would exhaust the
// stack (a segfault at about 30,000 characters).
inline constexpr std::size_t kMaxLogLine = 8192;
// An InputError at `where` when a line of `length` characters is longer than kMaxLogLine;
// `what` prints such lines ("the nccl-tests output").
void refuse_long_line(const SourceLocation& where, std::size_t length, std::string_view what);

// `line` without a launcher's tag and surrounding blanks.
std::string strip_launcher_tags(std::string_view line, bool* from_stderr = nullptr);

// A count printed in a log ("1024" of "-np 1024"); a number beyond int is an InputError at `where`
// naming `field`, not an exception from std::stoi.
int log_count(const std::string& digits, const SourceLocation& where, std::string_view field);

// Whitespace-separated tokens.
std::vector<std::string> split_tokens(std::string_view text);

// A line a library or the system printed, never the benchmark itself: NCCL "INFO"/"WARN"
// (host:pid:tid [dev] NCCL INFO ...), UCX ("[1622510346.876958] [g0185:144167:0] ... UCX WARN"),
// Open MPI / PMIx / hwloc warnings, ssh's "Warning: Permanently added".
bool is_library_noise(std::string_view text);

}  // namespace dlsim::calibrate
