#pragma once
// The one typed reader for dlsim's YAML files. Every key read is marked; finish() rejects any
// key nobody read, naming it, the file and the line. Values may be parameter references
// ("$name") resolved through a ParamScope, so a block defined once can be instantiated with
// different arguments while errors still point at the line that was written.

#include <yaml-cpp/yaml.h>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace dlsim {

// Named values visible to "$name" references: a block's arguments, then the model's parameters.
class ParamScope {
 public:
  explicit ParamScope(std::shared_ptr<const ParamScope> parent = nullptr)
      : parent_(std::move(parent)) {}
  // Binds `name`, replacing an earlier binding. (YAML::Node's operator= would write through
  // to the node the old binding shares, so the entry is replaced, never assigned.)
  void set(const std::string& name, YAML::Node value) {
    values_.erase(name);
    values_.emplace(name, std::move(value));
  }
  // The value bound to `name` here or in an enclosing scope; nullopt when unbound.
  std::optional<YAML::Node> find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::shared_ptr<const ParamScope> parent_;
  std::map<std::string, YAML::Node> values_;
};

class ConfigNode {
 public:
  ConfigNode(YAML::Node node, std::shared_ptr<const std::string> file,
             std::shared_ptr<const ParamScope> scope = nullptr, std::string path = {});

  // Reads `file`; malformed YAML becomes an InputError naming the file and line.
  static ConfigNode load_file(const std::string& file);
  static ConfigNode load_string(const std::string& text, const std::string& name);

  bool is_map() const { return resolved().IsMap(); }
  bool is_sequence() const { return resolved().IsSequence(); }
  bool is_scalar() const { return resolved().IsScalar(); }
  bool is_null() const { return !node_ || node_.IsNull(); }

  bool has(std::string_view key) const;
  // Required key of a mapping; an InputError names the missing key.
  template <class T>
  T get(std::string_view key) const {
    return child(key).as<T>();
  }
  // Optional key; an absent key still counts as known for "did you mean" suggestions.
  template <class T>
  T get_or(std::string_view key, T fallback) const {
    mark_used(key);
    return has(key) ? child(key).as<T>() : fallback;
  }
  ConfigNode child(std::string_view key) const;
  std::optional<ConfigNode> maybe_child(std::string_view key) const;
  // Mark a key as read without reading it (it is handled elsewhere).
  void mark_used(std::string_view key) const;

  // Elements of a sequence (a scalar is rejected).
  std::vector<ConfigNode> elements() const;
  // Keys of a mapping, in file order.
  std::vector<std::string> keys() const;

  // Conversion of this node; errors name the field and its line.
  template <class T>
  T as() const;
  // A scalar or a sequence of scalars as a list: "3" -> {3}, "[1, 7]" -> {1, 7}.
  std::vector<std::int64_t> as_int_list() const;

  // Rejects keys of this mapping that were never read, suggesting the nearest allowed key.
  void finish(const std::vector<std::string>& allowed_hint = {}) const;

  SourceLocation where() const;
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }
  [[noreturn]] void fail(std::string_view problem) const;

  // The underlying node after "$name" substitution (for passing through unchanged).
  YAML::Node resolved() const;
  const std::shared_ptr<const ParamScope>& scope() const { return scope_; }
  ConfigNode with_scope(std::shared_ptr<const ParamScope> scope) const;

 private:
  std::string scalar_text() const;

  YAML::Node node_;
  std::shared_ptr<const std::string> file_;
  std::shared_ptr<const ParamScope> scope_;
  std::string path_;  // dotted path of this node inside the file, for messages
  std::shared_ptr<std::set<std::string>> used_;
};

template <>
std::string ConfigNode::as<std::string>() const;
template <>
std::int64_t ConfigNode::as<std::int64_t>() const;
template <>
int ConfigNode::as<int>() const;
template <>
double ConfigNode::as<double>() const;
template <>
bool ConfigNode::as<bool>() const;

}  // namespace dlsim
