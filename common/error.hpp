#pragma once
// Errors that reach the user. InputError is anything wrong with what the user gave dlsim
// (a file, a flag, a value): the programs print its message as one line and exit with code 2.

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlsim {

// Where a value came from: a file and 1-based line and column (0 when unknown).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:line:column", "file:line", "file" or "" depending on what is known.
  std::string str() const;
};

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // "<where>: <field>: <problem>" (parts left out when empty), each part kept.
  InputError(SourceLocation where, std::string field, std::string problem);

  const SourceLocation& where() const { return where_; }
  // The field named by the library that threw (a YAML key, a setting such as "algorithm"), or
  // "" for an error built from a whole message.
  const std::string& field() const { return field_; }
  const std::string& problem() const { return problem_; }

 private:
  SourceLocation where_;
  std::string field_, problem_;
};

// Throws InputError "<where>: <field>: <problem>" (parts left out when empty).
[[noreturn]] void fail_at(const SourceLocation& where, std::string_view field,
                          std::string_view problem);

// Runs `f`; an InputError it throws that names one of `flags`' fields (and no file) is thrown
// again naming the command-line flag the field came from: libraries name fields, only a
// program's command-line layer knows its flags ({"algorithm", "--algo"}).
template <class F>
decltype(auto) naming_flags(
    std::initializer_list<std::pair<std::string_view, std::string_view>> flags, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    if (e.where().file.empty() && !e.field().empty()) {
      for (const auto& [field, flag] : flags) {
        if (e.field() == field) throw InputError({}, std::string(flag), e.problem());
      }
    }
    throw;
  }
}

// An InputError naming `path` (and `field`, if any) when it is a directory, a device or a socket:
// an input file must be a file (or a pipe). A directory opens as a stream and reads as empty,
// which would be reported as an empty or malformed file; a device such as /dev/zero never ends.
void refuse_non_file(const std::string& path, std::string_view field = "");

// Up to `max` candidates closest to `name` by edit distance (and prefix match), best first.
std::vector<std::string> nearest_names(std::string_view name, const std::vector<std::string>& known,
                                       std::size_t max = 3);

// "; did you mean 'a' or 'b'?" or "" when nothing is close.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);

}  // namespace dlsim
