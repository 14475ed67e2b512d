// The YAML model format (docs/model-format.md): load, infer shapes, and analyse at batch 2.
#include "fuzz_common.hpp"
#include "model/analysis.hpp"
#include "model/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    const auto root = dlsim::ConfigNode::load_string(dlsim::fuzz::text(data, size), "fuzz.yaml");
    const auto graph = dlsim::model::load_yaml_model(root);
    dlsim::model::analyze(graph, 2, dlsim::Precision::kFp32);
  });
}
