#include "common/output.hpp"

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "common/error.hpp"

namespace dlsim {

void write_output(const std::string& path, const std::string& content) {
  if (path.empty() || path == "-") {
    std::cout << content << std::flush;
    return;
  }
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::string tmp_name = target.filename().string();
  tmp_name.insert(0, 1, '.');
  tmp_name.append(".tmp").append(std::to_string(::getpid()));
  const fs::path tmp = target.parent_path() / tmp_name;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail_at({path}, "", "cannot write the output file");
    out << content;
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      fail_at({path}, "", "writing the output file failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail_at({path}, "", "cannot move the output into place: " + ec.message());
  }
}

}  // namespace dlsim
