#pragma once
// JSON as text, for every JSON file and message dlsim writes. Strings that come from a user's
// files (a log line, a host or GPU name) may hold bytes that are not UTF-8; they are written with
// U+FFFD in their place instead of making the output fail (nlohmann::json's default throws).

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace dlsim {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Parses JSON as nlohmann::json::parse does (its parse errors propagate), and also returns the
// first key an object gives twice, or "" when none does: nlohmann keeps the last copy, so a
// value given twice in a record would be read without the first ever being noticed.
inline nlohmann::json parse_json_checking_keys(const std::string& text, std::string& duplicate) {
  duplicate.clear();
  std::vector<std::set<std::string>> open;  // the keys of each object being read
  auto seen = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      open.emplace_back();
    } else if (event == E::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == E::key && !open.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  return nlohmann::json::parse(text, seen);
}

// A JSON library error as a reader's message: nlohmann prefixes every one with its own class and
// number ("[json.exception.parse_error.101] parse error at line 1, column 4: ..."), which names
// nothing the user wrote; the rest says where and what.
inline std::string json_problem(const std::exception& e) {
  std::string what = e.what();
  if (what.starts_with("[json.exception.")) {
    const auto end = what.find("] ");
    if (end != std::string::npos) what.erase(0, end + 2);
  }
  return what;
}

}  // namespace dlsim
