#pragma once
// ONNX import: an ONNX model file (a ModelProto) read into the same LayerGraph the YAML loader
// builds. Every layer is made through op_registry() from synthesized YAML attributes, so ONNX
// and YAML models share one construction path and one set of checks; shapes are inferred by
// dlsim's ops (value_info in the file is not read). Only weight dimensions are used, never
// their values. What maps to what is listed in onnx_import.cpp.

#include <string>

#include "model/graph.hpp"

namespace dlsim::model {

// Reads the ONNX file at `path` and returns the finalized graph. A file that is not an ONNX
// model, an operator with no dlsim counterpart or attributes dlsim cannot represent are
// InputErrors naming the file and the node: "m.onnx: node 'n7' (op LSTM): ...".
LayerGraph import_onnx(const std::string& path);

}  // namespace dlsim::model
