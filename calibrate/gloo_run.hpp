#pragma once
// `dlcalibrate run gloo`: PyTorch's gloo all-reduce (c10d::ProcessGroupGloo, the backend of
// DistributedDataParallel on CPUs) between local processes over loopback TCP, or between the
// ranks of a job on several nodes (--store), timed per size, with the CPU time each call costs
// its process (docs/calibrate.md, "gloo").

#include <cstdint>
#include <iosfwd>
#include <string>

namespace dlsim::calibrate {

struct GlooRunOptions {
  int ranks = 2;    // local processes
  double from = 4;  // B, float32 all-reduce sizes: from, from x factor, ... up to `to`
  double to = 64.0 * 1024 * 1024;
  double factor = 4;
  int iters = 5;             // timed samples per size
  int warmup = 2;            // untimed calls first
  double min_time_s = 2e-3;  // a sample's inner loop runs at least this long
  // Also each call's time beside a busy compute thread in each rank (params
  // .s_per_call_beside_compute): how long the exchange waits for the cores compute holds.
  bool beside_compute = false;
  // One rank of a job that a launcher (srun, mpirun) started on several nodes: the rank and
  // the number of ranks come from SLURM_PROCID and SLURM_NTASKS (or RANK and WORLD_SIZE), the
  // ranks meet through a c10d FileStore at this path on a file system every node sees, and
  // gloo binds the interface GLOO_SOCKET_IFNAME names (else the host name's address). Rank 0
  // writes the results. Empty: `ranks` processes forked on this host, over loopback.
  std::string store;
};

// Measures and writes the results file `path` (which must not exist); returns the records
// written. InputErrors name the flag (--ranks, --iters, ...) before anything runs; without
// libtorch, an InputError naming what to install.
std::size_t run_gloo(const GlooRunOptions& options, const std::string& path,
                     const std::string& command_line, std::ostream* log);

}  // namespace dlsim::calibrate
