#pragma once
// Writing results: whole files appear at once (temporary file + rename) or not at all.

#include <string>

namespace dlsim {

// Writes `content` to `path` atomically; "-" or "" writes to standard output.
// A failure is an InputError naming the path.
void write_output(const std::string& path, const std::string& content);

}  // namespace dlsim
