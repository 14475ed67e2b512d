// The libtorch step where this build has no libtorch (DLSIM_WITH_TORCH off).
#include "calibrate/torch_step.hpp"

#include <stdexcept>

namespace dlsim::calibrate {

bool have_torch() { return false; }

std::string torch_version() { return ""; }

const std::vector<std::string>& torch_ops() {
  static const std::vector<std::string> none;
  return none;
}

bool torch_has_cuda() { return false; }

std::unique_ptr<TrainingStep> make_torch_step(const model::LayerGraph&, std::int64_t, std::uint64_t,
                                              const TorchStepOptions& options) {
  check_torch_step(options);  // fails here: this build has no libtorch
  throw std::logic_error("check_torch_step passed in a build without libtorch");
}

}  // namespace dlsim::calibrate
