#pragma once
// `dlcalibrate run ...`: the measuring subcommands (docs/calibrate.md). main.cpp adds them with
// add_run_commands(); each builds its benchmarks (bench_*.hpp) and hands them to the driver
// (driver.hpp), which streams the results file.

#include <CLI/CLI.hpp>
#include <string>

namespace dlsim::calibrate {

// Adds `run` and its subcommands (`run cpu`) to `app`; `command_line` is recorded in the results'
// provenance. Errors are InputErrors, which main turns into one line and exit code 2.
void add_run_commands(CLI::App& app, const std::string& command_line);

}  // namespace dlsim::calibrate
