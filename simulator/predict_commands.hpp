#pragma once
// `dlsim predict`, `dlsim scale` and `dlsim compare`: one training step on N GPUs, a sweep over
// GPU counts with a plot, and strategies side by side (docs/cli.md).

#include <CLI/CLI.hpp>

namespace dlsim::cli {

void add_predict_commands(CLI::App& app);

}  // namespace dlsim::cli
