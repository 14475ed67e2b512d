#include "common/hostlist.hpp"

#include <fmt/format.h>
#include <charconv>
#include <stdexcept>

namespace dlsim {
namespace {

// Splits on commas that are not inside brackets.
std::vector<std::string_view> split_top_level(std::string_view list) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '[') ++depth;
    if (list[i] == ']') --depth;
    if (depth < 0 || (depth > 0 && list[i] == '[' && depth > 1)) {
      throw std::invalid_argument(fmt::format("unbalanced '[' or ']' in host list '{}'", list));
    }
    if (list[i] == ',' && depth == 0) {
      parts.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) throw std::invalid_argument(fmt::format("unclosed '[' in host list '{}'", list));
  parts.push_back(list.substr(start));
  return parts;
}

long parse_index(std::string_view text, std::string_view list) {
  long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0) {
    throw std::invalid_argument(
        fmt::format("'{}' is not a non-negative number in host list '{}'", text, list));
  }
  return v;
}

// "001-016,20" -> {"001", ..., "016", "20"}
std::vector<std::string> expand_range_set(std::string_view set, std::string_view list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= set.size()) {
    auto comma = set.find(',', start);
    if (comma == std::string_view::npos) comma = set.size();
    const auto item = set.substr(start, comma - start);
    const auto dash = item.find('-');
    if (dash == std::string_view::npos) {
      parse_index(item, list);
      out.emplace_back(item);
    } else {
      const auto lo_text = item.substr(0, dash);
      const long lo = parse_index(lo_text, list);
      const long hi = parse_index(item.substr(dash + 1), list);
      if (hi < lo) {
        throw std::invalid_argument(fmt::format("range '{}' runs backwards in '{}'", item, list));
      }
      if (hi - lo >= static_cast<long>(kMaxHosts) ||
          out.size() + static_cast<std::size_t>(hi - lo) >= kMaxHosts) {
        throw std::invalid_argument(
            fmt::format("host list '{}' names more than {} hosts", list, kMaxHosts));
      }
      const int width =
          lo_text.size() > 1 && lo_text[0] == '0' ? static_cast<int>(lo_text.size()) : 0;
      for (long v = lo; v <= hi; ++v) out.push_back(fmt::format("{:0{}}", v, width));
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list) {
  std::vector<std::string> hosts;
  for (auto part : split_top_level(list)) {
    if (part.empty())
      throw std::invalid_argument(fmt::format("empty name in host list '{}'", list));
    std::vector<std::string> names{""};
    while (!part.empty()) {
      const auto open = part.find('[');
      const auto literal = part.substr(0, open);
      for (auto& n : names) n += literal;
      if (open == std::string_view::npos) break;
      const auto close = part.find(']', open);
      const auto set = expand_range_set(part.substr(open + 1, close - open - 1), list);
      if (names.size() * set.size() > kMaxHosts) {
        throw std::invalid_argument(
            fmt::format("host list '{}' names more than {} hosts", list, kMaxHosts));
      }
      std::vector<std::string> next;
      for (const auto& n : names) {
        for (const auto& s : set) next.push_back(n + s);
      }
      names = std::move(next);
      part.remove_prefix(close + 1);
    }
    hosts.insert(hosts.end(), names.begin(), names.end());
    if (hosts.size() > kMaxHosts) {
      throw std::invalid_argument(
          fmt::format("host list '{}' names more than {} hosts", list, kMaxHosts));
    }
  }
  return hosts;
}

}  // namespace dlsim
