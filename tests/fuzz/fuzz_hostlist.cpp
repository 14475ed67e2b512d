// Slurm host lists ("node[001-064,100]", "a[1-2]b[3-4]").
#include "common/hostlist.hpp"
#include "fuzz_common.hpp"

#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    dlsim::expand_hostlist(dlsim::fuzz::text(data, size));
  } catch (const std::invalid_argument&) {
    // The host list's own refusal: callers turn it into an InputError naming their field.
  }
  return 0;
}
