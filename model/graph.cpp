#include "model/graph.hpp"

#include <fmt/format.h>
#include <boost/graph/depth_first_search.hpp>
#include <functional>
#include <queue>

namespace dlsim::model {

LayerGraph::Vertex LayerGraph::add_layer(std::string name, std::shared_ptr<Op> op,
                                         SourceLocation where) {
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    fail_at(where, fmt::format("layer '{}'", name),
            fmt::format("the name is already used at {}", layers_[it->second].where.str()));
  }
  if (layers_.size() >= kMaxLayers) {
    fail_at(
        where, fmt::format("layer '{}'", name),
        fmt::format("the model has more than {} layers (a repeat count too large?)", kMaxLayers));
  }
  const Vertex v = boost::add_vertex(graph_);
  by_name_.emplace(name, v);
  layers_.push_back(Layer{std::move(name), std::move(op), {}, std::move(where), {}, {}, {}, false});
  return v;
}

void LayerGraph::connect(Vertex from, Vertex to) {
  boost::add_edge(from, to, graph_);
  layers_.at(to).inputs.push_back(from);
}

void LayerGraph::tie_weight(Vertex layer, Vertex owner) {
  layers_.at(layer).tied_to = owner;
  layers_.at(layer).op->tie_weight();
}

std::string LayerGraph::parameter_name(const std::string& layer, const std::string& tensor) const {
  const std::string own = layer + "." + tensor;
  std::smatch m;
  for (const auto& r : parameter_names) {
    if (std::regex_match(own, m, r.re)) return m.format(r.name);
  }
  return own;
}

std::optional<LayerGraph::Vertex> LayerGraph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

void LayerGraph::fail_layer(Vertex v, std::string_view problem) const {
  const Layer& l = layers_[v];
  fail_at(l.where, fmt::format("layer '{}' ({})", l.name, l.op->kind()), problem);
}

namespace {

// Records the first back edge a depth-first search meets: proof of a cycle.
struct CycleFinder : boost::default_dfs_visitor {
  std::optional<std::pair<std::size_t, std::size_t>>* found;
  template <class Edge, class G>
  void back_edge(Edge e, const G& g) {
    if (!*found) *found = std::pair{boost::source(e, g), boost::target(e, g)};
  }
};

}  // namespace

void LayerGraph::finalize() {
  if (layers_.empty()) fail_at({}, fmt::format("model '{}'", name_), "has no layers");

  std::optional<std::pair<Vertex, Vertex>> back;
  std::vector<boost::default_color_type> colors(layers_.size());
  boost::depth_first_search(
      graph_, CycleFinder{{}, &back},
      boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, graph_)));
  if (back) {
    fail_layer(back->first, fmt::format("its output feeds back into layer '{}', which it depends "
                                        "on: the model has a cycle",
                                        layers_[back->second].name));
  }

  // Kahn's algorithm, smallest vertex (the layer written first) among the ready ones first.
  std::vector<std::size_t> pending(layers_.size());
  std::priority_queue<Vertex, std::vector<Vertex>, std::greater<>> ready;
  for (Vertex v = 0; v < layers_.size(); ++v) {
    pending[v] = boost::in_degree(v, graph_);
    if (pending[v] == 0) ready.push(v);
  }
  order_.clear();
  while (!ready.empty()) {
    const Vertex v = ready.top();
    ready.pop();
    order_.push_back(v);
    for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e) {
      if (--pending[boost::target(*e, graph_)] == 0) ready.push(boost::target(*e, graph_));
    }
  }

  for (Vertex v : order_) {
    Layer& l = layers_[v];
    std::vector<TensorSpec> in;
    bool grad = false;
    for (Vertex u : l.inputs) {
      in.push_back(layers_[u].output);
      grad = grad || layers_[u].requires_grad;
    }
    try {
      l.output = l.op->infer(in);
      l.params = l.op->params(in);
    } catch (const ShapeError& e) {
      std::string from;
      for (Vertex u : l.inputs) {
        from += fmt::format("{}'{}' {}", from.empty() ? "" : ", ", layers_[u].name,
                            to_string(layers_[u].output.shape));
      }
      fail_layer(v, from.empty() ? e.what() : fmt::format("{} (inputs: {})", e.what(), from));
    }
    l.requires_grad = grad || !l.params.empty();
    if (numel(l.output.shape) > kMaxTensorElements) {
      fail_layer(v, fmt::format("its output {} has more than 2^40 elements per sample",
                                to_string(l.output.shape)));
    }
    for (const auto& p : l.params) {
      if (numel(p.shape) > kMaxTensorElements) {
        fail_layer(v,
                   fmt::format("its parameter {} has more than 2^40 elements", to_string(p.shape)));
      }
    }
  }

  for (Vertex v : order_) {
    const Layer& l = layers_[v];
    if (!l.tied_to) continue;
    const Layer& owner = layers_[*l.tied_to];
    // The owner holds the weight both use: a layer tied to itself, or to a layer that is tied in
    // turn, would leave the weight with no holder and out of the parameter count.
    if (*l.tied_to == v) fail_layer(v, "tied_to names the layer itself");
    if (owner.tied_to) {
      fail_layer(v, fmt::format("tied_to '{}', which is tied to '{}' in turn: tie to the layer "
                                "that holds the weight",
                                owner.name, layers_[*owner.tied_to].name));
    }
    if (owner.params.empty() || l.params.empty() ||
        numel(owner.params.front().shape) != numel(l.params.front().shape)) {
      fail_layer(
          v, fmt::format("tied_to '{}': its first parameter tensor {} does not match this "
                         "weight {}",
                         owner.name,
                         owner.params.empty() ? "(none)" : to_string(owner.params.front().shape),
                         l.params.empty() ? "(none)" : to_string(l.params.front().shape)));
    }
  }
}

}  // namespace dlsim::model
