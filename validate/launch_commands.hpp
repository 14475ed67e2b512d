#pragma once
// dlvalidate launch: write, submit and collect real training runs on Slurm (docs/launch.md).

#include <CLI/CLI.hpp>

#include <string>

namespace dlsim::validate {

void add_launch_command(CLI::App& app, const std::string& command_line);

}  // namespace dlsim::validate
