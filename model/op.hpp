#pragma once
// One layer kind (conv2d, linear, ...): how it transforms shapes, which parameters it owns and
// what it costs. Contract: shapes are per sample (no batch dimension); every count returned by
// cost() is for ONE sample and scales linearly with the batch; weights are counted separately
// from params(). The counting conventions are written down in docs/model.md.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/registry.hpp"

namespace dlsim::model {

using Shape = std::vector<std::int64_t>;

enum class DType { kFloat, kInt64 };  // kFloat takes the run's precision

struct TensorSpec {
  Shape shape;
  DType dtype = DType::kFloat;
};

double numel(const Shape& s);
std::string to_string(const Shape& s);

// A learnable tensor of a layer.
struct ParamTensor {
  std::string name;  // "weight", "bias", ...
  Shape shape;
  bool tied = false;  // shares storage with another layer's tensor: not counted again
};

struct OpCost {
  double forward_macs = 0;   // multiply-accumulates of GEMM-like work (conv, linear, matmul)
  double forward_flops = 0;  // every FLOP of the forward pass, 2 per MAC included
  // Input-gradient FLOP for each input (counted only for inputs that need a gradient).
  std::vector<double> backward_input_flops;
  double backward_weight_flops = 0;       // parameter-gradient FLOP
  std::vector<std::size_t> saved_inputs;  // inputs kept for the backward pass
  bool saves_output = false;              // output kept for the backward pass
  double saved_extra_bytes = 0;           // masks, pooling indices (fixed-size elements)
};

// Raised by infer() for inputs the op cannot take; the graph adds the layer and location.
class ShapeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Op {
 public:
  virtual ~Op() = default;
  virtual std::string kind() const = 0;
  // Output for these inputs; throws ShapeError when they do not fit.
  virtual TensorSpec infer(std::span<const TensorSpec> inputs) const = 0;
  virtual std::vector<ParamTensor> params(std::span<const TensorSpec> inputs) const;
  virtual OpCost cost(std::span<const TensorSpec> inputs, const TensorSpec& output) const = 0;
  // A view (flatten) moves no bytes.
  virtual bool is_view() const { return false; }
  // The attributes as read, for display and export.
  virtual nlohmann::json attributes() const { return nlohmann::json::object(); }
  // Marks a linear weight as shared with another layer (set by the loader for tied_to).
  virtual void tie_weight() { throw std::logic_error(kind() + " has no weight to tie"); }
};

// Builds an op from its attributes; the caller rejects keys the op did not read.
using OpRegistry = Registry<Op, const ConfigNode&>;
const OpRegistry& op_registry();

// Registration functions, one per source file of ops.
void register_conv_ops(OpRegistry& r);
void register_dense_ops(OpRegistry& r);
void register_elementwise_ops(OpRegistry& r);

}  // namespace dlsim::model
