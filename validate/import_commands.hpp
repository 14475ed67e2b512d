#pragma once
// dlvalidate import (logs to rows of throughput.csv's columns) and dlvalidate timeline (a Horovod
// timeline's per-phase summary); docs/validate-readers.md.

#include <CLI/CLI.hpp>

namespace dlsim::validate {

void add_import_commands(CLI::App& app);

}  // namespace dlsim::validate
