// Measurement tables (throughput.csv and its kin) as dlvalidate published reads them.
#include "fuzz_common.hpp"
#include "validate/published.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse(
      [&] { dlsim::validate::read_table(dlsim::fuzz::scratch_file("table.csv", data, size)); });
}
