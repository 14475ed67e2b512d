#pragma once
// Importers: results sites already have, turned into dlcalibrate results (calibrate/results.hpp)
// that the fitter takes (docs/calibrate.md, "Importing").
//   - nccl-tests: the text output of any version (columns found from its header lines) and the
//     JSON written by `-J FILE`;
//   - OSU micro-benchmarks: osu_latency, osu_bw, osu_bibw, osu_allreduce, osu_allgather,
//     osu_reduce_scatter, osu_bcast, osu_reduce, osu_alltoall (the test named in the header).
// A truncated file, a file of another format or test, or a row that does not parse is an
// InputError naming the file, line and problem.

#include <string>

#include "calibrate/results.hpp"

namespace dlsim::calibrate {

Results import_nccl_tests(const std::string& path);
Results import_osu(const std::string& path);

}  // namespace dlsim::calibrate
