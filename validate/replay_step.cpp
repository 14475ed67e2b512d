#include "validate/replay_step.hpp"

#include <fmt/format.h>

#include "calibrate/torch_step.hpp"
#include "common/error.hpp"
#ifdef DLSIM_HAVE_CUDA_REPLAY
#include "validate/replay_gpu.hpp"
#endif

namespace dlsim::validate {

std::vector<std::string> replay_devices() {
#ifdef DLSIM_HAVE_CUDA_REPLAY
  return {"cpu", "gpu"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<TrainingStep> make_training_step(const std::string& device,
                                                 const model::LayerGraph& graph, std::int64_t batch,
                                                 std::uint64_t seed) {
  // On the CPU: PyTorch's own kernels through libtorch, one intra-op thread per rank.
  if (device == "cpu") return calibrate::make_torch_step(graph, batch, seed, {});
#ifdef DLSIM_HAVE_CUDA_REPLAY
  if (device == "gpu") return make_gpu_training_step(graph, batch, seed);
#else
  if (device == "gpu") {
    fail_at({}, "--device",
            "this dlvalidate is built without CUDA (configure with -DDLSIM_WITH_CUDA=ON)");
  }
#endif
  fail_at({}, "--device", fmt::format("unknown device '{}' (cpu, gpu)", device));
}

}  // namespace dlsim::validate
