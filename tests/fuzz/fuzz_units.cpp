// Quantities with units ("16GiB", "25Gbit/s", "2.5us", "15.7TFLOP/s", "2GFLOP").
#include "common/units.hpp"
#include "fuzz_common.hpp"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace {

template <class Parse>
void check(const std::string& s, Parse parse, double max) {
  try {
    const double v = parse(s).value();
    // Whatever parses is a finite, non-negative value within the documented ceiling.
    if (!(v >= 0) || !(v <= max) || std::isnan(v)) std::abort();
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto s = dlsim::fuzz::text(data, size);
  check(s, dlsim::parse_bytes, dlsim::kMaxBytes.value());
  check(s, dlsim::parse_seconds, dlsim::kMaxSeconds.value());
  check(s, dlsim::parse_bandwidth, dlsim::kMaxBandwidth.value());
  check(s, dlsim::parse_flop_rate, dlsim::kMaxFlopRate.value());
  check(s, dlsim::parse_flops, dlsim::kMaxFlops.value());
  return 0;
}
