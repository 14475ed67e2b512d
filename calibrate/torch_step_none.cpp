// The libtorch step where this build has no libtorch (DLSIM_WITH_TORCH off).
#include "calibrate/torch_step.hpp"
#include "common/error.hpp"

namespace dlsim::calibrate {

bool have_torch() { return false; }

std::string torch_version() { return ""; }

const std::vector<std::string>& torch_ops() {
  static const std::vector<std::string> none;
  return none;
}

bool torch_has_cuda() { return false; }

std::unique_ptr<TrainingStep> make_torch_step(const model::LayerGraph&, std::int64_t, std::uint64_t,
                                              const TorchStepOptions&) {
  fail_at({}, "--device",
          "this build has no libtorch (install Debian's libtorch-dev and build again: "
          "DLSIM_WITH_TORCH)");
}

}  // namespace dlsim::calibrate
