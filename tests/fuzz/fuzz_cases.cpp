// dlvalidate's cases files (docs/validate.md, "Cases files").
#include "fuzz_common.hpp"
#include "validate/published.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse(
      [&] { dlsim::validate::read_cases(dlsim::fuzz::scratch_file("cases.yaml", data, size)); });
}
