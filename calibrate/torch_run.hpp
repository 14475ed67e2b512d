#pragma once
// `dlcalibrate run torch`: a model's training step through libtorch (calibrate/torch_step.hpp),
// timed layer by layer at each batch size; one layer_forward and one layer_backward record per
// distinct layer (by model::layer_signature) and one optimizer_update record per batch size
// (docs/calibrate.md, "Layer tables").

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace dlsim::calibrate {

struct TorchRunOptions {
  std::string model = "resnet18";  // zoo name or model file
  std::vector<std::int64_t> batches = {8};
  int threads = 1;                 // intra-op threads
  std::string device = "cpu";      // cpu or cuda
  std::string precision = "fp32";  // fp32, or amp (autocast float16; cuda only)
  int iters = 10;                  // timed steps per batch size
  int warmup = 3;                  // untimed steps first
  std::uint64_t seed = 1;
};

// Measures and writes the results file `path` (which must not exist); returns the records
// written. InputErrors name the flag (--threads, --iters, ...) before anything is written.
std::size_t run_torch(const TorchRunOptions& options, const std::string& path,
                      const std::string& command_line, std::ostream* log);

}  // namespace dlsim::calibrate
