#pragma once
// NCCL benchmarks of dlcalibrate (`dlcalibrate run nccl`, backend "nccl", built with
// -DDLSIM_WITH_CUDA=ON and -DDLSIM_WITH_MPI=ON), in the manner of nccl-tests (NVIDIA,
// github.com/NVIDIA/nccl-tests): run under mpirun or srun with one rank per GPU, allreduce /
// allgather / reducescatter / broadcast sweeps over all ranks, out of place, float32, with
// nccl-tests' size definitions. Every rank times its calls with CUDA events; a sample is the
// slowest rank's mean over the inner loop (MPI_Allreduce with MPI_MAX). Rank 0 writes the results
// file. Conventions and sources are at the top of bench_nccl.cu.
//
// This header names no CUDA, NCCL or MPI type: run_commands.cpp includes it.

#include <CLI/CLI.hpp>
#include <string>

namespace dlsim::calibrate {

// Adds `nccl` under the `run` subcommand.
void add_run_nccl(CLI::App& run, const std::string& command_line);

}  // namespace dlsim::calibrate
