#pragma once
// Models as data: the YAML layer-graph format (docs/model-format.md), the built-in zoo and
// the dispatch from a --model argument to the right reader.

#include <map>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/embedded.hpp"
#include "model/graph.hpp"

namespace dlsim::model {

// Model parameter overrides, "--set seq_len=512": name -> YAML scalar text.
using ParamOverrides = std::map<std::string, std::string>;

// Builds the graph a YAML model file describes and finalizes it (shapes inferred).
LayerGraph load_yaml_model(const ConfigNode& root, const ParamOverrides& overrides = {});

// A zoo name ("resnet50"), a YAML file or an ONNX file (by its .onnx suffix).
LayerGraph load_model(const std::string& name_or_path, const ParamOverrides& overrides = {});

using ZooEntry = EmbeddedFile;
// The zoo compiled into the binary, sorted by name.
const std::vector<ZooEntry>& zoo();
std::vector<std::string> zoo_names();

}  // namespace dlsim::model
