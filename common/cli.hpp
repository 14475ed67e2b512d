#pragma once
// Running a dlsim program's command line, the same way for dlsim, dlcalibrate and dlvalidate:
// --help and --version exit 0; a parse error or an InputError is one line "PROGRAM: error: ..."
// and exit code 2; anything else is "PROGRAM: internal error: ..." and exit code 3.

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace dlsim {

// `parse(text)` for the value of `flag`; its std::invalid_argument becomes an InputError
// naming the flag.
template <class Parse>
auto parse_flag(const std::string& text, const std::string& flag, Parse parse) {
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    fail_at({}, flag, e.what());
  }
}

// A seed: a whole number 0 .. 2^64-1 (CLI11 would wrap "-1" to 2^64-1).
inline const CLI::Validator kSeed(
    [](std::string& s) {
      const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return digits && ec == std::errc() && end == s.data() + s.size()
                 ? std::string()
                 : "must be an integer in 0..18446744073709551615, got '" + s + "'";
    },
    "UINT");

// A finite number in [lo, hi] (CLI::Range lets NaN through: every comparison with it is false).
inline CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) {
        double v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        const bool ok =
            !s.empty() && ec == std::errc() && end == s.data() + s.size() && v >= lo && v <= hi;
        return ok ? std::string()
                  : fmt::format("must be a finite number in [{:g}, {:g}], got '{}'", lo, hi, s);
      },
      "NUMBER");
}

// Bounds of the counts the programs take: ranks of a job (one per GPU) and GPUs of one node.
inline constexpr int kMaxRanks = 1 << 20;
inline constexpr int kMaxGpusPerNode = 1024;

// Whether `value` is an integer as the programs take them: decimal digits, an optional leading
// '-', no leading zero ("08" is not 8, nor "0x10" 16).
inline bool written_in_decimal(std::string_view value) {
  const std::string_view digits = value.substr(!value.empty() && value[0] == '-' ? 1 : 0);
  return !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos &&
         (digits.size() == 1 || digits[0] != '0');
}

// An integer flag value written in full, in [min, max]; otherwise an InputError naming the flag.
inline long long parse_int_flag(const std::string& text, const std::string& flag, long long min,
                                long long max) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    fail_at({}, flag, fmt::format("expected an integer, got '{}'", text));
  }
  if (!written_in_decimal(text)) {
    fail_at(
        {}, flag,
        fmt::format("'{}' is not a whole number written in decimal digits (a leading zero)", text));
  }
  if (v < min || v > max) fail_at({}, flag, fmt::format("must be in {}..{}, got {}", min, max, v));
  return v;
}

// "--set NAME=VALUE" flags into name -> value (a name given twice is an error: which one?).
inline std::map<std::string, std::string> parse_model_sets(const std::vector<std::string>& sets) {
  std::map<std::string, std::string> out;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
      fail_at({}, "--set", fmt::format("expected NAME=VALUE, got '{}'", s));
    }
    if (!out.emplace(s.substr(0, eq), s.substr(eq + 1)).second) {
      fail_at({}, "--set", fmt::format("'{}' is given twice", s.substr(0, eq)));
    }
  }
  return out;
}

// An error message as one printable line: a newline, tab or other control byte the input
// carried into it (a key with an escaped newline, a binary file) is written as \n, \t or \xHH.
inline std::string one_line(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out;
}

// Every option that takes a value, in `app` and its subcommands, refuses an empty one: "--json
// ''" or "-o ''" would otherwise read as the option left out (or as a file named "").
// An integer option takes a plain decimal number: CLI11 reads "0x10" as 16 and "010" as 8.
inline void refuse_empty_values(CLI::App& app) {
  for (auto* o : app.get_options()) {
    if (o->get_type_size() == 0) continue;  // a flag
    o->check(CLI::Validator(
        [](std::string& value) {
          return value.empty() ? std::string("an empty value (give one, or leave the option out)")
                               : std::string();
        },
        "", "non-empty"));
    // The type name, then ":" and each validator's description ("INT:INT in [1 - 1024]").
    const std::string full = o->get_type_name();
    const std::string type = full.substr(0, full.find(':'));
    if (type == "INT" || type == "UINT") {
      o->check(CLI::Validator(
          [](std::string& value) {
            return written_in_decimal(value)
                       ? std::string()
                       : "'" + value + "' is not a whole number written in decimal digits";
          },
          "", "decimal"));
    }
    if (type == "FLOAT") {
      // Decimal or scientific notation only: the stream CLI11 reads with takes "0x10" as 16.
      o->check(CLI::Validator(
          [](std::string& value) {
            double v = 0;
            const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
            const bool plain = ec == std::errc() && end == value.data() + value.size();
            return plain || value.empty()
                       ? std::string()
                       : "'" + value + "' is not a number written in decimal digits";
          },
          "", "decimal"));
    }
  }
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    refuse_empty_values(*sub);
  }
}

// The flag of the command that ran which a library's field stands for: field "gpus_per_node" is
// the flag "--gpus-per-node" where the command (or a command above it) has one; "" otherwise.
// Libraries name the fields of the typed options they take; only the command line knows flags.
inline std::string flag_of_field(const CLI::App& app, const std::string& field) {
  if (field.empty() || field.starts_with("-")) return "";
  std::string flag = "--" + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  if (app.get_option_no_throw(flag) != nullptr) return flag;
  for (const auto* sub : app.get_subcommands()) {
    if (auto found = flag_of_field(*sub, field); !found.empty()) return found;
  }
  return "";
}

// Parses and runs `app` (its callbacks do the work); 0 when they all finished.
inline int run_cli(CLI::App& app, int argc, char** argv, const std::string& program) {
  refuse_empty_values(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": error: " << one_line(e.what()) << " (see " << program
              << " --help)\n";
    return 2;
  } catch (const InputError& e) {
    const auto flag = e.where().file.empty() ? flag_of_field(app, e.field()) : "";
    std::cerr << program << ": error: "
              << one_line(flag.empty() ? e.what() : InputError({}, flag, e.problem()).what())
              << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << program << ": internal error: " << one_line(e.what()) << "\n";
    return 3;
  }
  return 0;
}

}  // namespace dlsim
