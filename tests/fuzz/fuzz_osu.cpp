// OSU micro-benchmarks output (dlcalibrate import osu).
#include "calibrate/import.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    const auto r = dlsim::calibrate::import_osu(dlsim::fuzz::scratch_file("osu.txt", data, size));
    dlsim::calibrate::to_jsonl(r);
  });
}
