#pragma once
// JSON as text, for every JSON file and message dlsim writes. Strings that come from a user's
// files (a log line, a host or GPU name) may hold bytes that are not UTF-8; they are written with
// U+FFFD in their place instead of making the output fail (nlohmann::json's default throws).

#include <nlohmann/json.hpp>
#include <string>

namespace dlsim {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace dlsim
