#pragma once
// The op kinds the replay runs, shared by its CPU and GPU steps (validate/replay_cpu.cpp,
// validate/replay_gpu.cu) and the libtorch step: calibrate/step_ops.hpp.

#include <map>
#include <string>
#include <vector>

#include "calibrate/step_ops.hpp"

namespace dlsim::validate {

using calibrate::OpKind;

// Op name (model/op.hpp's kind()) -> kind.
inline const std::map<std::string, OpKind>& replay_op_kinds() { return calibrate::step_op_kinds(); }
// The names, sorted.
inline const std::vector<std::string>& replay_cpu_ops() { return calibrate::step_ops(); }

}  // namespace dlsim::validate
