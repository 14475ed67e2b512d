#include "common/config.hpp"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace dlsim {

std::optional<YAML::Node> ParamScope::find(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  return parent_ ? parent_->find(name) : std::nullopt;
}

std::vector<std::string> ParamScope::names() const {
  std::vector<std::string> out = parent_ ? parent_->names() : std::vector<std::string>{};
  for (const auto& [k, v] : values_) out.push_back(k);
  return out;
}

ConfigNode::ConfigNode(YAML::Node node, std::shared_ptr<const std::string> file,
                       std::shared_ptr<const ParamScope> scope, std::string path)
    : node_(std::move(node)),
      file_(std::move(file)),
      scope_(std::move(scope)),
      path_(std::move(path)),
      used_(std::make_shared<std::set<std::string>>()) {}

namespace {

// YAML gives a mapping's second copy of a key no meaning, and yaml-cpp keeps both and reads the
// first: a value set twice ("nodes: 16" and, further down, "nodes: 8") would be used without the
// second ever being read or checked. Every mapping of the file is checked once, at load.
// `seen`: the collections already checked, by their place in the text. An alias ("*a") is the
// anchored node again, at the anchor's place: checked once, so that aliases nested in aliases
// (a "billion laughs" file) cost their text's size, not their expansion's.
void refuse_duplicate_keys(const YAML::Node& node, const std::string& file,
                           std::set<std::pair<int, int>>& seen) {
  if (!node.IsSequence() && !node.IsMap()) return;
  if (!seen.insert({node.Mark().line, node.Mark().column}).second) return;
  if (node.IsSequence()) {
    for (const auto& item : node) refuse_duplicate_keys(item, file, seen);
    return;
  }
  std::vector<std::pair<YAML::Node, YAML::Node>> entries;  // (key, value) in file order
  for (const auto& kv : node) entries.emplace_back(kv.first, kv.second);
  // Mappings are small (tens of keys): pairwise is cheaper than building a set.
  for (std::size_t i = 1; i < entries.size(); ++i) {
    const auto& again = entries[i].first;
    if (!again.IsScalar()) continue;
    for (std::size_t j = 0; j < i; ++j) {
      const auto& first = entries[j].first;
      if (first.IsScalar() && first.Scalar() == again.Scalar()) {
        fail_at(
            {file, again.Mark().line + 1, again.Mark().column + 1},
            fmt::format("'{}'", again.Scalar()),
            fmt::format("given twice in one mapping (first at line {})", first.Mark().line + 1));
      }
    }
  }
  for (const auto& [key, value] : entries) refuse_duplicate_keys(value, file, seen);
}

// What one YAML document of a stream holds, as far as telling the documents apart needs: where
// its first node starts and whether it is nothing but a null.
class DocumentProbe : public YAML::EventHandler {
 public:
  YAML::Mark start = YAML::Mark::null_mark();
  YAML::Mark first_node = YAML::Mark::null_mark();
  bool only_null = true;

  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, true); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, false); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    node(mark, false);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(mark, false);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    node(mark, false);
  }
  void OnMapEnd() override {}

 private:
  bool seen_ = false;
  void node(const YAML::Mark& mark, bool null) {
    if (!seen_) first_node = mark;
    seen_ = true;
    only_null = only_null && null;
  }
};

// A file holds one YAML document: a second one ("---") would otherwise be dropped without a
// word. yaml-cpp 0.7's LoadAll cannot count them: on a token that no rule of its parser takes
// (a ',' outside a flow collection) it returns an empty document without moving past the token,
// again and again, until memory runs out (jbeder/yaml-cpp#1040, fixed upstream in #1319). Here
// the documents are read one at a time, and two empty documents in a row at the same place are
// that token.
void refuse_second_document(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentProbe first;
  DocumentProbe second;
  DocumentProbe third;
  if (!parser.HandleNextDocument(first) || !parser.HandleNextDocument(second)) return;
  const auto& mark = second.first_node;
  const SourceLocation at{name, mark.line + 1, mark.column + 1};
  if (second.only_null && parser.HandleNextDocument(third) && third.only_null &&
      third.first_node.pos == mark.pos) {
    const auto pos = static_cast<std::size_t>(std::max(mark.pos, 0));
    fail_at(at, "",
            pos < text.size() && std::isgraph(static_cast<unsigned char>(text[pos]))
                ? fmt::format("malformed YAML: unexpected '{}'", text[pos])
                : std::string("malformed YAML: unexpected character"));
  }
  const auto start = static_cast<std::size_t>(std::max(second.start.pos, 0));
  if (text.compare(start, 3, "---") == 0) {
    fail_at(at, "",
            "a second YAML document: a file holds one (remove the '---' and what follows, or "
            "merge it into the first)");
  }
  // yaml-cpp also ends a document at a '...' and at a line indented less than its first line.
  fail_at(at, "",
          "a second YAML document starts here, without a '---' (after a '...', or at a line "
          "indented less than the file's first): a file holds one (indent the lines alike)");
}

}  // namespace

ConfigNode ConfigNode::load_string(const std::string& text, const std::string& name) {
  auto file = std::make_shared<const std::string>(name);
  YAML::Node root;
  try {
    refuse_second_document(text, name);
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's parser stops at its nesting limit (depthguard.h) with the message "bad file".
    fail_at({name, e.mark.line + 1, e.mark.column + 1}, "",
            fmt::format("malformed YAML: nested more than {} levels deep", e.depth()));
  } catch (const YAML::Exception& e) {
    fail_at({name, e.mark.line + 1, e.mark.column + 1}, "", "malformed YAML: " + e.msg);
  }
  std::set<std::pair<int, int>> seen;
  refuse_duplicate_keys(root, name, seen);
  return ConfigNode(root, file);
}

ConfigNode ConfigNode::load_file(const std::string& file) {
  refuse_non_file(file, "");
  std::ifstream in(file);
  if (!in) fail_at({file}, "", "cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  return load_string(text.str(), file);
}

namespace {

// A mapping key as text. YAML allows a list or a mapping as a key ("[a, b]: 1"); no dlsim file
// uses one, so it is an error at the key.
std::string key_text(const YAML::Node& key, const std::string& file, const std::string& path) {
  if (key.IsScalar()) return key.Scalar();
  fail_at({file, key.Mark().line + 1, key.Mark().column + 1},
          path.empty() ? "" : fmt::format("'{}'", path), "a key must be a single word");
}

}  // namespace

SourceLocation ConfigNode::where() const {
  if (!node_ || node_.Mark().is_null()) return {*file_};
  return {*file_, node_.Mark().line + 1, node_.Mark().column + 1};
}

void ConfigNode::fail(std::string_view problem) const {
  fail_at(where(), path_.empty() ? "" : fmt::format("'{}'", path_), problem);
}

YAML::Node ConfigNode::resolved() const {
  if (node_ && node_.IsScalar()) {
    const std::string& text = node_.Scalar();
    if (text.size() > 1 && text[0] == '$' && node_.Tag() != "!") {
      const std::string name = text.substr(1);
      std::optional<YAML::Node> value = scope_ ? scope_->find(name) : std::nullopt;
      if (!value) {
        fail(
            fmt::format("unknown parameter '${}'{}", name,
                        did_you_mean(name, scope_ ? scope_->names() : std::vector<std::string>{})));
      }
      return *value;
    }
  }
  return node_;
}

ConfigNode ConfigNode::with_scope(std::shared_ptr<const ParamScope> scope) const {
  ConfigNode copy(node_, file_, std::move(scope), path_);
  copy.used_ = used_;
  return copy;
}

bool ConfigNode::has(std::string_view key) const {
  const YAML::Node n = resolved();
  return n.IsMap() && n[std::string(key)].IsDefined();
}

ConfigNode ConfigNode::child(std::string_view key) const {
  const YAML::Node n = resolved();
  if (!n.IsMap()) fail("expected a mapping of keys to values");
  const std::string k(key);
  YAML::Node c = n[k];
  if (!c.IsDefined()) {
    std::vector<std::string> present;
    for (const auto& kv : n) {
      const auto name = key_text(kv.first, *file_, path_);
      if (!used_->count(name)) present.push_back(name);
    }
    const auto near = nearest_names(k, present, 1);
    fail_at(where(), path_.empty() ? "" : fmt::format("'{}'", path_),
            fmt::format(
                "missing required key '{}'{}", k,
                near.empty() ? "" : fmt::format(" (is '{}' a misspelling of it?)", near.front())));
  }
  used_->insert(k);
  return ConfigNode(c, file_, scope_, path_.empty() ? k : path_ + "." + k);
}

std::optional<ConfigNode> ConfigNode::maybe_child(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return child(key);
}

void ConfigNode::mark_used(std::string_view key) const { used_->insert(std::string(key)); }

std::vector<ConfigNode> ConfigNode::elements() const {
  const YAML::Node n = resolved();
  if (!n.IsSequence()) fail("expected a list");
  std::vector<ConfigNode> out;
  for (std::size_t i = 0; i < n.size(); ++i) {
    out.emplace_back(n[i], file_, scope_, fmt::format("{}[{}]", path_, i));
  }
  return out;
}

std::vector<std::string> ConfigNode::keys() const {
  const YAML::Node n = resolved();
  if (!n.IsMap()) fail("expected a mapping of keys to values");
  std::vector<std::string> out;
  for (const auto& kv : n) out.push_back(key_text(kv.first, *file_, path_));
  return out;
}

void ConfigNode::finish(const std::vector<std::string>& allowed_hint) const {
  const YAML::Node n = resolved();
  if (!n.IsMap()) return;
  for (const auto& kv : n) {
    const std::string key = key_text(kv.first, *file_, path_);
    if (used_->count(key)) continue;
    std::vector<std::string> known = allowed_hint;
    if (known.empty()) known.assign(used_->begin(), used_->end());
    ConfigNode at(kv.first, file_, scope_, path_);
    at.fail(fmt::format("unknown key '{}'{}", key, did_you_mean(key, known)));
  }
}

std::string ConfigNode::scalar_text() const {
  const YAML::Node n = resolved();
  if (!n || n.IsNull()) fail("expected a value, found nothing");
  if (!n.IsScalar()) fail("expected a single value, found a list or mapping");
  return n.Scalar();
}

template <>
std::string ConfigNode::as<std::string>() const {
  return scalar_text();
}

template <>
std::int64_t ConfigNode::as<std::int64_t>() const {
  const std::string text = scalar_text();
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail(fmt::format("expected an integer, got '{}'", text));
  }
  return v;
}

template <>
int ConfigNode::as<int>() const {
  const std::int64_t v = as<std::int64_t>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    fail(fmt::format("integer {} is out of range", v));
  }
  return static_cast<int>(v);
}

template <>
double ConfigNode::as<double>() const {
  const std::string text = scalar_text();
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    fail(fmt::format("expected a number, got '{}'", text));
  }
  return v;
}

template <>
bool ConfigNode::as<bool>() const {
  const std::string text = scalar_text();
  if (text == "true") return true;
  if (text == "false") return false;
  fail(fmt::format("expected true or false, got '{}'", text));
}

std::vector<std::int64_t> ConfigNode::as_int_list() const {
  const YAML::Node n = resolved();
  if (n.IsSequence()) {
    std::vector<std::int64_t> out;
    for (const auto& e : elements()) out.push_back(e.as<std::int64_t>());
    return out;
  }
  return {as<std::int64_t>()};
}

}  // namespace dlsim
