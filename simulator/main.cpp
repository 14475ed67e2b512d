// dlsim: predicts how fast data-parallel deep-learning training runs on many GPUs, and why.

#include <CLI/CLI.hpp>
#include <iostream>

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "dlsim: error: " << e.what() << " (see dlsim --help)\n";
    return 2;
  } catch (const dlsim::InputError& e) {
    std::cerr << "dlsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "dlsim: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
