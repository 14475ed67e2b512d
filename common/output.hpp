#pragma once
// Writing results: the one way every output of dlsim, dlcalibrate and dlvalidate reaches a file
// (results, traces, plots, reports, profiles, sbatch scripts). What happens depends on what the
// path names (docs/cli.md, "Output files"):
//   - "-" or "": standard output;
//   - a regular file, or nothing yet: the whole content appears at once or not at all (a
//     temporary file in the same folder, written, flushed to disk with fsync, given the mode of
//     the file it replaces, then renamed over it);
//   - a character device or a FIFO (/dev/null, /dev/stdout, a named pipe): written through,
//     never replaced;
//   - a symbolic link: followed to its target, which is then treated as above.
// A directory, a block device or a socket is refused. A failure (a full device, a missing folder,
// no permission) is an InputError naming the path, and no partial file is left behind.

#include <string>
#include <utility>
#include <vector>

namespace dlsim {

// `inputs` are the files the command read: an output that is one of them (the same file by any
// path or link) is refused before anything is written, as writing it would replace what was read.
void write_output(const std::string& path, const std::string& content,
                  const std::vector<std::string>& inputs = {});

// Several outputs of one command, (path, content) each: every file is written beside its target
// before any is put in place, so a failure on one (a missing folder) leaves none of them behind.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& files,
                   const std::vector<std::string>& inputs = {});

// The references among `refs` that name files as dlsim's loaders read them (a path with '/', or a
// .yaml, .yml or .onnx name); a preset or zoo name is not a file even where one of that name
// happens to exist in the current folder.
std::vector<std::string> file_references(const std::vector<std::string>& refs);

// An InputError naming `field` when two of `inputs` are one file (by any path or link): `why`
// says what reading it twice would do.
void refuse_repeated_inputs(const std::vector<std::string>& inputs, const std::string& field,
                            const std::string& why);

// The check write_outputs makes against `inputs`, for a command that writes in steps.
void refuse_output_over_input(const std::string& output, const std::vector<std::string>& inputs);

// A file that grows by whole records (JSON Lines written while measuring): each append() is one
// write(2) of the complete record on a descriptor opened with O_APPEND, then fdatasync(2), so a
// process killed at any instant leaves only complete records behind, and they survive a crash
// of the machine. The file must exist (create it with write_output, header included).
class AppendFile {
 public:
  explicit AppendFile(const std::string& path);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(const std::string& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace dlsim
