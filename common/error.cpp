#include "common/error.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <filesystem>

namespace dlsim {

std::string SourceLocation::str() const {
  if (file.empty()) return {};
  if (line <= 0) return file;
  if (column <= 0) return fmt::format("{}:{}", file, line);
  return fmt::format("{}:{}:{}", file, line, column);
}

namespace {
std::string message(const SourceLocation& where, std::string_view field, std::string_view problem) {
  std::string msg = where.str();
  if (!field.empty()) msg += (msg.empty() ? "" : ": ") + std::string(field);
  msg += (msg.empty() ? "" : ": ") + std::string(problem);
  return msg;
}
}  // namespace

InputError::InputError(SourceLocation where, std::string field, std::string problem)
    : std::runtime_error(message(where, field, problem)),
      where_(std::move(where)),
      field_(std::move(field)),
      problem_(std::move(problem)) {}

void fail_at(const SourceLocation& where, std::string_view field, std::string_view problem) {
  throw InputError(where, std::string(field), std::string(problem));
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& known,
                                       std::size_t max) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& k : known) {
    std::size_t d = edit_distance(name, k);
    const bool prefix = !name.empty() && (k.starts_with(name) || name.starts_with(k));
    if (prefix) d = std::min<std::size_t>(d, 1);
    // Accept up to a third of the longer name's length in edits, at least 2.
    const std::size_t limit = std::max<std::size_t>(2, std::max(name.size(), k.size()) / 3);
    if (d <= limit) scored.emplace_back(d, k);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (const auto& [d, k] : scored) {
    if (out.size() == max) break;
    out.push_back(k);
  }
  return out;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  const auto near = nearest_names(name, known);
  if (near.empty()) return {};
  std::string s = "; did you mean ";
  for (std::size_t i = 0; i < near.size(); ++i) {
    if (i > 0) s += (i + 1 == near.size()) ? " or " : ", ";
    s += "'" + near[i] + "'";
  }
  return s + "?";
}

void refuse_non_file(const std::string& path, std::string_view field) {
  std::error_code ec;
  namespace fs = std::filesystem;
  const auto status = fs::status(path, ec);
  if (fs::is_directory(status)) fail_at({path}, field, "is a directory, not a file");
  if (fs::is_character_file(status) || fs::is_block_file(status) || fs::is_socket(status)) {
    fail_at({path}, field, "is a device, not a file");
  }
}

}  // namespace dlsim
