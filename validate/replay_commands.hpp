#pragma once
// `dlvalidate replay` (docs/validate.md, "Replay").

#include <CLI/CLI.hpp>

#include <string>

namespace dlsim::validate {

void add_replay_command(CLI::App& app, const std::string& command);

}  // namespace dlsim::validate
