#pragma once
// Sizes and work of a model for one training step at a given per-GPU batch and precision:
// per layer and in total. Conventions and sources: docs/model.md.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/precision.hpp"
#include "common/units.hpp"
#include "model/graph.hpp"

namespace dlsim::model {

// The largest per-GPU batch analysed: element counts (batch x a tensor's elements) then stay
// exact in doubles for every zoo model.
inline constexpr std::int64_t kMaxBatch = std::int64_t{1} << 24;

struct LayerStats {
  LayerGraph::Vertex vertex;
  std::string name;
  std::string op;
  // What the layer computes, per sample, independent of its name and batch: the op, its
  // attributes, every input's shape and whether it needs a gradient, the output's shape
  // (layer_signature). Measured kernel tables are keyed by it (hardware::KernelEntry). Empty
  // until add_signatures() fills it (a JSON dump per layer: only where a table is read).
  std::string signature;
  Shape output_shape;       // with the batch dimension first
  std::int64_t params = 0;  // learnable elements owned by this layer (tied ones excluded)
  double forward_macs = 0;
  Flops forward_flops;
  Flops backward_input_flops;   // gradients of inputs that need one
  Flops backward_weight_flops;  // gradients of parameters
  Flops backward_flops() const { return backward_input_flops + backward_weight_flops; }
  Bytes weight_bytes;
  Bytes forward_read_bytes;    // weights + inputs
  Bytes forward_write_bytes;   // output
  Bytes backward_read_bytes;   // output gradient + saved tensors + weights
  Bytes backward_write_bytes;  // input gradients + weight gradients
  Bytes activation_bytes;      // kept for backward and attributed to this layer (see docs)
};

// One parameter tensor's gradient, in the order backward produces them.
struct GradientTensor {
  LayerGraph::Vertex vertex;
  std::string layer;
  std::string tensor;
  std::int64_t elements = 0;
  Bytes bytes;
  std::string parameter;  // the framework's name for it (LayerGraph::parameter_name)
};

struct ModelStats {
  std::string name;
  std::int64_t batch = 1;
  Precision precision = Precision::kFp32;
  std::vector<LayerStats> layers;         // topological order
  std::vector<GradientTensor> gradients;  // backward order
  std::int64_t params = 0;
  double forward_macs = 0;
  Flops forward_flops;
  Flops backward_input_flops;
  Flops backward_weight_flops;
  Flops backward_flops() const { return backward_input_flops + backward_weight_flops; }
  Bytes weight_bytes;
  Bytes activation_bytes;
};

// `batch` must be positive (an InputError otherwise).
ModelStats analyze(const LayerGraph& graph, std::int64_t batch, Precision precision);

// LayerStats::signature of layer `v`, e.g.
// "conv2d {\"bias\":false,...} in=[64,56,56]g out=[64,56,56]" (g: the input needs a gradient).
std::string layer_signature(const LayerGraph& graph, LayerGraph::Vertex v);
// Index into stats.gradients of each (layer vertex, parameter tensor name) with a gradient.
std::map<std::pair<LayerGraph::Vertex, std::string>, int> gradient_index(const ModelStats& stats);

// Fills every LayerStats::signature of `stats`, which analyze() made from `graph`.
void add_signatures(ModelStats& stats, const LayerGraph& graph);

// The JSON of `dlsim model show` (schema in docs/model.md).
nlohmann::json to_json(const ModelStats& stats, const LayerGraph& graph);

}  // namespace dlsim::model
