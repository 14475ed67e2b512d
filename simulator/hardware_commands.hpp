#pragma once
// `dlsim hardware ...` (list and show profiles) and `dlsim collective` (one collective, costed
// on a cluster, printed like nccl-tests).

#include <CLI/CLI.hpp>

namespace dlsim::cli {

void add_hardware_commands(CLI::App& app);
void add_collective_command(CLI::App& app);

}  // namespace dlsim::cli
