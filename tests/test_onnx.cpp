// ONNX import: models written here through the ONNX protobuf API (only weight dims, no
// values), a GoogLeNet exported from the zoo and read back, and Debian's libonnx-testdata.

#include <dlsim_onnx/onnx.pb.h>
#include <doctest/doctest.h>

#include "approx.hpp"

#include <fmt/format.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/analysis.hpp"
#include "model/loader.hpp"
#include "model/onnx_import.hpp"

namespace dlsim::model {
namespace {

namespace fs = std::filesystem;
using Ints = std::vector<std::int64_t>;

constexpr std::int64_t kBatch = -1;  // a symbolic dimension in OnnxBuilder::input
const fs::path kTestData = "/usr/share/libonnx-testdata/data";

// A fresh directory for the files of one test, removed with it.
class TempDir {
 public:
  TempDir() {
    std::string name = (fs::temp_directory_path() / "dlsim_onnx_XXXXXX").string();
    REQUIRE(mkdtemp(name.data()) != nullptr);
    path_ = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Sets attributes of a node in a chain: node(...).ints("pads", {1, 1, 1, 1}).i("group", 2).
struct NodeRef {
  onnx::NodeProto* proto;
  NodeRef& ints(const std::string& name, const Ints& values) {
    auto* a = proto->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto v : values) a->add_ints(v);
    return *this;
  }
  NodeRef& i(const std::string& name, std::int64_t value) {
    auto* a = proto->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
    return *this;
  }
  NodeRef& f(const std::string& name, float value) {
    auto* a = proto->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
    return *this;
  }
};

// Writes ONNX models the way exporters do: inputs with a batch dimension first, weights as
// initializers (dims only: dlsim never reads weight values), nodes in topological order.
class OnnxBuilder {
 public:
  explicit OnnxBuilder(std::int64_t opset = 13) {
    model_.set_ir_version(8);
    model_.set_producer_name("dlsim-test");
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    graph().set_name("test");
  }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  // `dims` with the batch first; kBatch makes a dimension symbolic, named `symbol`.
  void input(const std::string& name, const Ints& dims, int elem = onnx::TensorProto::FLOAT,
             const std::string& symbol = "N") {
    auto* t = graph().add_input();
    t->set_name(name);
    auto* tensor = t->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(elem);
    auto* shape = tensor->mutable_shape();
    for (auto d : dims) {
      auto* dim = shape->add_dim();
      if (d == kBatch)
        dim->set_dim_param(symbol);
      else
        dim->set_dim_value(d);
    }
  }
  void weight(const std::string& name, const Ints& dims) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
  }
  void int64s(const std::string& name, const Ints& values) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    for (auto v : values) t->add_int64_data(v);
  }
  void scalar(const std::string& name, float value) {
    auto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(value);
  }
  NodeRef node(const std::string& op, const std::string& name,
               const std::vector<std::string>& inputs, std::vector<std::string> outputs = {}) {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& in : inputs) n->add_input(in);
    if (outputs.empty()) outputs = {name};
    for (const auto& out : outputs) n->add_output(out);
    return NodeRef{n};
  }
  void output(const std::string& name) { graph().add_output()->set_name(name); }

  std::string save(const TempDir& dir, const std::string& file) const {
    const std::string path = dir.file(file);
    std::ofstream out(path, std::ios::binary);
    REQUIRE(model_.SerializeToOstream(&out));
    return path;
  }

 private:
  onnx::ModelProto model_;
};

// The message of the InputError that importing `path` raises.
std::string import_error(const std::string& path) {
  try {
    import_onnx(path);
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("importing " << path << " raised no InputError");
  return {};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const Layer& layer_named(const LayerGraph& g, const std::string& name) {
  const auto v = g.find(name);
  REQUIRE_MESSAGE(v.has_value(), "no layer '" << name << "'");
  return g.layer(*v);
}

// The last layer in topological order: the model's output for these single-chain models.
const Layer& last_layer(const LayerGraph& g) { return g.layer(g.order().back()); }

// ---- (a) a small CNN with hand-computed counts ----

TEST_CASE(
    "a conv-bn-relu-pool-conv-relu-gap-flatten-gemm model imports with exact params and "
    "MACs") {
  TempDir dir;
  OnnxBuilder b;
  b.input("image", {kBatch, 3, 32, 32});
  b.weight("conv1.w", {16, 3, 3, 3});
  b.weight("conv1.b", {16});
  b.node("Conv", "conv1", {"image", "conv1.w", "conv1.b"})
      .ints("kernel_shape", {3, 3})
      .ints("pads", {1, 1, 1, 1})
      .ints("strides", {1, 1});
  for (const char* t : {"bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"}) b.weight(t, {16});
  b.node("BatchNormalization", "bn1", {"conv1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"})
      .f("epsilon", 1e-5f);
  b.node("Relu", "relu1", {"bn1"});
  b.node("MaxPool", "pool1", {"relu1"}).ints("kernel_shape", {2, 2}).ints("strides", {2, 2});
  b.weight("conv2.w", {32, 16, 3, 3});
  b.node("Conv", "conv2", {"pool1", "conv2.w"}).ints("pads", {1, 1, 1, 1});
  b.node("Relu", "relu2", {"conv2"});
  b.node("GlobalAveragePool", "gap", {"relu2"});
  b.node("Flatten", "flat", {"gap"}).i("axis", 1);
  b.weight("fc.w", {10, 32});
  b.weight("fc.b", {10});
  b.node("Gemm", "fc", {"flat", "fc.w", "fc.b"}).i("transB", 1);
  b.output("fc");
  const LayerGraph g = import_onnx(b.save(dir, "cnn.onnx"));

  REQUIRE(g.size() == 10);  // the input and one layer per node
  CHECK(g.name() == "cnn");
  CHECK(layer_named(g, "image").output.shape == Shape{3, 32, 32});
  CHECK(layer_named(g, "conv1").op->kind() == "conv2d");
  CHECK(layer_named(g, "conv1").output.shape == Shape{16, 32, 32});
  CHECK(layer_named(g, "pool1").output.shape == Shape{16, 16, 16});
  CHECK(layer_named(g, "conv2").output.shape == Shape{32, 16, 16});
  CHECK(layer_named(g, "gap").output.shape == Shape{32, 1, 1});
  CHECK(layer_named(g, "flat").output.shape == Shape{32});
  CHECK(layer_named(g, "fc").op->kind() == "linear");
  CHECK(layer_named(g, "fc").output.shape == Shape{10});

  const std::int64_t conv1_params = 16 * 3 * 3 * 3 + 16;   // 448
  const std::int64_t bn1_params = 2 * 16;                  // scale and shift; stats are buffers
  const std::int64_t conv2_params = 32 * 16 * 3 * 3;       // 4608, no bias
  const std::int64_t fc_params = 10 * 32 + 10;             // 330
  const double conv1_macs = 16.0 * 32 * 32 * (3 * 3 * 3);  // outputs x (C_in k k)
  const double conv2_macs = 32.0 * 16 * 16 * (16 * 3 * 3);
  const double fc_macs = 10.0 * 32;
  const ModelStats s = analyze(g, 1, Precision::kFp32);
  CHECK(s.params == conv1_params + bn1_params + conv2_params + fc_params);
  CHECK(s.params == 5418);
  CHECK(s.forward_macs == conv1_macs + conv2_macs + fc_macs);
  CHECK(s.forward_macs == 1622336.0);
  CHECK(analyze(g, 8, Precision::kFp32).forward_macs == 8 * s.forward_macs);
}

// ---- (b) GoogLeNet: zoo -> ONNX -> dlsim ----

// Writes a zoo graph as ONNX the way a PyTorch export looks: one node per layer named like the
// layer, weights as dims-only initializers taken from Layer::params, attributes from the ops'
// attributes(). The loss layer is left out: ONNX exports are inference graphs.
void export_onnx(const LayerGraph& g, OnnxBuilder& b) {
  std::string last;
  for (auto v : g.order()) {
    const Layer& l = g.layer(v);
    const std::string kind = l.op->kind();
    const nlohmann::json a = l.op->attributes();
    std::vector<std::string> in;
    for (auto u : l.inputs) in.push_back(g.layer(u).name);
    auto pair = [&](const char* key) { return a.at(key).get<Ints>(); };
    auto pads = [&] {
      const Ints p = pair("padding");
      return Ints{p[0], p[1], p[0], p[1]};
    };
    auto add_weight = [&](std::size_t i, const std::string& suffix) {
      const std::string name = l.name + "." + suffix;
      b.weight(name, l.params.at(i).shape);
      in.push_back(name);
    };
    if (kind == "input") {
      Ints dims{kBatch};
      dims.insert(dims.end(), l.output.shape.begin(), l.output.shape.end());
      b.input(l.name, dims);
      continue;
    } else if (kind == "softmax_cross_entropy") {
      continue;
    } else if (kind == "conv2d") {
      add_weight(0, "weight");
      if (a.at("bias").get<bool>()) add_weight(1, "bias");
      b.node("Conv", l.name, in)
          .ints("kernel_shape", pair("kernel"))
          .ints("strides", pair("stride"))
          .ints("pads", pads())
          .ints("dilations", pair("dilation"))
          .i("group", a.at("groups").get<std::int64_t>());
    } else if (kind == "batchnorm") {
      add_weight(0, "weight");
      add_weight(1, "bias");
      add_weight(0, "running_mean");
      add_weight(0, "running_var");
      b.node("BatchNormalization", l.name, in).f("epsilon", a.at("eps").get<float>());
    } else if (kind == "relu") {
      b.node("Relu", l.name, in);
    } else if (kind == "maxpool") {
      b.node("MaxPool", l.name, in)
          .ints("kernel_shape", pair("kernel"))
          .ints("strides", pair("stride"))
          .ints("pads", pads())
          .ints("dilations", pair("dilation"))
          .i("ceil_mode", a.at("ceil_mode").get<bool>());
    } else if (kind == "avgpool") {
      b.node("AveragePool", l.name, in)
          .ints("kernel_shape", pair("kernel"))
          .ints("strides", pair("stride"))
          .ints("pads", pads())
          .i("ceil_mode", a.at("ceil_mode").get<bool>())
          .i("count_include_pad", a.at("count_include_pad").get<bool>());
    } else if (kind == "global_avgpool" ||
               (kind == "adaptive_avgpool" && pair("output") == Ints{1, 1})) {
      b.node("GlobalAveragePool", l.name, in);
    } else if (kind == "concat") {
      const auto axis = a.at("axis").get<std::int64_t>();
      b.node("Concat", l.name, in).i("axis", axis >= 0 ? axis + 1 : axis);
    } else if (kind == "flatten") {
      b.node("Flatten", l.name, in).i("axis", 1);
    } else if (kind == "dropout") {
      b.scalar(l.name + ".ratio", a.at("p").get<float>());
      in.push_back(l.name + ".ratio");
      b.node("Dropout", l.name, in);
    } else if (kind == "linear") {
      add_weight(0, "weight");
      if (a.at("bias").get<bool>()) add_weight(1, "bias");
      b.node("Gemm", l.name, in).i("transB", 1);
    } else {
      FAIL("the test exporter has no ONNX node for " << kind);
    }
    last = l.name;
  }
  b.output(last);
}

TEST_CASE("GoogLeNet exported from the zoo to ONNX imports with the zoo's params and MACs") {
  const LayerGraph zoo = load_model("googlenet");
  TempDir dir;
  OnnxBuilder b;
  export_onnx(zoo, b);
  const LayerGraph g = import_onnx(b.save(dir, "googlenet.onnx"));

  const ModelStats zs = analyze(zoo, 1, Precision::kFp32);
  const ModelStats s = analyze(g, 1, Precision::kFp32);
  CHECK(zs.params == 6624904);
  CHECK(s.params == 6624904);
  CHECK(s.forward_macs == zs.forward_macs);
  CHECK(s.forward_macs > 1.4e9);  // about 1.5 GMAC at 224x224

  // Layer by layer: same names, kinds, shapes and parameter tensors; only the loss is missing.
  CHECK(g.size() == zoo.size() - 1);
  for (auto v : g.order()) {
    const Layer& l = g.layer(v);
    CAPTURE(l.name);
    const Layer& z = layer_named(zoo, l.name);
    CHECK(l.op->kind() == (z.op->kind() == "adaptive_avgpool" ? "global_avgpool" : z.op->kind()));
    CHECK(l.output.shape == z.output.shape);
    REQUIRE(l.params.size() == z.params.size());
    for (std::size_t i = 0; i < l.params.size(); ++i) CHECK(l.params[i].shape == z.params[i].shape);
  }
  CHECK(layer_named(g, "dropout").op->attributes().at("p").get<double>() ==
        dlsim_test::approx(0.2));
}

// ---- (c) Debian's ONNX test data (PyTorch 0.3 exports and ONNX node tests) ----

struct TestModel {
  const char* dir;  // under kTestData
  const char* op;   // the dlsim kind of the last layer
  std::int64_t params;
  Shape output;  // per sample
};

// Per-sample output dims the file itself records for its first graph output.
Shape recorded_output(const std::string& path) {
  onnx::ModelProto m;
  std::ifstream in(path, std::ios::binary);
  REQUIRE(m.ParseFromIstream(&in));
  Shape out;
  const auto& dims = m.graph().output(0).type().tensor_type().shape().dim();
  for (int i = 1; i < dims.size(); ++i) out.push_back(dims[i].dim_value());
  return out;
}

TEST_CASE("PyTorch-exported test models import with hand-checked params and output shapes" *
          doctest::skip(!fs::exists(kTestData))) {
  const std::vector<TestModel> models = {
      // 4 filters 3x3x2 over 3 channels + bias; [3, 7, 5] -> [4, 5, 4]
      {"pytorch-converted/test_Conv2d", "conv2d", 4 * 3 * 3 * 2 + 4, {4, 5, 4}},
      // 2 groups: each of 6 filters sees 4/2 channels; [4, 6, 5] -> [6, 4, 4]
      {"pytorch-converted/test_Conv2d_groups", "conv2d", 6 * 2 * 3 * 2 + 6, {6, 4, 4}},
      // depthwise 3x3, padding 1: [4, 6, 6] keeps its size
      {"pytorch-converted/test_Conv2d_depthwise_padded", "conv2d", 4 * 1 * 3 * 3 + 4, {4, 6, 6}},
      {"pytorch-converted/test_AvgPool2d", "avgpool", 0, {3, 3, 3}},  // 2x2 stride 2 on 6x6
      {"pytorch-converted/test_BatchNorm2d_eval", "batchnorm", 2 * 3, {3, 6, 6}},
      {"pytorch-converted/test_MaxPool2d", "maxpool", 0, {3, 4, 4}},  // 3x3 s2 p1: (7+2-3)/2+1
      // kernel 60x80, dilation 10, stride 10, pads 10/20 on 1000x1000:
      // (1000 + 20 - 590 - 1) / 10 + 1 = 43, (1000 + 40 - 790 - 1) / 10 + 1 = 25
      {"pytorch-converted/test_MaxPool2d_stride_padding_dilation", "maxpool", 0, {1, 43, 25}},
      {"pytorch-converted/test_Linear", "linear", 8 * 10 + 8, {8}},  // Gemm, transB
      // Transpose of the weight folded into MatMul: linear without bias
      {"pytorch-converted/test_Linear_no_bias", "linear", 8 * 10, {8}},
      {"pytorch-converted/test_Embedding", "embedding", 4 * 3, {4, 3}},  // Gather from [4, 3]
      {"pytorch-converted/test_ReLU", "relu", 0, {3, 4, 5}},
      {"pytorch-converted/test_Sigmoid", "sigmoid", 0, {3, 4, 5}},
      {"pytorch-converted/test_Tanh", "tanh", 0, {3, 4, 5}},
      {"pytorch-converted/test_Softmax", "softmax", 0, {20}},
  };
  for (const auto& m : models) {
    CAPTURE(m.dir);
    const std::string path = (kTestData / m.dir / "model.onnx").string();
    const LayerGraph g = import_onnx(path);
    CHECK(g.size() == 2);  // the data input and one layer
    CHECK(last_layer(g).op->kind() == m.op);
    CHECK(analyze(g, 1, Precision::kFp32).params == m.params);
    CHECK(last_layer(g).output.shape == m.output);
    CHECK(last_layer(g).output.shape == recorded_output(path));
  }
}

TEST_CASE("test data: conv MACs are outputs x kernel volume per group" *
          doctest::skip(!fs::exists(kTestData))) {
  const auto conv = import_onnx((kTestData / "pytorch-converted/test_Conv2d/model.onnx").string());
  CHECK(analyze(conv, 1, Precision::kFp32).forward_macs == 4.0 * 5 * 4 * (3 * 3 * 2));
  const auto groups =
      import_onnx((kTestData / "pytorch-converted/test_Conv2d_groups/model.onnx").string());
  CHECK(analyze(groups, 2, Precision::kFp32).forward_macs == 2 * 6.0 * 4 * 4 * (2 * 3 * 2));
}

TEST_CASE("test data: models outside dlsim's operators are InputErrors naming node and op" *
          doctest::skip(!fs::exists(kTestData))) {
  auto error = [](const char* dir) {
    return import_error((kTestData / dir / "model.onnx").string());
  };
  const std::string lstm = error("node/test_lstm_defaults");
  CHECK_MESSAGE(contains(lstm, "(op LSTM): operator cannot be mapped to a dlsim layer"), lstm);
  CHECK_MESSAGE(contains(lstm, "test_lstm_defaults/model.onnx: node '"), lstm);
  const std::string conv1d = error("pytorch-converted/test_Conv1d");
  CHECK_MESSAGE(contains(conv1d, "(op Conv)"), conv1d);
  CHECK_MESSAGE(contains(conv1d, "only 2-D convolution"), conv1d);
  const std::string pool1d = error("pytorch-converted/test_AvgPool1d");  // Unsqueeze first
  CHECK_MESSAGE(contains(pool1d, "(op Unsqueeze): operator cannot be mapped"), pool1d);
}

// ---- (d) unmappable operators ----

TEST_CASE("an operator without a dlsim layer is an InputError naming the op type and node") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 5, 16});
  b.weight("W", {1, 64, 16});
  b.weight("R", {1, 64, 16});
  b.node("LSTM", "n7", {"x", "W", "R"}, {"y"}).i("hidden_size", 16);
  b.output("y");
  const std::string path = b.save(dir, "model.onnx");
  CHECK(import_error(path) ==
        path + ": node 'n7' (op LSTM): operator cannot be mapped to a dlsim layer");
}

TEST_CASE("an operator of another domain is unmappable and named with its domain") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 8});
  b.node("Relu", "r", {"x"}).proto->set_domain("com.example");
  const std::string msg = import_error(b.save(dir, "m.onnx"));
  CHECK_MESSAGE(contains(msg, "node 'r' (op com.example.Relu): operator cannot be mapped"), msg);
}

// ---- (e) files that are not ONNX models ----

TEST_CASE("a file that is not an ONNX protobuf is an InputError naming the file") {
  TempDir dir;
  const std::string text = dir.file("text.onnx");
  std::ofstream(text) << "name: not really onnx\nlayers: []\n";
  CHECK(contains(import_error(text), text + ": not an ONNX model"));

  const std::string empty = dir.file("empty.onnx");
  { std::ofstream create(empty); }
  CHECK(contains(import_error(empty), empty + ": not an ONNX model"));

  // A truncated model: the first half of a valid file.
  OnnxBuilder b;
  b.input("x", {kBatch, 3, 8, 8});
  b.weight("w", {4, 3, 3, 3});
  b.node("Conv", "c", {"x", "w"});
  std::ifstream whole(b.save(dir, "whole.onnx"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(whole)), {});
  const std::string half = dir.file("half.onnx");
  std::ofstream(half, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CHECK(contains(import_error(half), half + ": not an ONNX model"));

  CHECK(contains(import_error(dir.file("missing.onnx")), "cannot open file"));
}

TEST_CASE("load_model reads a .onnx path through the importer") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 3, 8, 8});
  b.node("Relu", "r", {"x"});
  const LayerGraph g = load_model(b.save(dir, "tiny.onnx"));
  CHECK(g.size() == 2);
  CHECK(g.name() == "tiny");
  CHECK_THROWS_AS(load_model(b.save(dir, "tiny2.onnx"), {{"seq_len", "4"}}), InputError);
}

// ---- mapping rules ----

TEST_CASE("asymmetric Conv pads are an InputError but auto_pad SAME with stride 1 is symmetric") {
  TempDir dir;
  {
    OnnxBuilder b;
    b.input("x", {kBatch, 3, 8, 8});
    b.weight("w", {4, 3, 3, 3});
    b.node("Conv", "c", {"x", "w"}).ints("pads", {0, 0, 1, 1}).ints("strides", {2, 2});
    const std::string msg = import_error(b.save(dir, "asym.onnx"));
    CHECK_MESSAGE(contains(msg, "node 'c' (op Conv): asymmetric pads"), msg);
  }
  {
    OnnxBuilder b;
    b.input("x", {kBatch, 3, 8, 8});
    b.weight("w", {4, 3, 5, 5});
    auto n = b.node("Conv", "c", {"x", "w"});
    auto* a = n.proto->add_attribute();
    a->set_name("auto_pad");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s("SAME_UPPER");
    const LayerGraph g = import_onnx(b.save(dir, "same.onnx"));
    CHECK(layer_named(g, "c").output.shape == Shape{4, 8, 8});
    CHECK(layer_named(g, "c").op->attributes().at("padding") == nlohmann::json{2, 2});
  }
}

TEST_CASE("only the batch dimension may be symbolic: another symbolic dimension names the input") {
  TempDir dir;
  OnnxBuilder b;
  b.input("tokens", {kBatch, kBatch}, onnx::TensorProto::INT64, "seq");
  b.weight("table", {100, 8});
  b.node("Gather", "emb", {"table", "tokens"});
  const std::string msg = import_error(b.save(dir, "m.onnx"));
  CHECK_MESSAGE(contains(msg, "graph input 'tokens': dimension 1 is symbolic ('seq')"), msg);
}

TEST_CASE("int64 inputs and Gather from a 2-D weight become an embedding") {
  TempDir dir;
  OnnxBuilder b;
  b.input("tokens", {kBatch, 12}, onnx::TensorProto::INT64);
  b.weight("table", {100, 8});
  b.node("Gather", "emb", {"table", "tokens"});
  const LayerGraph g = import_onnx(b.save(dir, "m.onnx"));
  CHECK(layer_named(g, "tokens").output.dtype == DType::kInt64);
  CHECK(layer_named(g, "emb").op->kind() == "embedding");
  CHECK(layer_named(g, "emb").output.shape == Shape{12, 8});
  CHECK(analyze(g, 1, Precision::kFp32).params == 800);
}

TEST_CASE(
    "MatMul with a weight is a linear layer whose bias a following Add of a bias vector turns on") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 6, 32});
  b.weight("w", {32, 64});
  b.weight("bias", {64});
  b.node("MatMul", "proj", {"x", "w"});
  b.node("Add", "proj_bias", {"proj", "bias"});
  b.node("Relu", "act", {"proj_bias"});
  const LayerGraph g = import_onnx(b.save(dir, "m.onnx"));
  CHECK(g.size() == 3);  // x, proj, act: the Add is folded
  CHECK(layer_named(g, "proj").op->attributes().at("bias") == true);
  CHECK(layer_named(g, "proj").output.shape == Shape{6, 64});
  CHECK(layer_named(g, "act").inputs == std::vector<std::size_t>{*g.find("proj")});
  CHECK(analyze(g, 1, Precision::kFp32).params == 32 * 64 + 64);
}

TEST_CASE("an Add of a constant to a MatMul read elsewhere too passes the activation through") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 32});
  b.weight("w", {32, 64});
  b.weight("shift", {1});
  b.node("MatMul", "proj", {"x", "w"});
  b.node("Add", "shifted", {"proj", "shift"});
  b.node("Add", "sum", {"proj", "shifted"});
  const LayerGraph g = import_onnx(b.save(dir, "m.onnx"));
  CHECK(layer_named(g, "proj").op->attributes().at("bias") == false);
  CHECK(!g.find("shifted").has_value());
  CHECK(layer_named(g, "sum").op->kind() == "add");
  CHECK(analyze(g, 1, Precision::kFp32).params == 32 * 64);
}

TEST_CASE("an Add of a constant with several non-unit dims (a learnable table) is an error") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 6, 32});
  b.weight("pos", {6, 32});
  b.node("Add", "add_pos", {"x", "pos"});
  const std::string msg = import_error(b.save(dir, "m.onnx"));
  CHECK_MESSAGE(contains(msg, "node 'add_pos' (op Add): operator cannot be mapped"), msg);
  CHECK_MESSAGE(contains(msg, "'pos' of dims [6, 32]"), msg);
}

TEST_CASE("Concat axes drop the batch and concatenating along the batch is an error") {
  TempDir dir;
  auto model = [&](std::int64_t axis) {
    OnnxBuilder b;
    b.input("a", {kBatch, 3, 4, 4});
    b.input("b", {kBatch, 5, 4, 4});
    b.node("Concat", "cat", {"a", "b"}).i("axis", axis);
    return b.save(dir, "cat" + std::to_string(axis + 10) + ".onnx");
  };
  const LayerGraph g = import_onnx(model(1));
  CHECK(layer_named(g, "cat").output.shape == Shape{8, 4, 4});
  CHECK(layer_named(g, "cat").op->attributes().at("axis") == 0);
  CHECK(layer_named(import_onnx(model(-3)), "cat").output.shape == Shape{8, 4, 4});
  const std::string msg = import_error(model(0));
  CHECK_MESSAGE(contains(msg, "node 'cat' (op Concat)"), msg);
  CHECK_MESSAGE(contains(msg, "axis 0 is the batch dimension"), msg);
}

TEST_CASE("Reshape to [batch, -1] is a flatten and any other target shape is an error") {
  TempDir dir;
  auto model = [&](const Ints& shape, const std::string& file) {
    OnnxBuilder b;
    b.input("x", {kBatch, 16, 5, 5});
    b.int64s("shape", shape);
    b.node("Reshape", "view", {"x", "shape"});
    return b.save(dir, file);
  };
  CHECK(layer_named(import_onnx(model({0, -1}, "a.onnx")), "view").output.shape == Shape{400});
  CHECK(layer_named(import_onnx(model({-1, 400}, "b.onnx")), "view").op->kind() == "flatten");
  const std::string rank3 = import_error(model({0, 4, -1}, "c.onnx"));
  CHECK_MESSAGE(contains(rank3, "node 'view' (op Reshape)"), rank3);
  CHECK_MESSAGE(contains(rank3, "Reshape to [0, 4, -1]"), rank3);
  const std::string wrong = import_error(model({-1, 300}, "d.onnx"));
  CHECK_MESSAGE(contains(wrong, "Reshape to [N, 300] of an input of 400 elements"), wrong);
}

TEST_CASE("Flatten maps only with axis 1") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 2, 3, 4});
  b.node("Flatten", "f", {"x"}).i("axis", 2);
  const std::string msg = import_error(b.save(dir, "m.onnx"));
  CHECK_MESSAGE(contains(msg, "node 'f' (op Flatten)"), msg);
  CHECK_MESSAGE(contains(msg, "axis 2"), msg);
}

TEST_CASE("Identity is no layer and Dropout reads its ratio from the attribute or the input") {
  TempDir dir;
  {
    OnnxBuilder b(13);
    b.input("x", {kBatch, 10});
    b.node("Identity", "same", {"x"});
    b.scalar("ratio", 0.25f);
    b.node("Dropout", "drop", {"same", "ratio"});
    const LayerGraph g = import_onnx(b.save(dir, "opset13.onnx"));
    CHECK(g.size() == 2);
    CHECK(!g.find("same").has_value());
    CHECK(layer_named(g, "drop").op->attributes().at("p").get<double>() == 0.25);
  }
  {
    OnnxBuilder b(9);
    b.input("x", {kBatch, 10});
    b.node("Dropout", "drop", {"x"}).f("ratio", 0.1f);
    const LayerGraph g = import_onnx(b.save(dir, "opset9.onnx"));
    CHECK(layer_named(g, "drop").op->attributes().at("p").get<double>() == dlsim_test::approx(0.1));
  }
}

TEST_CASE("Softmax's axis default depends on the opset and loses the batch") {
  TempDir dir;
  for (std::int64_t opset : {11, 13}) {
    OnnxBuilder b(opset);
    b.input("x", {kBatch, 4, 10});
    b.node("Softmax", "sm", {"x"});
    const LayerGraph g = import_onnx(b.save(dir, fmt::format("sm{}.onnx", opset)));
    CHECK(layer_named(g, "sm").op->attributes().at("axis") == (opset < 13 ? 0 : -1));
  }
}

TEST_CASE("a weight whose dims do not fit the input is an InputError naming the node") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 3, 8, 8});
  b.weight("w", {4, 5, 3, 3});  // expects 5 input channels
  b.node("Conv", "c", {"x", "w"});
  const std::string msg = import_error(b.save(dir, "m.onnx"));
  CHECK_MESSAGE(contains(msg, "node 'c' (op Conv): weight 'w' has dims [4, 5, 3, 3]"), msg);
}

TEST_CASE("unnamed nodes take their output's name and repeated names are made unique") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 8});
  b.node("Relu", "", {"x"}, {"y"});
  b.node("Relu", "act", {"y"}, {"z1"});
  b.node("Relu", "act", {"z1"}, {"z2"});
  const LayerGraph g = import_onnx(b.save(dir, "m.onnx"));
  CHECK(g.find("y").has_value());
  CHECK(g.find("act").has_value());
  CHECK(g.find("act_1").has_value());
  CHECK(layer_named(g, "act_1").inputs == std::vector<std::size_t>{*g.find("act")});
}

TEST_CASE("a node reading an unmodelled second output is an error naming where it came from") {
  TempDir dir;
  OnnxBuilder b;
  b.input("x", {kBatch, 3, 8, 8});
  b.node("MaxPool", "pool", {"x"}, {"y", "idx"}).ints("kernel_shape", {2, 2});
  b.node("Relu", "r", {"idx"});
  const std::string msg = import_error(b.save(dir, "m.onnx"));
  CHECK_MESSAGE(contains(msg,
                         "node 'r' (op Relu): input 'idx' is output 2 of node 'pool' (op "
                         "MaxPool), which dlsim does not model"),
                msg);
}

}  // namespace
}  // namespace dlsim::model
