// dlvalidate: compares dlsim predictions with real training-step runs and published
// measurements. The comparison commands arrive with the validation subsystem; this
// program currently states its interface.

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "dlvalidate: compare dlsim predictions with measured training throughput.\n"
      "No validation commands are available in this version of dlsim."};
  app.set_version_flag("--version", std::string("dlvalidate ") + dlsim::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::cout << app.help();
  return 0;
}
