// `run gloo` where this build has no libtorch or no gloo headers (DLSIM_WITH_TORCH off, or
// Debian's libgloo-dev missing): one error line naming what to install.
#include "calibrate/gloo_run.hpp"
#include "common/error.hpp"

namespace dlsim::calibrate {

std::size_t run_gloo(const GlooRunOptions&, const std::string&, const std::string&, std::ostream*) {
  fail_at({}, "--ranks",
          "this build has no gloo: it needs libtorch's c10d and gloo's headers (install Debian's "
          "libtorch-dev and libgloo-dev and build again: DLSIM_WITH_TORCH)");
}

}  // namespace dlsim::calibrate
