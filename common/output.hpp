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

namespace dlsim {

void write_output(const std::string& path, const std::string& content);

}  // namespace dlsim
