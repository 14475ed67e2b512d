#pragma once
// `dlsim model ...`: list the zoo and show a model's layers, sizes and work.

#include <CLI/CLI.hpp>

namespace dlsim::cli {

void add_model_commands(CLI::App& app);

}  // namespace dlsim::cli
