#pragma once
// dlvalidate collective: a cluster's own nccl-tests or OSU collective logs against `dlsim
// collective` on a cluster profile, size by size (docs/validate.md, "Collective logs").

#include <CLI/CLI.hpp>

namespace dlsim::validate {

void add_collective_command(CLI::App& app);

}  // namespace dlsim::validate
