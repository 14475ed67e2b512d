#include "model/analysis.hpp"

#include <fmt/format.h>

namespace dlsim::model {

ModelStats analyze(const LayerGraph& graph, std::int64_t batch, Precision precision) {
  if (batch <= 0) fail_at({}, "batch", fmt::format("must be a positive integer, got {}", batch));
  if (batch > kMaxBatch) {
    fail_at({}, "batch", fmt::format("must be at most {}, got {}", kMaxBatch, batch));
  }
  const double n = static_cast<double>(batch);
  const double elem = element_size(precision).value();
  auto tensor_bytes = [&](const TensorSpec& t) {
    return numel(t.shape) * (t.dtype == DType::kInt64 ? 8.0 : elem);
  };

  ModelStats s;
  s.name = graph.name();
  s.batch = batch;
  s.precision = precision;

  // Which layer outputs some layer keeps for backward: each such tensor is counted once, at
  // the layer that produced it.
  std::vector<bool> output_kept(graph.size(), false);
  std::vector<OpCost> costs(graph.size());
  for (auto v : graph.order()) {
    const Layer& l = graph.layer(v);
    std::vector<TensorSpec> in;
    for (auto u : l.inputs) in.push_back(graph.layer(u).output);
    costs[v] = l.op->cost(in, l.output);
    for (auto i : costs[v].saved_inputs) output_kept[l.inputs.at(i)] = true;
    if (costs[v].saves_output) output_kept[v] = true;
  }

  for (auto v : graph.order()) {
    const Layer& l = graph.layer(v);
    const OpCost& c = costs[v];
    LayerStats ls;
    ls.vertex = v;
    ls.name = l.name;
    ls.op = l.op->kind();
    ls.output_shape = l.output.shape;
    ls.output_shape.insert(ls.output_shape.begin(), batch);

    // Parameters a layer owns, and the weight bytes it reads (a tied weight is read but is
    // counted as a parameter only at its owner).
    double weights = 0;
    double read_weights = 0;
    for (const auto& p : l.params) {
      read_weights += numel(p.shape);
      if (!p.tied) weights += numel(p.shape);
    }
    const double own_weights = read_weights * elem;
    ls.params = static_cast<std::int64_t>(weights);
    ls.weight_bytes = Bytes(weights * elem);
    ls.forward_macs = c.forward_macs * n;
    ls.forward_flops = Flops(c.forward_flops * n);
    double dgrad = 0;
    double in_bytes = 0;
    double in_grad_bytes = 0;
    for (std::size_t i = 0; i < l.inputs.size(); ++i) {
      const Layer& src = graph.layer(l.inputs[i]);
      in_bytes += tensor_bytes(src.output);
      if (src.requires_grad) {
        dgrad += i < c.backward_input_flops.size() ? c.backward_input_flops[i] : 0.0;
        in_grad_bytes += tensor_bytes(src.output);
      }
    }
    const bool has_weight_grad = !l.params.empty();
    ls.backward_input_flops = Flops(dgrad * n);
    ls.backward_weight_flops = Flops(has_weight_grad ? c.backward_weight_flops * n : 0.0);

    double saved = c.saved_extra_bytes;
    for (auto i : c.saved_inputs) saved += tensor_bytes(graph.layer(l.inputs.at(i)).output);
    if (c.saves_output) saved += tensor_bytes(l.output);
    if (!l.op->is_view()) {
      ls.forward_read_bytes = Bytes(own_weights + in_bytes * n);
      ls.forward_write_bytes = Bytes(tensor_bytes(l.output) * n);
      if (l.requires_grad) {
        ls.backward_read_bytes =
            Bytes(tensor_bytes(l.output) * n + saved * n + (dgrad > 0 ? own_weights : 0.0));
        ls.backward_write_bytes = Bytes(in_grad_bytes * n + (has_weight_grad ? own_weights : 0.0));
      }
    }
    const double kept = (output_kept[v] ? tensor_bytes(l.output) : 0.0) + c.saved_extra_bytes;
    ls.activation_bytes = Bytes(kept * n);

    s.params += ls.params;
    s.forward_macs += ls.forward_macs;
    s.forward_flops += ls.forward_flops;
    s.backward_input_flops += ls.backward_input_flops;
    s.backward_weight_flops += ls.backward_weight_flops;
    s.weight_bytes += ls.weight_bytes;
    s.activation_bytes += ls.activation_bytes;
    s.layers.push_back(std::move(ls));
  }

  // Backward visits layers in reverse topological order; within a layer, tensors come in
  // reverse of their declaration (as autograd hooks fire). Tied tensors accumulate into their
  // owner's gradient, which is complete when the owner's backward is done.
  const auto& order = graph.order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Layer& l = graph.layer(*it);
    for (auto p = l.params.rbegin(); p != l.params.rend(); ++p) {
      if (p->tied) continue;
      const double e = numel(p->shape);
      s.gradients.push_back({*it, l.name, p->name, static_cast<std::int64_t>(e), Bytes(e * elem),
                             graph.parameter_name(l.name, p->name)});
    }
  }
  return s;
}

nlohmann::json to_json(const ModelStats& s, const LayerGraph& graph) {
  using nlohmann::json;
  json layers = json::array();
  for (const auto& l : s.layers) {
    const Layer& src = graph.layer(l.vertex);
    json inputs = json::array();
    for (auto u : src.inputs) inputs.push_back(graph.layer(u).name);
    layers.push_back({{"name", l.name},
                      {"op", l.op},
                      {"inputs", inputs},
                      {"attributes", src.op->attributes()},
                      {"output_shape", l.output_shape},
                      {"params", l.params},
                      {"forward_macs", l.forward_macs},
                      {"forward_flops", l.forward_flops.value()},
                      {"backward_flops", l.backward_flops().value()},
                      {"backward_input_flops", l.backward_input_flops.value()},
                      {"backward_weight_flops", l.backward_weight_flops.value()},
                      {"weight_bytes", l.weight_bytes.value()},
                      {"forward_read_bytes", l.forward_read_bytes.value()},
                      {"forward_write_bytes", l.forward_write_bytes.value()},
                      {"backward_read_bytes", l.backward_read_bytes.value()},
                      {"backward_write_bytes", l.backward_write_bytes.value()},
                      {"activation_bytes", l.activation_bytes.value()}});
  }
  json grads = json::array();
  for (const auto& g : s.gradients) {
    grads.push_back({{"layer", g.layer},
                     {"tensor", g.tensor},
                     {"parameter", g.parameter},
                     {"elements", g.elements},
                     {"bytes", g.bytes.value()}});
  }
  return {{"name", s.name},
          {"description", graph.description},
          {"source", graph.source},
          {"batch", s.batch},
          {"precision", std::string(to_string(s.precision))},
          {"params", s.params},
          {"forward_macs", s.forward_macs},
          {"forward_flops", s.forward_flops.value()},
          {"backward_flops", s.backward_flops().value()},
          {"backward_input_flops", s.backward_input_flops.value()},
          {"backward_weight_flops", s.backward_weight_flops.value()},
          {"weight_bytes", s.weight_bytes.value()},
          {"activation_bytes", s.activation_bytes.value()},
          {"gradients", grads},
          {"layers", layers}};
}

std::map<std::pair<LayerGraph::Vertex, std::string>, int> gradient_index(const ModelStats& stats) {
  std::map<std::pair<LayerGraph::Vertex, std::string>, int> out;
  for (std::size_t g = 0; g < stats.gradients.size(); ++g) {
    out[{stats.gradients[g].vertex, stats.gradients[g].tensor}] = static_cast<int>(g);
  }
  return out;
}

void add_signatures(ModelStats& stats, const LayerGraph& graph) {
  for (auto& l : stats.layers) l.signature = layer_signature(graph, l.vertex);
}

std::string layer_signature(const LayerGraph& graph, LayerGraph::Vertex v) {
  const Layer& l = graph.layer(v);
  std::string out = l.op->kind() + " " + l.op->attributes().dump();
  for (auto u : l.inputs) {
    const auto& in = graph.layer(u);
    out += " in=" + to_string(in.output.shape) + (in.requires_grad ? "g" : "");
    if (in.output.dtype == DType::kInt64) out += "i64";
  }
  out += " out=" + to_string(l.output.shape);
  return out;
}

}  // namespace dlsim::model
