#include "model/loader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#ifdef DLSIM_HAVE_ONNX
#include "model/onnx_import.hpp"
#endif

namespace dlsim::model {
namespace {

const std::set<std::string> kEntryKeys = {"name", "op", "block", "input", "inputs", "if"};

struct BlockDef {
  ConfigNode layers;
  std::vector<std::pair<std::string, std::optional<YAML::Node>>> params;  // nullopt: required
};

struct Scope;

// A name written in a layer entry, looked up in the list it was written in.
struct Ref {
  Scope* scope;
  std::string name;
  SourceLocation at;
};

// What a name in a list stands for: a layer, or a name in another list (a block's last entry,
// the last instance of a repeat).
struct Target {
  std::optional<LayerGraph::Vertex> vertex;
  Scope* scope = nullptr;
  std::string name;
};

struct Scope {
  std::string prefix;              // prepended to layer names: "layer1.0."
  std::optional<Ref> block_input;  // what "in" stands for inside a block
  std::unordered_map<std::string, Target> names;
  std::set<std::string> disabled;  // entries whose "if" was false
};

class Loader {
 public:
  Loader(LayerGraph& graph, std::shared_ptr<ParamScope> model_scope)
      : graph_(graph), model_scope_(std::move(model_scope)) {}

  void read_blocks(const ConfigNode& blocks) {
    for (const auto& name : blocks.keys()) {
      const ConfigNode b = blocks.child(name);
      b.get_or<std::string>("description", "");
      BlockDef def{b.child("layers"), {}};
      if (!def.layers.is_sequence()) def.layers.fail("expected a list of layers");
      if (auto params = b.maybe_child("params")) {
        for (const auto& p : params->keys()) {
          const ConfigNode value = params->child(p);
          if (p == "in" || kEntryKeys.count(p) || p == "repeat" || p == "first") {
            value.fail(fmt::format("'{}' is reserved and cannot name a block parameter", p));
          }
          def.params.emplace_back(
              p, value.is_null() ? std::nullopt : std::optional<YAML::Node>(value.resolved()));
        }
      }
      b.finish();
      blocks_.emplace(name, std::move(def));
    }
  }

  // Instantiates the entries of `list` into `scope`; returns the name of the last entry.
  std::optional<std::string> instantiate(const ConfigNode& list, Scope& scope, bool in_block) {
    if (!list.is_sequence()) list.fail("expected a list of layers");
    std::optional<std::string> prev;
    if (in_block) prev = "in";
    std::size_t index = 0;
    for (const ConfigNode& e : list.elements()) {
      ++index;
      if (!e.is_map())
        e.fail("a layer entry must be a mapping such as {name: conv1, op: conv2d, ...}");
      const bool has_op = e.has("op");
      const bool has_block = e.has("block");
      if (has_op == has_block) e.fail("a layer entry needs exactly one of 'op' or 'block'");
      const std::string what = e.get<std::string>(has_op ? "op" : "block");
      const std::string name = e.get_or<std::string>("name", fmt::format("{}{}", what, index));
      if (name.empty() || name == "in") e.child("name").fail("'in' and '' cannot name a layer");
      if (scope.names.count(name) || scope.disabled.count(name)) {
        e.fail(fmt::format("the name '{}' is used twice in this list", name));
      }
      if (e.has("if") && !e.get<bool>("if")) {
        for (const auto& k : e.keys()) e.mark_used(k);
        scope.disabled.insert(name);
        continue;
      }
      e.mark_used("if");

      std::vector<Ref> refs;
      if (e.has("input") && e.has("inputs")) e.fail("give either 'input' or 'inputs', not both");
      if (e.has("input")) {
        refs.push_back(Ref{&scope, e.get<std::string>("input"), e.child("input").where()});
      } else if (e.has("inputs")) {
        for (const auto& r : e.child("inputs").elements()) {
          refs.push_back(Ref{&scope, r.as<std::string>(), r.where()});
        }
      } else if (prev && !(has_op && what == "input")) {
        refs.push_back(Ref{&scope, *prev, e.where()});
      }
      e.mark_used("input");
      e.mark_used("inputs");

      if (has_op) {
        add_op(e, what, name, refs, scope);
      } else {
        add_block(e, what, name, refs, scope);
      }
      prev = name;
    }
    return prev;
  }

  // Connects every layer to its inputs once all names are known; ties weights.
  void resolve() {
    for (const auto& [v, refs] : pending_inputs_) {
      for (const Ref& r : refs) graph_.connect(lookup(r), v);
    }
    for (const auto& [v, r] : pending_ties_) graph_.tie_weight(v, lookup(r));
  }

  std::deque<Scope> scopes;

 private:
  void add_op(const ConfigNode& e, const std::string& kind, const std::string& name,
              std::vector<Ref> refs, Scope& scope) {
    const auto& entry = op_registry().at(kind, e.child("op").where());
    std::shared_ptr<Op> op = entry.make(e);
    e.finish();
    if (kind != "input" && refs.empty()) {
      e.fail(fmt::format("layer '{}' has no input: give 'input:' or put it after another layer",
                         name));
    }
    const auto v = graph_.add_layer(scope.prefix + name, std::move(op), e.where());
    scope.names[name] = Target{v, nullptr, {}};
    pending_inputs_.emplace_back(v, std::move(refs));
    if (e.has("tied_to")) {
      pending_ties_.emplace_back(
          v, Ref{&scope, e.get<std::string>("tied_to"), e.child("tied_to").where()});
    }
  }

  void add_block(const ConfigNode& e, const std::string& block, const std::string& name,
                 const std::vector<Ref>& refs, Scope& scope) {
    auto it = blocks_.find(block);
    if (it == blocks_.end()) {
      std::vector<std::string> known;
      for (const auto& [k, d] : blocks_) known.push_back(k);
      e.child("block").fail(fmt::format("unknown block '{}'{}", block, did_you_mean(block, known)));
    }
    if (std::find(stack_.begin(), stack_.end(), block) != stack_.end()) {
      e.child("block").fail(fmt::format("block '{}' contains itself", block));
    }
    const BlockDef& def = it->second;
    if (refs.size() != 1) {
      e.fail(fmt::format("block '{}' takes exactly one input, got {}", block, refs.size()));
    }
    const bool repeated = e.has("repeat");
    const auto repeat = e.get_or<std::int64_t>("repeat", 1);
    if (repeat < 1) e.child("repeat").fail("must be at least 1");
    if (repeat > static_cast<std::int64_t>(kMaxLayers)) {
      e.child("repeat").fail(fmt::format("must be at most {}, got {}", kMaxLayers, repeat));
    }

    std::map<std::string, YAML::Node> args, first_args;
    std::vector<std::string> param_names;
    for (const auto& [p, fallback] : def.params) {
      param_names.push_back(p);
      if (e.has(p))
        args.emplace(p, e.child(p).resolved());
      else if (fallback)
        args.emplace(p, *fallback);
    }
    if (auto first = e.maybe_child("first")) {
      if (!repeated) first->fail("'first' needs 'repeat'");
      for (const auto& k : first->keys()) {
        if (std::find(param_names.begin(), param_names.end(), k) == param_names.end()) {
          first->child(k).fail(fmt::format("block '{}' has no parameter '{}'{}", block, k,
                                           did_you_mean(k, param_names)));
        }
        first_args.emplace(k, first->child(k).resolved());
      }
    }
    for (const auto& p : param_names) e.mark_used(p);
    e.mark_used("repeat");
    e.finish();
    for (const auto& p : param_names) {
      if (!args.count(p) && !(repeat == 1 && first_args.count(p))) {
        e.fail(fmt::format("block '{}' needs argument '{}'", block, p));
      }
    }

    std::string prev_instance;
    for (std::int64_t i = 0; i < repeat; ++i) {
      const std::string instance = repeated ? fmt::format("{}.{}", name, i) : name;
      auto params = std::make_shared<ParamScope>(model_scope_);
      for (const auto& [k, v] : args) params->set(k, v);
      if (i == 0) {
        for (const auto& [k, v] : first_args) params->set(k, v);
      }
      Scope& inner = scopes.emplace_back();
      inner.prefix = scope.prefix + instance + ".";
      inner.block_input = i == 0 ? refs.front() : Ref{&scope, prev_instance, e.where()};
      stack_.push_back(block);
      const auto last = instantiate(def.layers.with_scope(params), inner, true);
      stack_.pop_back();
      if (!last || inner.names.empty()) e.fail(fmt::format("block '{}' produced no layer", block));
      scope.names[instance] = Target{std::nullopt, &inner, *last};
      prev_instance = instance;
    }
    if (repeated) scope.names[name] = Target{std::nullopt, &scope, prev_instance};
  }

  LayerGraph::Vertex lookup(Ref r) {
    for (int hops = 0; hops < 10000; ++hops) {
      Scope& s = *r.scope;
      if (r.name == "in" && s.block_input) {
        r = *s.block_input;
        continue;
      }
      if (s.disabled.count(r.name)) {
        fail_at(r.at, "", fmt::format("refers to '{}', which its 'if' switched off", r.name));
      }
      auto it = s.names.find(r.name);
      if (it == s.names.end()) {
        std::vector<std::string> known;
        for (const auto& [k, t] : s.names) known.push_back(k);
        if (s.block_input) known.push_back("in");
        fail_at(
            r.at, "",
            fmt::format("no layer named '{}' in this list{}", r.name, did_you_mean(r.name, known)));
      }
      if (it->second.vertex) return *it->second.vertex;
      r = Ref{it->second.scope, it->second.name, r.at};
    }
    fail_at(r.at, "", fmt::format("the reference '{}' never reaches a layer", r.name));
  }

  LayerGraph& graph_;
  std::shared_ptr<ParamScope> model_scope_;
  std::map<std::string, BlockDef> blocks_;
  std::vector<std::string> stack_;
  std::vector<std::pair<LayerGraph::Vertex, std::vector<Ref>>> pending_inputs_;
  std::vector<std::pair<LayerGraph::Vertex, Ref>> pending_ties_;
};

}  // namespace

LayerGraph load_yaml_model(const ConfigNode& file_root, const ParamOverrides& overrides) {
  if (!file_root.is_map()) file_root.fail("a model file must be a mapping with name, layers, ...");
  auto model_scope = std::make_shared<ParamScope>();
  const ConfigNode root = file_root.with_scope(model_scope);

  LayerGraph graph(root.get<std::string>("name"));
  graph.description = root.get_or<std::string>("description", "");
  graph.source = root.get_or<std::string>("source", "");

  std::vector<std::string> param_names;
  if (auto params = root.maybe_child("params")) {
    for (const auto& p : params->keys()) {
      param_names.push_back(p);
      const ConfigNode value = params->child(p);
      // A parameter stands for one value in a layer's field ("channels: $width"), never for a
      // list or a mapping.
      if (!value.resolved().IsScalar()) value.fail("a model parameter must be a single value");
      model_scope->set(p, value.resolved());
    }
  }
  for (const auto& [key, value] : overrides) {
    if (std::find(param_names.begin(), param_names.end(), key) == param_names.end()) {
      fail_at({}, "set",
              fmt::format("model '{}' has no parameter '{}'{}{}", graph.name(), key,
                          did_you_mean(key, param_names),
                          param_names.empty()
                              ? " (it has none)"
                              : fmt::format(" (it has: {})", fmt::join(param_names, ", "))));
    }
    model_scope->set(key, YAML::Node(value));
  }

  // The file's own keys are checked before its layers are built: a misspelt 'params' would
  // otherwise surface as an unknown parameter deep in a layer.
  const auto blocks = root.maybe_child("blocks");
  const auto layers = root.child("layers");
  std::optional<SourceLocation> rules_at;
  if (const auto rules = root.maybe_child("parameter_names")) {
    rules_at = rules->where();
    for (const auto& r : rules->elements()) {
      LayerGraph::ParameterNameRule rule;
      rule.pattern = r.get<std::string>("match");
      rule.name = r.get<std::string>("name");
      r.finish();
      try {
        rule.re = std::regex(rule.pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        r.child("match").fail(fmt::format("not a regular expression: {}", e.what()));
      }
      graph.parameter_names.push_back(std::move(rule));
    }
  }
  root.finish({"name", "description", "source", "params", "blocks", "layers", "parameter_names"});
  try {
    Loader loader(graph, model_scope);
    if (blocks) loader.read_blocks(*blocks);
    Scope& top = loader.scopes.emplace_back();
    loader.instantiate(layers, top, false);
    loader.resolve();
    graph.finalize();
    if (rules_at) {
      // Two tensors under one name would be one parameter to the framework.
      std::map<std::string, std::string> named;
      for (std::size_t v = 0; v < graph.size(); ++v) {
        const auto& l = graph.layer(v);
        for (const auto& p : l.params) {
          if (p.tied) continue;
          const auto name = graph.parameter_name(l.name, p.name);
          const auto [it, added] = named.emplace(name, l.name + "." + p.name);
          if (!added) {
            fail_at(
                *rules_at, "parameter_names",
                fmt::format("'{}' and '{}.{}' both become '{}'", it->second, l.name, p.name, name));
          }
        }
      }
    }
  } catch (const InputError& e) {
    if (overrides.empty()) throw;
    // The model loads without the user's values: they are the cause, so the error names them
    // (with the place in the model file they broke) rather than only that file.
    const auto original = std::current_exception();
    try {
      load_yaml_model(file_root);
    } catch (const InputError&) {
      std::rethrow_exception(original);
    }
    std::vector<std::string> given;
    for (const auto& [key, value] : overrides) given.push_back(key + "=" + value);
    fail_at({}, "set",
            fmt::format("{} does not fit model '{}': {}", fmt::join(given, " "), graph.name(),
                        e.what()));
  }
  return graph;
}

const std::vector<ZooEntry>& zoo();  // defined in the generated zoo_data.cpp

std::vector<std::string> zoo_names() {
  std::vector<std::string> out;
  for (const auto& z : zoo()) out.push_back(z.name);
  return out;
}

LayerGraph load_model(const std::string& name_or_path, const ParamOverrides& overrides) {
  namespace fs = std::filesystem;
  const fs::path path(name_or_path);
  const bool looks_like_file = name_or_path.find('/') != std::string::npos ||
                               path.extension() == ".yaml" || path.extension() == ".yml" ||
                               path.extension() == ".onnx";
  if (!looks_like_file) {
    for (const auto& z : zoo()) {
      if (z.name == name_or_path) {
        return load_yaml_model(ConfigNode::load_string(z.text, z.path), overrides);
      }
    }
    fail_at({}, "model",
            fmt::format("unknown model '{}'{} (the zoo has: {}; or give a .yaml or .onnx file)",
                        name_or_path, did_you_mean(name_or_path, zoo_names()),
                        fmt::join(zoo_names(), ", ")));
  }
  if (std::error_code ec; !fs::exists(path, ec)) fail_at({name_or_path}, "--model", "no such file");
  if (path.extension() == ".onnx") {
#ifdef DLSIM_HAVE_ONNX
    if (!overrides.empty()) fail_at({name_or_path}, "--set", "ONNX models have no parameters");
    return import_onnx(name_or_path);
#else
    fail_at({name_or_path}, "--model",
            "this dlsim was built without ONNX support (configure with -DDLSIM_WITH_ONNX=ON)");
#endif
  }
  return load_yaml_model(ConfigNode::load_file(name_or_path), overrides);
}

}  // namespace dlsim::model
