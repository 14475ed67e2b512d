#pragma once
// A model as a directed acyclic graph of layers (Boost.Graph). Edges carry activations from a
// producer to a consumer; each layer keeps its inputs in order (concat, matmul care).

#include <boost/graph/adjacency_list.hpp>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.hpp"
#include "model/op.hpp"

namespace dlsim::model {

struct Layer {
  std::string name;  // unique, dotted by block nesting: "layer1.0.conv1"
  std::shared_ptr<Op> op;
  std::vector<std::size_t> inputs;     // producing layers, in the op's input order
  SourceLocation where;                // where the layer was written
  std::optional<std::size_t> tied_to;  // layer whose first parameter tensor the weight shares

  // Filled by LayerGraph::finalize().
  TensorSpec output;
  std::vector<ParamTensor> params;
  bool requires_grad = false;  // the output depends on a learnable parameter
};

// The largest model a file may describe: layers (a block repeated past it is a typo, not a
// network; the zoo's largest has a few thousand), and elements of one tensor per sample (2^40:
// times the largest batch, 2^24, element counts stay below 2^64 and exact in the analysis).
inline constexpr std::size_t kMaxLayers = 200000;
inline constexpr double kMaxTensorElements = 1099511627776.0;  // 2^40

class LayerGraph {
 public:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  using Vertex = std::size_t;

  explicit LayerGraph(std::string name) : name_(std::move(name)) {}

  // Adds a layer; a duplicate name is an InputError at `where`.
  Vertex add_layer(std::string name, std::shared_ptr<Op> op, SourceLocation where);
  // Appends `from` to the ordered inputs of `to`.
  void connect(Vertex from, Vertex to);
  void tie_weight(Vertex layer, Vertex owner);

  // Checks the graph is acyclic, orders it, infers every shape and parameter tensor.
  // Errors name the layer and where it was written.
  void finalize();

  const std::string& name() const { return name_; }
  std::string description;
  std::string source;

  // How the framework names a parameter tensor (PyTorch's named_parameters): the first rule
  // whose pattern matches LAYER.TENSOR in full gives the name, its `$1`.. the pattern's groups;
  // LAYER.TENSOR where none does. The model file's `parameter_names` (docs/model-format.md).
  struct ParameterNameRule {
    std::string pattern;
    std::regex re;
    std::string name;
  };
  std::vector<ParameterNameRule> parameter_names;
  std::string parameter_name(const std::string& layer, const std::string& tensor) const;

  std::size_t size() const { return layers_.size(); }
  const Layer& layer(Vertex v) const { return layers_.at(v); }
  // Topological order; among ready layers, the one written first goes first.
  const std::vector<Vertex>& order() const { return order_; }
  std::optional<Vertex> find(const std::string& name) const;
  const Graph& graph() const { return graph_; }

 private:
  [[noreturn]] void fail_layer(Vertex v, std::string_view problem) const;

  std::string name_;
  Graph graph_;
  std::vector<Layer> layers_;
  std::unordered_map<std::string, Vertex> by_name_;
  std::vector<Vertex> order_;
};

}  // namespace dlsim::model
