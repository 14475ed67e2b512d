#pragma once
// Importers: results sites already have, turned into dlcalibrate results (calibrate/results.hpp)
// that the fitter takes (docs/calibrate.md, "Importing").
//   - nccl-tests: the text output of any version (columns found from its header lines) and the
//     JSON written by `-J FILE`;
//   - OSU micro-benchmarks: osu_latency, osu_bw, osu_bibw, osu_allreduce, osu_allgather,
//     osu_reduce_scatter, osu_bcast, osu_reduce, osu_alltoall (the test named in the header).
// A truncated file, a file of another format or test, or a row that does not parse is an
// InputError naming the file, line and problem.

#include <optional>
#include <string>

#include "calibrate/results.hpp"

namespace dlsim::calibrate {

// What a log may leave unsaid, given by the user (--op, --ranks, --nodes). A value the log states
// otherwise is an InputError naming the flag.
struct ImportOptions {
  std::string op;  // allreduce, allgather, reducescatter, broadcast, reduce, alltoall
  std::optional<int> ranks, nodes;
  // nccl-tests: how NCCL connected the GPUs (SHM, P2P, NET), where the log has no NCCL_DEBUG=INFO
  // channel lines to say; empty: unknown.
  std::string transport;
};

Results import_nccl_tests(const std::string& path, const ImportOptions& options = {});
Results import_osu(const std::string& path, const ImportOptions& options = {});

// An NCCL topology dump (the XML NCCL writes to NCCL_TOPO_DUMP_FILE) -> the YAML text of a dlsim
// node profile (`kind: node`) with the dump's fabric graph; the mapping is described in
// calibrate/import_nccl_topo.cpp. A malformed file, a dump without <system> or without GPUs, or an
// NVLink to a target the dump does not hold is an InputError naming the file and problem.
struct NcclTopoOptions {
  std::string output;                     // NODE.yaml: its stem is the profile's name; relative
                                          // paths below are rewritten from its folder
  std::string gpu;                        // GPU preset or file; empty: inferred from `sm`
  std::string base_node = "iris-v100x4";  // node preset or file extended for what the dump lacks
};
std::string import_nccl_topo(const std::string& path, const NcclTopoOptions& options);

}  // namespace dlsim::calibrate
