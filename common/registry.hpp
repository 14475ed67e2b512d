#pragma once
// A named set of implementations of one variation point (an operator, a collective algorithm,
// a framework policy). Implementations are added by explicit registration functions, so a
// missing source file fails to link or fails the registry test rather than a user.

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace dlsim {

template <class Product, class... Args>
class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Product>(Args...)>;
  struct Entry {
    std::string name;
    std::string summary;  // one line for listings and docs
    Factory make;
  };

  explicit Registry(std::string what) : what_(std::move(what)) {}

  void add(std::string name, std::string summary, Factory make) {
    if (entries_.count(name)) throw std::logic_error(what_ + " '" + name + "' registered twice");
    std::string key = name;
    entries_.emplace(std::move(key), Entry{std::move(name), std::move(summary), std::move(make)});
  }

  const Entry* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }

  // The entry for `name`; an unknown name is an InputError naming `field` (if given) and listing
  // the nearest known names.
  const Entry& at(const std::string& name, const SourceLocation& where = {},
                  std::string_view field = "") const {
    if (const Entry* e = find(name)) return *e;
    fail_at(where, field, "unknown " + what_ + " '" + name + "'" + did_you_mean(name, names()));
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [k, e] : entries_) out.push_back(k);
    return out;
  }

  const std::string& what() const { return what_; }

 private:
  std::string what_;
  std::map<std::string, Entry> entries_;
};

}  // namespace dlsim
