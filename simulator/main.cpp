// dlsim: predicts how fast data-parallel deep-learning training runs on many GPUs, and why.

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "simulator/hardware_commands.hpp"
#include "simulator/model_commands.hpp"
#include "simulator/predict_commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dlsim: a performance model and simulator of data-parallel deep-learning training"};
  app.set_version_flag("--version", std::string("dlsim ") + dlsim::kVersion);
  app.require_subcommand(1);
  dlsim::cli::add_model_commands(app);
  dlsim::cli::add_hardware_commands(app);
  dlsim::cli::add_collective_command(app);
  dlsim::cli::add_predict_commands(app);
  return dlsim::run_cli(app, argc, argv, "dlsim");
}
