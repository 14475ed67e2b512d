#pragma once
// dlcalibrate's Slurm subcommands (calibrate/slurm.hpp, docs/slurm-local.md):
//   slurm    write the sbatch script that calibrates every node, and submit it (and wait)
//   collect  merge one job's results files into one results file

#include <CLI/CLI.hpp>

#include <string>

namespace dlsim::calibrate {

// Adds `slurm` and `collect` to `app`; `command_line` is recorded in what they write.
void add_slurm_commands(CLI::App& app, const std::string& command_line);

}  // namespace dlsim::calibrate
