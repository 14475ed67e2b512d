// dlcalibrate: measures a cluster (kernels, memory, links, collectives) and fits the hardware
// profile dlsim reads. The measurement commands arrive with the calibration subsystem; this
// program currently states its interface.

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "dlcalibrate: measure a GPU cluster and write the hardware profile dlsim reads.\n"
      "No measurement commands are available in this version of dlsim."};
  app.set_version_flag("--version", std::string("dlcalibrate ") + dlsim::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::cout << app.help();
  return 0;
}
