#pragma once
// What every fuzz target shares (libFuzzer, docs/reliability.md). A parser under fuzzing may
// refuse its input only with dlsim::InputError, the error users see as one line and exit code 2;
// any other exception escapes LLVMFuzzerTestOneInput and libFuzzer reports it as a crash, as it
// does every sanitizer finding. Inputs that parsers read from files are written to a file of
// this process's own scratch folder first.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.hpp"

namespace dlsim::fuzz {

// `name` (e.g. "f.yaml") in a folder of this process, holding `data`; its path.
inline std::string scratch_file(const std::string& name, const std::uint8_t* data,
                                std::size_t size) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("dlsim-fuzz-scratch-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                      ("dlsim-fuzz-scratch-" + std::to_string(::getpid())),
                                  ec);
    });
    return d;
  }();
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path.string();
}

inline std::string text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `parse`; an InputError is an accepted refusal.
template <class F>
int refuse_or_parse(F parse) {
  try {
    parse();
  } catch (const dlsim::InputError&) {
  }
  return 0;
}

}  // namespace dlsim::fuzz
