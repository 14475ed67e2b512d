// ONNX graphs (docs/onnx.md): import and analyse at batch 1.
#include "fuzz_common.hpp"
#include "model/analysis.hpp"
#include "model/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    const auto graph = dlsim::model::load_model(dlsim::fuzz::scratch_file("m.onnx", data, size));
    dlsim::model::analyze(graph, 1, dlsim::Precision::kFp32);
  });
}
