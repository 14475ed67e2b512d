// dlcalibrate results files (JSON Lines), with and without --resume's tolerance of a cut tail.
#include "calibrate/results.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = dlsim::fuzz::scratch_file("r.jsonl", data, size);
  dlsim::fuzz::refuse_or_parse([&] { dlsim::calibrate::read_results(path); });
  return dlsim::fuzz::refuse_or_parse([&] { dlsim::calibrate::read_results(path, true); });
}
