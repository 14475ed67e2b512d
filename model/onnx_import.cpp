// ONNX ModelProto -> LayerGraph. Each mapped node becomes one dlsim layer made through
// op_registry() from a synthesized YAML attribute map, the same path a YAML model takes.
//
// Mapped (ONNX op -> dlsim op):
//   Conv (2-D) -> conv2d          MaxPool / AveragePool (2-D) -> maxpool / avgpool
//   GlobalAveragePool -> global_avgpool                LRN -> lrn
//   BatchNormalization -> batchnorm                    Relu / Sigmoid / Tanh -> same
//   Gemm with a weight B -> linear                     MatMul with a 2-D weight -> linear
//   MatMul of two activations -> matmul                Add / Sum of activations -> add
//   Concat -> concat                                   Flatten (axis 1) -> flatten
//   Reshape to [N, -1] -> flatten                      Dropout -> dropout
//   Softmax -> softmax                                 Gather from a 2-D weight -> embedding
// Folded, no layer: Identity (pass-through); Constant, initializers and a Transpose of a weight
// (weights); Add of a bias-like constant (into the producer's bias when it is a MatMul/Gemm or
// Conv without one, else passed through: one FLOP per element, which dlsim leaves out).
// Anything else is an InputError naming the node and its operator.
//
// Shapes are per sample: the first dimension of every ONNX tensor is the batch, so ONNX axes
// are shifted by one. Weights give only their dims; their values are never read.

#include "model/onnx_import.hpp"

#include <dlsim_onnx/onnx.pb.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <yaml-cpp/yaml.h>

#include <bit>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

namespace dlsim::model {
namespace {

using Pair = std::vector<std::int64_t>;  // [h, w]; a vector so yaml-cpp writes a sequence

// A weight or other constant tensor: an initializer or the value of a Constant node.
struct Constant {
  std::string name;
  Shape dims;
  const onnx::TensorProto* tensor = nullptr;         // its data, read only when a value is needed
  std::optional<std::vector<double>> inline_values;  // Constant's value_ints / value_floats
};

// What an ONNX tensor name stands for while the nodes are read.
struct Value {
  std::optional<std::size_t> layer;  // an activation: index of the layer producing it
  std::optional<Constant> constant;
  std::string unmapped;  // an output dlsim does not model ("output 2 of node ..."), for messages
};

// A weight tensor's dims in the file, checked against the parameter tensor dlsim infers.
struct ExpectedParam {
  std::string tensor;  // ONNX tensor name
  Shape onnx_dims;
  Shape dims;  // in dlsim's layout (a MatMul weight [K, N] is linear's [N, K])
};

struct PendingLayer {
  std::string name;
  std::string kind;
  YAML::Node attrs;
  std::string label;  // "node 'conv1' (op Conv)"
  std::shared_ptr<Op> op;
  std::vector<std::size_t> inputs;
  std::string output;  // the ONNX tensor it produces
  std::vector<ExpectedParam> expected;
  std::optional<std::int64_t> expected_width;  // Reshape to [N, k] must flatten to [k]
};

struct Node {
  const onnx::NodeProto& proto;
  std::string name;   // node name, else its first output name, else "#<index>"
  std::string label;  // "node 'conv1' (op Conv)", the field of every message about it
};

std::int64_t product(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Shape tensor_dims(const onnx::TensorProto& t) { return Shape(t.dims().begin(), t.dims().end()); }

// Little-endian bytes of raw_data, as ONNX stores them whatever the host.
template <class U>
U load_le(const std::string& raw, std::size_t at) {
  U v = 0;
  for (std::size_t b = 0; b < sizeof(U); ++b) {
    v |= static_cast<U>(static_cast<U>(static_cast<unsigned char>(raw[at + b])) << (8 * b));
  }
  return v;
}

// A float attribute as YAML text: the shortest decimal that reads back as the same float, so
// 1e-5f shows as 1e-05 in `model show`, not 9.99999974737875e-06.
YAML::Node yaml_number(float f) { return YAML::Node(fmt::format("{}", f)); }

class Importer {
 public:
  Importer(std::string path, const onnx::ModelProto& model)
      : path_(std::move(path)),
        file_(std::make_shared<const std::string>(path_)),
        model_(model),
        graph_(model.graph()) {
    for (const auto& o : model.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    }
  }

  LayerGraph run() {
    for (const auto& n : graph_.node()) {
      for (const auto& in : n.input()) ++uses_[in];
    }
    for (const auto& out : graph_.output()) ++uses_[out.name()];
    for (const auto& t : graph_.initializer()) {
      values_[t.name()] = Value{std::nullopt, Constant{t.name(), tensor_dims(t), &t, {}}, {}};
    }
    for (const auto& s : graph_.sparse_initializer()) {
      const Shape dims(s.dims().begin(), s.dims().end());
      values_[s.values().name()] =
          Value{std::nullopt, Constant{s.values().name(), dims, nullptr, std::nullopt}, {}};
    }
    for (const auto& in : graph_.input()) {
      // IR < 4 lists every initializer among the inputs too; those are weights, not data.
      if (!values_.count(in.name())) read_input(in);
    }
    for (int i = 0; i < graph_.node_size(); ++i) {
      const auto& p = graph_.node(i);
      std::string name = p.name();
      if (name.empty()) {
        for (const auto& o : p.output()) {
          if (!o.empty()) {
            name = o;
            break;
          }
        }
      }
      if (name.empty()) name = fmt::format("#{}", i);
      const std::string op = p.domain().empty() || p.domain() == "ai.onnx"
                                 ? p.op_type()
                                 : fmt::format("{}.{}", p.domain(), p.op_type());
      translate(Node{p, name, fmt::format("node '{}' (op {})", name, op)});
    }
    return build();
  }

 private:
  // ---- messages ----

  [[noreturn]] void fail(const Node& n, std::string_view problem) const {
    fail_at({path_}, n.label, problem);
  }
  [[noreturn]] void unmappable(const Node& n, std::string_view why = {}) const {
    fail(n, why.empty() ? "operator cannot be mapped to a dlsim layer"
                        : fmt::format("operator cannot be mapped to a dlsim layer: {}", why));
  }

  // ---- attributes ----

  const onnx::AttributeProto* attr(const Node& n, std::string_view name,
                                   onnx::AttributeProto::AttributeType type) const {
    for (const auto& a : n.proto.attribute()) {
      if (a.name() != name) continue;
      // Very old exporters leave the type unset; the field itself is then what counts.
      if (a.type() != type && a.type() != onnx::AttributeProto::UNDEFINED) {
        fail(n, fmt::format("attribute '{}' has type {}, expected {}", name,
                            onnx::AttributeProto::AttributeType_Name(a.type()),
                            onnx::AttributeProto::AttributeType_Name(type)));
      }
      return &a;
    }
    return nullptr;
  }
  std::int64_t int_attr(const Node& n, std::string_view name, std::int64_t fallback) const {
    const auto* a = attr(n, name, onnx::AttributeProto::INT);
    return a ? a->i() : fallback;
  }
  float float_attr(const Node& n, std::string_view name, float fallback) const {
    const auto* a = attr(n, name, onnx::AttributeProto::FLOAT);
    return a ? a->f() : fallback;
  }
  std::string string_attr(const Node& n, std::string_view name, std::string fallback) const {
    const auto* a = attr(n, name, onnx::AttributeProto::STRING);
    return a ? a->s() : fallback;
  }
  std::optional<std::vector<std::int64_t>> ints_attr(const Node& n, std::string_view name) const {
    const auto* a = attr(n, name, onnx::AttributeProto::INTS);
    if (!a) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  }
  // A per-spatial-dimension attribute (strides, dilations) of a 2-D operator.
  Pair pair_attr(const Node& n, std::string_view name, std::int64_t fallback) const {
    auto v = ints_attr(n, name);
    if (!v) return {fallback, fallback};
    if (v->size() != 2) {
      fail(n, fmt::format("attribute '{}' has {} values; dlsim maps 2-D operators only", name,
                          v->size()));
    }
    return *v;
  }

  // dlsim pads both sides of a dimension alike, so ONNX pads [top, left, bottom, right] must
  // be symmetric. auto_pad SAME is symmetric only with stride 1 and an even total padding;
  // with a larger stride it depends on the input size, which is not known here.
  Pair padding(const Node& n, const Pair& kernel, const Pair& stride, const Pair& dilation) const {
    const std::string mode = string_attr(n, "auto_pad", "NOTSET");
    if (mode == "VALID") return {0, 0};
    if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
      Pair pad(2);
      for (std::size_t i = 0; i < 2; ++i) {
        const std::int64_t total = dilation[i] * (kernel[i] - 1);
        if (stride[i] != 1 || total % 2 != 0) {
          fail(n, fmt::format("auto_pad {} with kernel {}x{} and stride {}x{} pads the two sides "
                              "differently; dlsim needs symmetric padding (export with explicit "
                              "pads)",
                              mode, kernel[0], kernel[1], stride[0], stride[1]));
        }
        pad[i] = total / 2;
      }
      return pad;
    }
    if (mode != "NOTSET" && !mode.empty()) fail(n, fmt::format("unknown auto_pad '{}'", mode));
    const auto pads = ints_attr(n, "pads").value_or(std::vector<std::int64_t>{0, 0, 0, 0});
    if (pads.size() != 4) {
      fail(n, fmt::format("pads has {} values; dlsim maps 2-D operators only", pads.size()));
    }
    if (pads[0] != pads[2] || pads[1] != pads[3]) {
      fail(n, fmt::format("asymmetric pads [top, left, bottom, right] = [{}]: dlsim pads both "
                          "sides of a dimension alike",
                          fmt::join(pads, ", ")));
    }
    return {pads[0], pads[1]};
  }

  // ---- inputs and outputs of a node ----

  static bool has_input(const Node& n, int i) {
    return i < n.proto.input_size() && !n.proto.input(i).empty();
  }

  const Value& value(const Node& n, int i, std::string_view role) const {
    if (!has_input(n, i)) fail(n, fmt::format("input {} ({}) is missing", i + 1, role));
    const std::string& t = n.proto.input(i);
    auto it = values_.find(t);
    if (it == values_.end()) {
      fail(n, fmt::format("input '{}' is not a graph input, an initializer or the output of an "
                          "earlier node",
                          t));
    }
    if (!it->second.unmapped.empty()) {
      fail(n, fmt::format("input '{}' is {}, which dlsim does not model", t, it->second.unmapped));
    }
    return it->second;
  }

  std::size_t activation(const Node& n, int i, std::string_view role) const {
    const Value& v = value(n, i, role);
    if (!v.layer) {
      unmappable(n, fmt::format("its {} '{}' is a constant, where dlsim needs an activation", role,
                                n.proto.input(i)));
    }
    return *v.layer;
  }

  const Constant& constant(const Node& n, int i, std::string_view role) const {
    const Value& v = value(n, i, role);
    if (!v.constant) {
      unmappable(n, fmt::format("its {} '{}' is computed, where dlsim needs an initializer or a "
                                "Constant",
                                role, n.proto.input(i)));
    }
    return *v.constant;
  }

  // The values of a small constant (a shape, a ratio); only these are ever read.
  std::vector<double> values_of(const Node& n, const Constant& c) const {
    if (c.inline_values) return *c.inline_values;
    if (!c.tensor) fail(n, fmt::format("the values of '{}' are not in the file", c.name));
    const onnx::TensorProto& t = *c.tensor;
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      fail(n, fmt::format("the values of '{}' are stored outside the file", c.name));
    }
    const std::string& raw = t.raw_data();
    std::vector<double> out;
    switch (t.data_type()) {
      case onnx::TensorProto::FLOAT:
        for (float f : t.float_data()) out.push_back(f);
        for (std::size_t at = 0; at + 4 <= raw.size(); at += 4) {
          out.push_back(std::bit_cast<float>(load_le<std::uint32_t>(raw, at)));
        }
        break;
      case onnx::TensorProto::DOUBLE:
        for (double d : t.double_data()) out.push_back(d);
        for (std::size_t at = 0; at + 8 <= raw.size(); at += 8) {
          out.push_back(std::bit_cast<double>(load_le<std::uint64_t>(raw, at)));
        }
        break;
      case onnx::TensorProto::INT64:
        for (auto v : t.int64_data()) out.push_back(static_cast<double>(v));
        for (std::size_t at = 0; at + 8 <= raw.size(); at += 8) {
          out.push_back(
              static_cast<double>(std::bit_cast<std::int64_t>(load_le<std::uint64_t>(raw, at))));
        }
        break;
      case onnx::TensorProto::INT32:
        for (auto v : t.int32_data()) out.push_back(v);
        for (std::size_t at = 0; at + 4 <= raw.size(); at += 4) {
          out.push_back(std::bit_cast<std::int32_t>(load_le<std::uint32_t>(raw, at)));
        }
        break;
      default:
        fail(n, fmt::format("'{}' has element type {}, expected a number", c.name,
                            onnx::TensorProto::DataType_Name(t.data_type())));
    }
    if (static_cast<std::int64_t>(out.size()) != product(c.dims)) {
      fail(n,
           fmt::format("'{}' holds {} values for dims {}", c.name, out.size(), to_string(c.dims)));
    }
    return out;
  }

  void bind(const std::string& tensor, Value v) {
    if (!tensor.empty()) values_[tensor] = std::move(v);
  }
  // Outputs after the first (pooling indices, dropout masks, batchnorm statistics) are not
  // modelled: a node that reads one fails, naming where it came from.
  void bind_rest_unmapped(const Node& n, int from) {
    for (int i = from; i < n.proto.output_size(); ++i) {
      bind(n.proto.output(i), Value{{}, {}, fmt::format("output {} of {}", i + 1, n.label)});
    }
  }
  void alias(const Node& n, const Value& v) {
    bind(n.proto.output(0), v);
    bind_rest_unmapped(n, 1);
  }

  // ---- layers ----

  std::string unique_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
    used_names_.insert(name);
    return name;
  }

  std::shared_ptr<Op> make_op(const std::string& kind, const YAML::Node& attrs,
                              const std::string& label) const {
    const ConfigNode node(attrs, file_, nullptr, label);
    std::shared_ptr<Op> op = op_registry().at(kind, {path_}).make(node);
    node.finish();
    return op;
  }

  std::size_t add_layer(const Node& n, const std::string& kind, YAML::Node attrs,
                        std::vector<std::size_t> inputs, std::vector<ExpectedParam> expected = {}) {
    PendingLayer p;
    p.name = unique_name(n.name);
    p.kind = kind;
    p.op = make_op(kind, attrs, n.label);
    p.attrs = std::move(attrs);
    p.label = n.label;
    p.inputs = std::move(inputs);
    p.output = n.proto.output_size() > 0 ? n.proto.output(0) : std::string();
    p.expected = std::move(expected);
    layers_.push_back(std::move(p));
    const std::size_t index = layers_.size() - 1;
    alias(n, Value{index, {}, {}});
    return index;
  }

  void read_input(const onnx::ValueInfoProto& in) {
    const std::string label = fmt::format("graph input '{}'", in.name());
    auto bad = [&](std::string_view problem) { fail_at({path_}, label, problem); };
    if (!in.type().has_tensor_type()) bad("only tensor inputs can be mapped");
    const auto& t = in.type().tensor_type();
    std::string dtype;
    switch (t.elem_type()) {
      case onnx::TensorProto::FLOAT:
      case onnx::TensorProto::FLOAT16:
      case onnx::TensorProto::BFLOAT16:
      case onnx::TensorProto::DOUBLE:
        dtype = "float";  // a float input takes the precision of the run
        break;
      case onnx::TensorProto::INT64:
        dtype = "int64";
        break;
      default:
        bad(fmt::format("element type {}: dlsim inputs are float or int64",
                        onnx::TensorProto::DataType_Name(
                            static_cast<onnx::TensorProto::DataType>(t.elem_type()))));
    }
    if (!t.has_shape()) bad("has no shape; dlsim needs the dimensions of a sample");
    const auto& dims = t.shape().dim();
    if (dims.size() < 2) {
      bad(fmt::format("has rank {}; dlsim needs a batch dimension and at least one more",
                      dims.size()));
    }
    // The first dimension is the batch, chosen by the run: symbolic or fixed, it is dropped.
    std::vector<std::int64_t> shape;
    for (int i = 1; i < dims.size(); ++i) {
      const auto& d = dims[i];
      if (!d.has_dim_value()) {
        bad(fmt::format("dimension {} is symbolic ('{}'); only the batch dimension may be", i,
                        d.dim_param()));
      }
      if (d.dim_value() <= 0) bad(fmt::format("dimension {} is {}", i, d.dim_value()));
      shape.push_back(d.dim_value());
    }
    YAML::Node a;
    a["shape"] = shape;
    a["dtype"] = dtype;
    PendingLayer p;
    p.name = unique_name(in.name());
    p.kind = "input";
    p.op = make_op("input", a, label);
    p.attrs = a;
    p.label = label;
    p.output = in.name();
    layers_.push_back(std::move(p));
    values_[in.name()] = Value{layers_.size() - 1, {}, {}};
  }

  // ---- operators ----

  void translate(const Node& n) {
    using Handler = void (Importer::*)(const Node&);
    static const std::unordered_map<std::string_view, Handler> kHandlers = {
        {"Conv", &Importer::conv},
        {"MaxPool", &Importer::max_pool},
        {"AveragePool", &Importer::average_pool},
        {"GlobalAveragePool", &Importer::global_average_pool},
        {"BatchNormalization", &Importer::batch_norm},
        {"LRN", &Importer::lrn},
        {"Relu", &Importer::activation_op},
        {"Sigmoid", &Importer::activation_op},
        {"Tanh", &Importer::activation_op},
        {"Gemm", &Importer::gemm},
        {"MatMul", &Importer::matmul},
        {"Add", &Importer::add},
        {"Sum", &Importer::add},
        {"Concat", &Importer::concat},
        {"Flatten", &Importer::flatten},
        {"Reshape", &Importer::reshape},
        {"Dropout", &Importer::dropout},
        {"Softmax", &Importer::softmax},
        {"Identity", &Importer::identity},
        {"Constant", &Importer::constant_op},
        {"Transpose", &Importer::transpose},
        {"Gather", &Importer::gather},
    };
    const bool standard = n.proto.domain().empty() || n.proto.domain() == "ai.onnx";
    auto it = kHandlers.find(n.proto.op_type());
    if (!standard || it == kHandlers.end()) unmappable(n);
    if (n.proto.output_size() == 0 || n.proto.output(0).empty()) fail(n, "has no output");
    (this->*(it->second))(n);
  }

  void conv(const Node& n) {
    const auto x = activation(n, 0, "input X");
    const Constant& w = constant(n, 1, "weight W");
    if (w.dims.size() != 4) {
      unmappable(n, fmt::format("only 2-D convolution maps to conv2d; weight '{}' has dims {}",
                                w.name, to_string(w.dims)));
    }
    const Pair kernel{w.dims[2], w.dims[3]};
    if (auto k = ints_attr(n, "kernel_shape"); k && *k != kernel) {
      fail(n, fmt::format("kernel_shape [{}] differs from the weight's dims {}",
                          fmt::join(*k, ", "), to_string(w.dims)));
    }
    const Pair stride = pair_attr(n, "strides", 1);
    const Pair dilation = pair_attr(n, "dilations", 1);
    const std::int64_t group = int_attr(n, "group", 1);
    YAML::Node a;
    a["out_channels"] = w.dims[0];
    a["kernel"] = kernel;
    a["stride"] = stride;
    a["padding"] = padding(n, kernel, stride, dilation);
    a["dilation"] = dilation;
    a["groups"] = group;
    a["bias"] = has_input(n, 2);
    std::vector<ExpectedParam> expected{{w.name, w.dims, w.dims}};
    if (has_input(n, 2)) {
      const Constant& b = constant(n, 2, "bias B");
      expected.push_back({b.name, b.dims, b.dims});
    }
    add_layer(n, "conv2d", a, {x}, std::move(expected));
  }

  void pool(const Node& n, bool is_max) {
    const auto x = activation(n, 0, "input X");
    const auto kernel = ints_attr(n, "kernel_shape");
    if (!kernel) fail(n, "missing attribute kernel_shape");
    if (kernel->size() != 2) {
      unmappable(n, fmt::format("only 2-D pooling maps to dlsim; kernel_shape has {} values",
                                kernel->size()));
    }
    const Pair stride = pair_attr(n, "strides", 1);  // ONNX's default is 1, dlsim's the kernel
    const Pair dilation = pair_attr(n, "dilations", 1);
    YAML::Node a;
    a["kernel"] = *kernel;
    a["stride"] = stride;
    a["padding"] = padding(n, *kernel, stride, dilation);
    // Output sizes follow PyTorch's ceil_mode rule (a last window starting in the right
    // padding is dropped), which is what PyTorch exports mean.
    a["ceil_mode"] = int_attr(n, "ceil_mode", 0) != 0;
    if (is_max) {
      a["dilation"] = dilation;
    } else {
      if (dilation != Pair{1, 1}) fail(n, "dlsim's avgpool has no dilation");
      a["count_include_pad"] = int_attr(n, "count_include_pad", 0) != 0;  // ONNX default: 0
    }
    add_layer(n, is_max ? "maxpool" : "avgpool", a, {x});
  }
  void max_pool(const Node& n) { pool(n, true); }
  void average_pool(const Node& n) { pool(n, false); }

  void global_average_pool(const Node& n) {
    add_layer(n, "global_avgpool", YAML::Node(YAML::NodeType::Map), {activation(n, 0, "input X")});
  }

  void batch_norm(const Node& n) {
    const auto x = activation(n, 0, "input X");
    const Constant& scale = constant(n, 1, "scale");
    const Constant& bias = constant(n, 2, "bias B");
    for (int i = 3; i < 5; ++i) constant(n, i, i == 3 ? "mean" : "var");  // buffers, not params
    YAML::Node a;
    a["eps"] = yaml_number(float_attr(n, "epsilon", 1e-5f));
    // dlsim's batchnorm is the training-mode layer with learnable scale and shift.
    a["affine"] = true;
    add_layer(n, "batchnorm", a, {x},
              {{scale.name, scale.dims, scale.dims}, {bias.name, bias.dims, bias.dims}});
  }

  void lrn(const Node& n) {
    const auto* size = attr(n, "size", onnx::AttributeProto::INT);
    if (!size) fail(n, "missing attribute size");
    YAML::Node a;
    a["size"] = size->i();
    a["alpha"] = yaml_number(float_attr(n, "alpha", 1e-4f));
    a["beta"] = yaml_number(float_attr(n, "beta", 0.75f));
    a["k"] = yaml_number(float_attr(n, "bias", 1.0f));
    add_layer(n, "lrn", a, {activation(n, 0, "input X")});
  }

  void activation_op(const Node& n) {
    static const std::unordered_map<std::string_view, std::string> kKinds = {
        {"Relu", "relu"}, {"Sigmoid", "sigmoid"}, {"Tanh", "tanh"}};
    add_layer(n, kKinds.at(n.proto.op_type()), YAML::Node(YAML::NodeType::Map),
              {activation(n, 0, "input X")});
  }

  // Y = alpha A B' + beta C: a fully connected layer when B is a weight. alpha and beta scale
  // by constants, which dlsim does not count.
  void gemm(const Node& n) {
    const auto x = activation(n, 0, "input A");
    if (int_attr(n, "transA", 0) != 0) {
      unmappable(n, "transA = 1 multiplies across the batch dimension");
    }
    const Value& b = value(n, 1, "input B");
    if (!b.constant) {
      unmappable(n, "B is an activation; only Gemm with a weight B maps, to linear");
    }
    const Constant& w = *b.constant;
    if (w.dims.size() != 2)
      fail(n, fmt::format("weight '{}' has dims {}", w.name, to_string(w.dims)));
    const bool trans_b = int_attr(n, "transB", 0) != 0;
    const Shape dims = trans_b ? w.dims : Shape{w.dims[1], w.dims[0]};  // linear's [out, in]
    YAML::Node a;
    a["out_features"] = dims[0];
    a["bias"] = has_input(n, 2);
    std::vector<ExpectedParam> expected{{w.name, w.dims, dims}};
    if (has_input(n, 2)) {
      const Constant& c = constant(n, 2, "bias C");
      if (product(c.dims) != dims[0]) {
        unmappable(n, fmt::format("bias C '{}' of dims {} is not one value per output feature",
                                  c.name, to_string(c.dims)));
      }
      expected.push_back({c.name, c.dims, {dims[0]}});
    }
    add_layer(n, "linear", a, {x}, std::move(expected));
  }

  void matmul(const Node& n) {
    const auto x = activation(n, 0, "input A");
    const Value& b = value(n, 1, "input B");
    if (b.layer) {
      YAML::Node a;
      a["transpose_b"] = false;
      add_layer(n, "matmul", a, {x, *b.layer});
      return;
    }
    const Constant& w = *b.constant;
    if (w.dims.size() != 2) {
      unmappable(n, fmt::format("weight B '{}' has dims {}; only a 2-D weight maps to linear",
                                w.name, to_string(w.dims)));
    }
    // A following Add of a bias vector turns the bias on (see add()).
    YAML::Node a;
    a["out_features"] = w.dims[1];
    a["bias"] = false;
    add_layer(n, "linear", a, {x}, {{w.name, w.dims, {w.dims[1], w.dims[0]}}});
  }

  // The width of a layer's bias, when `c` has the dims of one: [N] or [1, .., N] after a
  // linear layer, [C, 1, 1] or [1, C, 1, 1] after a convolution.
  static std::optional<std::int64_t> bias_width(const PendingLayer& p, const Constant& c) {
    if (p.kind != "linear" && p.kind != "conv2d") return std::nullopt;
    const auto at = p.kind == "linear" ? 1u : 3u;  // counted from the end
    if (c.dims.size() < at) return std::nullopt;
    const std::int64_t width = c.dims[c.dims.size() - at];
    if (product(c.dims) != width) return std::nullopt;
    return width;
  }

  void add(const Node& n) {
    std::vector<std::size_t> acts;
    int act_input = -1;
    const Constant* c = nullptr;
    for (int i = 0; i < n.proto.input_size(); ++i) {
      const Value& v = value(n, i, fmt::format("input {}", i + 1));
      if (v.layer) {
        acts.push_back(*v.layer);
        act_input = i;
      } else {
        c = &*v.constant;
      }
    }
    if (!c) {
      add_layer(n, "add", YAML::Node(YAML::NodeType::Map), acts);
      return;
    }
    if (acts.size() != 1 || n.proto.input_size() != 2) {
      unmappable(n, "adds constants to each other or to several activations");
    }
    PendingLayer& p = layers_[acts[0]];
    const std::string& from = n.proto.input(act_input);
    // A MatMul or a Conv exported without a bias and followed by this Add is one layer with a
    // bias: turn the producer's bias on when this Add is its only reader.
    const auto width = bias_width(p, *c);
    const std::string width_key = p.kind == "linear" ? "out_features" : "out_channels";
    if (width && p.output == from && uses_[from] == 1 && !p.attrs["bias"].as<bool>() &&
        p.attrs[width_key].as<std::int64_t>() == *width) {
      p.attrs["bias"] = true;
      p.op = make_op(p.kind, p.attrs, p.label);
      p.expected.push_back({c->name, c->dims, {*width}});
      alias(n, Value{acts[0], {}, {}});
      return;
    }
    // Otherwise a bias-like constant (a scalar or one vector) costs one FLOP per element and
    // is left out: the activation passes through. A larger constant is a learnable tensor of
    // its own (a position embedding), which dlsim has no layer for.
    int wide = 0;
    for (auto d : c->dims) wide += d > 1;
    if (wide > 1) {
      unmappable(n, fmt::format("adds the constant '{}' of dims {}; only a scalar or a bias "
                                "vector can be added to an activation",
                                c->name, to_string(c->dims)));
    }
    alias(n, Value{acts[0], {}, {}});
  }

  // ONNX axes count the batch; dlsim's per-sample axes do not. Negative axes are the same.
  std::int64_t sample_axis(const Node& n, std::int64_t axis) const {
    if (axis == 0) unmappable(n, "axis 0 is the batch dimension");
    return axis > 0 ? axis - 1 : axis;
  }

  void concat(const Node& n) {
    const auto* axis = attr(n, "axis", onnx::AttributeProto::INT);
    if (!axis && opset_ >= 4) fail(n, "missing attribute axis");
    std::vector<std::size_t> inputs;
    for (int i = 0; i < n.proto.input_size(); ++i) {
      inputs.push_back(activation(n, i, fmt::format("input {}", i + 1)));
    }
    YAML::Node a;
    a["axis"] = sample_axis(n, axis ? axis->i() : 1);  // opsets 1-3 default to 1
    add_layer(n, "concat", a, inputs);
  }

  void flatten(const Node& n) {
    const auto axis = int_attr(n, "axis", 1);
    if (axis != 1) {
      unmappable(n, fmt::format("Flatten with axis {}; only axis 1 (keep the batch, flatten each "
                                "sample) maps to flatten",
                                axis));
    }
    add_layer(n, "flatten", YAML::Node(YAML::NodeType::Map), {activation(n, 0, "input")});
  }

  // Reshape to two dimensions, the batch and the rest, is a flatten: [0, -1], [-1, k], [N, k].
  void reshape(const Node& n) {
    const auto x = activation(n, 0, "input data");
    std::vector<double> shape;
    if (const auto legacy = ints_attr(n, "shape"); legacy && opset_ < 5) {
      shape.assign(legacy->begin(), legacy->end());
    } else {
      shape = values_of(n, constant(n, 1, "shape"));
    }
    const bool allow_zero = int_attr(n, "allowzero", 0) != 0;
    const bool batch_ok =
        shape.size() == 2 && (shape[0] == -1 || shape[0] > 0 || (shape[0] == 0 && !allow_zero));
    const bool rest_ok = shape.size() == 2 && (shape[1] > 0 || (shape[1] == -1 && shape[0] != -1));
    if (!batch_ok || !rest_ok) {
      unmappable(n, fmt::format("Reshape to [{}]; only a reshape to [batch, -1] or [batch, k] "
                                "maps, to flatten",
                                fmt::join(shape, ", ")));
    }
    const auto index = add_layer(n, "flatten", YAML::Node(YAML::NodeType::Map), {x});
    if (shape[1] > 0) layers_[index].expected_width = static_cast<std::int64_t>(shape[1]);
  }

  void dropout(const Node& n) {
    double ratio = 0.5;
    if (opset_ < 12) {
      ratio = float_attr(n, "ratio", 0.5f);
    } else if (has_input(n, 1)) {
      const auto v = values_of(n, constant(n, 1, "ratio"));
      if (v.size() != 1) fail(n, "ratio must be a single value");
      ratio = v[0];
    }
    YAML::Node a;
    a["p"] = yaml_number(static_cast<float>(ratio));
    add_layer(n, "dropout", a, {activation(n, 0, "input data")});
  }

  void softmax(const Node& n) {
    YAML::Node a;
    // Opsets before 13 flatten the input from `axis` on and default to 1; the cost per element
    // is the same, so only the axis moves.
    a["axis"] = sample_axis(n, int_attr(n, "axis", opset_ < 13 ? 1 : -1));
    add_layer(n, "softmax", a, {activation(n, 0, "input")});
  }

  void identity(const Node& n) { alias(n, value(n, 0, "input")); }

  void constant_op(const Node& n) {
    Constant c;
    c.name = n.proto.output(0);
    if (const auto* t = attr(n, "value", onnx::AttributeProto::TENSOR)) {
      c.dims = tensor_dims(t->t());
      c.tensor = &t->t();
    } else if (const auto* i = attr(n, "value_int", onnx::AttributeProto::INT)) {
      c.inline_values = std::vector<double>{static_cast<double>(i->i())};
    } else if (const auto* f = attr(n, "value_float", onnx::AttributeProto::FLOAT)) {
      c.inline_values = std::vector<double>{f->f()};
    } else if (const auto* is = attr(n, "value_ints", onnx::AttributeProto::INTS)) {
      c.dims = {is->ints_size()};
      c.inline_values.emplace();
      for (auto v : is->ints()) c.inline_values->push_back(static_cast<double>(v));
    } else if (const auto* fs = attr(n, "value_floats", onnx::AttributeProto::FLOATS)) {
      c.dims = {fs->floats_size()};
      c.inline_values = std::vector<double>(fs->floats().begin(), fs->floats().end());
    } else {
      unmappable(n, "only value, value_int(s) and value_float(s) constants are read");
    }
    alias(n, Value{std::nullopt, std::move(c), {}});
  }

  // A transposed weight (PyTorch's old export of Linear without bias: Transpose + MatMul) is
  // still a weight; a transposed activation has no dlsim layer.
  void transpose(const Node& n) {
    const Value& v = value(n, 0, "input data");
    if (!v.constant) unmappable(n, "only a Transpose of a weight is folded");
    Constant c{n.proto.output(0), {}, nullptr, std::nullopt};
    const Shape& dims = v.constant->dims;
    auto perm = ints_attr(n, "perm");
    if (!perm) {
      perm.emplace();  // default: reverse the dimensions
      for (auto i = static_cast<std::int64_t>(dims.size()) - 1; i >= 0; --i) perm->push_back(i);
    }
    if (perm->size() != dims.size()) fail(n, "perm does not match the rank of the input");
    for (auto p : *perm) {
      if (p < 0 || p >= static_cast<std::int64_t>(dims.size())) fail(n, "perm is out of range");
      c.dims.push_back(dims[static_cast<std::size_t>(p)]);
    }
    alias(n, Value{std::nullopt, std::move(c), {}});
  }

  // Rows of a 2-D weight picked by int64 ids: an embedding table.
  void gather(const Node& n) {
    const Value& data = value(n, 0, "data");
    if (!data.constant || data.constant->dims.size() != 2 || int_attr(n, "axis", 0) != 0) {
      unmappable(n, "only Gather of rows (axis 0) from a 2-D weight maps, to embedding");
    }
    const Constant& table = *data.constant;
    YAML::Node a;
    a["vocab"] = table.dims[0];
    a["dim"] = table.dims[1];
    add_layer(n, "embedding", a, {activation(n, 1, "indices")},
              {{table.name, table.dims, table.dims}});
  }

  // ---- the graph ----

  LayerGraph build() {
    LayerGraph g(std::filesystem::path(path_).stem().string());
    g.description = fmt::format(
        "ONNX graph '{}' ({}{}{}, opset {})", graph_.name(),
        model_.producer_name().empty() ? "unknown producer" : model_.producer_name(),
        model_.producer_version().empty() ? "" : " ", model_.producer_version(), opset_);
    g.source = path_;
    std::vector<LayerGraph::Vertex> vertex;
    for (const auto& p : layers_) vertex.push_back(g.add_layer(p.name, p.op, {path_}));
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      for (auto in : layers_[i].inputs) g.connect(vertex[in], vertex[i]);
    }
    g.finalize();

    // The weights in the file must be the tensors dlsim inferred from the input channels:
    // a mismatch means the mapping (or the file) is wrong, and the counts would be too.
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      const PendingLayer& p = layers_[i];
      const Layer& l = g.layer(vertex[i]);
      for (std::size_t k = 0; k < p.expected.size(); ++k) {
        const ExpectedParam& e = p.expected[k];
        if (k >= l.params.size() || l.params[k].shape != e.dims) {
          fail_at(
              {path_}, p.label,
              fmt::format("weight '{}' has dims {}, but dlsim's {} layer on this input has {}",
                          e.tensor, to_string(e.onnx_dims), p.kind,
                          k < l.params.size() ? to_string(l.params[k].shape) : "no such tensor"));
        }
      }
      if (p.expected_width && l.output.shape != Shape{*p.expected_width}) {
        fail_at({path_}, p.label,
                fmt::format("Reshape to [N, {}] of an input of {} elements per sample",
                            *p.expected_width, numel(g.layer(vertex[p.inputs[0]]).output.shape)));
      }
    }
    return g;
  }

  std::string path_;
  std::shared_ptr<const std::string> file_;
  const onnx::ModelProto& model_;
  const onnx::GraphProto& graph_;
  std::int64_t opset_ = 1;
  std::unordered_map<std::string, int> uses_;  // readers of each tensor (graph outputs too)
  std::unordered_map<std::string, Value> values_;
  std::vector<PendingLayer> layers_;
  std::set<std::string> used_names_;
};

onnx::ModelProto read_model(const std::string& path) {
  refuse_non_file(path, "");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_at({path}, "", "cannot open file");
  google::protobuf::io::IstreamInputStream raw(&in);
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);  // weights make files far larger than protobuf's default
  onnx::ModelProto model;
  if (!model.ParseFromCodedStream(&coded)) {
    fail_at({path}, "", "not an ONNX model: the file is not a valid ONNX protobuf");
  }
  // Protobuf accepts many byte strings (an empty file is an empty message): require what
  // every ONNX model has.
  if (model.ir_version() <= 0 || !model.has_graph()) {
    fail_at({path}, "", "not an ONNX model: no IR version or no graph");
  }
  return model;
}

}  // namespace

LayerGraph import_onnx(const std::string& path) {
  const onnx::ModelProto model = read_model(path);
  return Importer(path, model).run();
}

}  // namespace dlsim::model
