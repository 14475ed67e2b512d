#pragma once
// MPI benchmarks of dlcalibrate (`dlcalibrate run mpi`, built with -DDLSIM_WITH_MPI=ON), in the
// manner of the OSU micro-benchmarks and nccl-tests' MPI mode: point-to-point latency (ping-pong,
// half the round trip) and bandwidth (a window of non-blocking sends, acknowledged) between
// pairs of nodes, and allreduce / allgather / reducescatter / broadcast sweeps over all ranks.
// Every rank times every call; a sample is the slowest rank's mean over the inner loop (as
// nccl-tests reduces its per-rank times with MPI_MAX). Rank 0 writes the results file.

#include <CLI/CLI.hpp>
#include <string>

namespace dlsim::calibrate {

// Adds `mpi` under the `run` subcommand.
void add_run_mpi(CLI::App& run, const std::string& command_line);

}  // namespace dlsim::calibrate
