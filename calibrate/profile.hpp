#pragma once
// From results to a hardware profile dlsim reads (docs/calibrate.md, "The profile"): a cluster
// file that extends a base cluster and overrides what was measured, with the provenance of every
// figure. What is mapped:
//   - compute (gemm, conv_fwd) and memory (copy, triad) rates of a device -> the node's `gpu`:
//     for a CPU device (backend cpu) a complete device profile whose peak is the fitted
//     asymptote; for a GPU (backend cuda) the base GPU's datasheet peak and bandwidth with
//     fitted efficiency curves;
//   - the host's STREAM-style bandwidth (backend cpu) -> the node's host.memory_bandwidth;
//   - point-to-point latency and bandwidth between two nodes -> the network's transport
//     efficiency and per-message overhead (the port's line rate and latency stay the base's);
//   - the hosts the results came from -> the cluster's nodes and hostnames.
// Collective sweeps are fitted and reported but change no field: dlsim derives collectives from
// the links and the library constants.

#include <string>
#include <vector>

#include "calibrate/fit.hpp"
#include "calibrate/results.hpp"

namespace dlsim::calibrate {

struct ProfileOptions {
  std::string base = "default";  // cluster preset or file the profile extends
  std::string name;              // the profile's name (must equal the output file's stem)
  double min_bytes = 64 * 1024;  // B: smaller transfers are left out of bandwidth fits
  std::vector<std::string> results_files;
  std::string command;  // the dlcalibrate command line, for provenance
  Statistic statistic = Statistic::kMedian;
};

struct FittedProfile {
  std::string yaml;  // the cluster profile
  // The layer table the profile's `layers.file` names (JSON, kind dlsim-layer-table), to be
  // written beside it as `layers_file`; empty without layer tables.
  std::string layers_json, layers_file;
  std::vector<std::string> report;  // what was fitted to what, with quality, one line each
  std::vector<std::string> warnings;
};

FittedProfile fit_profile(const std::vector<Results>& results, const ProfileOptions& options);

}  // namespace dlsim::calibrate
