#include "common/units.hpp"

#include <fmt/format.h>
#include <array>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace dlsim {
namespace {

struct UnitFactor {
  std::string_view suffix;
  double factor;  // to the base unit
};

// The number and its unit, in the base unit. A quantity is never negative, NaN or infinite, and
// never above `max` (in the base unit): a value past it would overflow what dlsim computes with it
// (picosecond integer time, 64-bit byte counts).
double parse_with(std::string_view text, std::string_view what,
                  std::initializer_list<UnitFactor> units, double max, double min_positive) {
  const auto first = text.find_first_not_of(" \t");
  text.remove_prefix(first == std::string_view::npos ? text.size() : first);
  double number = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  std::string accepted;
  for (const auto& u : units) accepted += (accepted.empty() ? "" : ", ") + std::string(u.suffix);
  if (ec == std::errc::result_out_of_range) {
    throw std::invalid_argument(fmt::format("'{}' is out of range for a {}", text, what));
  }
  if (ec != std::errc() || !std::isfinite(number)) {
    throw std::invalid_argument(
        fmt::format("'{}' is not a {} (expected a number with a unit: {})", text, what, accepted));
  }
  std::string_view suffix(end, text.data() + text.size() - end);
  while (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  while (!suffix.empty() && suffix.back() == ' ') suffix.remove_suffix(1);
  if (suffix.empty()) {
    throw std::invalid_argument(
        fmt::format("'{}' has no unit; a {} needs one of: {}", text, what, accepted));
  }
  for (const auto& u : units) {
    if (u.suffix != suffix) continue;
    if (number < 0) {
      const bool vowel =
          !what.empty() && std::string_view("aeiou").find(what.front()) != std::string_view::npos;
      throw std::invalid_argument(fmt::format("'{}' is negative; {} {} cannot be negative", text,
                                              vowel ? "an" : "a", what));
    }
    const double value = number * u.factor;
    if (!std::isfinite(value) || value > max) {
      throw std::invalid_argument(fmt::format("'{}' is out of range for a {} (at most {:g} {})",
                                              text, what, max, units.begin()->suffix));
    }
    if (value != 0 && value < min_positive) {
      throw std::invalid_argument(fmt::format("'{}' is below the smallest nonzero {} ({:g} {})",
                                              text, what, min_positive, units.begin()->suffix));
    }
    return value == 0 ? 0.0 : value;  // no negative zero
  }
  throw std::invalid_argument(fmt::format("unknown unit '{}' in '{}' for a {}; expected one of: {}",
                                          suffix, text, what, accepted));
}

constexpr double kKi = 1024.0;

std::string with_prefix(double v, std::string_view unit, bool binary, int digits = 3) {
  // Up to the largest values dlsim accepts (kMaxBytes is 1 EiB, kMaxFlops 1e24 FLOP).
  static constexpr std::array<std::string_view, 9> dec = {"",  "K", "M", "G", "T",
                                                          "P", "E", "Z", "Y"};
  static constexpr std::array<std::string_view, 9> bin = {"",   "Ki", "Mi", "Gi", "Ti",
                                                          "Pi", "Ei", "Zi", "Yi"};
  const double step = binary ? kKi : 1000.0;
  std::size_t i = 0;
  while (std::abs(v) >= step && i + 1 < dec.size()) {
    v /= step;
    ++i;
  }
  return fmt::format("{:.{}g} {}{}", v, digits, binary ? bin[i] : dec[i], unit);
}

}  // namespace

std::optional<double> parse_number(std::string_view text) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

Bytes parse_bytes(std::string_view text) {
  const double bytes = parse_with(text, "size",
                                  {{"B", 1},
                                   {"KB", 1e3},
                                   {"MB", 1e6},
                                   {"GB", 1e9},
                                   {"TB", 1e12},
                                   {"KiB", kKi},
                                   {"MiB", kKi * kKi},
                                   {"GiB", kKi * kKi * kKi},
                                   {"TiB", kKi * kKi * kKi * kKi}},
                                  kMaxBytes.value(), 1.0);
  return Bytes(bytes);
}

Bytes parse_whole_bytes(std::string_view text) {
  const Bytes bytes = parse_bytes(text);
  if (bytes.value() != std::floor(bytes.value())) {
    throw std::invalid_argument(
        fmt::format("'{}' is {:g} B, not a whole number of bytes", text, bytes.value()));
  }
  return bytes;
}

Seconds parse_seconds(std::string_view text) {
  return Seconds(parse_with(text, "duration",
                            {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}},
                            kMaxSeconds.value(), kMinSeconds.value()));
}

Bandwidth parse_bandwidth(std::string_view text) {
  // Bytes use "B", bits use "bit" or "b" (SI convention: 25Gbit/s = 25Gb/s = 3.125 GB/s).
  return Bandwidth(parse_with(text, "bandwidth",
                              {{"B/s", 1},
                               {"KB/s", 1e3},
                               {"MB/s", 1e6},
                               {"GB/s", 1e9},
                               {"TB/s", 1e12},
                               {"KiB/s", kKi},
                               {"MiB/s", kKi * kKi},
                               {"GiB/s", kKi * kKi * kKi},
                               {"bit/s", 0.125},
                               {"Kbit/s", 125.0},
                               {"Mbit/s", 1.25e5},
                               {"Gbit/s", 1.25e8},
                               {"Tbit/s", 1.25e11},
                               {"Kb/s", 125.0},
                               {"Mb/s", 1.25e5},
                               {"Gb/s", 1.25e8},
                               {"Tb/s", 1.25e11}},
                              kMaxBandwidth.value(), kMinBandwidth.value()));
}

Flops parse_flops(std::string_view text) {
  return Flops(parse_with(text, "amount of work",
                          {{"FLOP", 1},
                           {"KFLOP", 1e3},
                           {"MFLOP", 1e6},
                           {"GFLOP", 1e9},
                           {"TFLOP", 1e12},
                           {"PFLOP", 1e15}},
                          kMaxFlops.value(), 0.0));
}

std::string format_bandwidth(Bandwidth b) { return with_prefix(b.value(), "B/s", false, 4); }
std::string format_flop_rate(FlopRate r) { return with_prefix(r.value(), "FLOP/s", false, 4); }

FlopRate parse_flop_rate(std::string_view text) {
  return FlopRate(parse_with(text, "compute rate",
                             {{"FLOP/s", 1},
                              {"KFLOP/s", 1e3},
                              {"MFLOP/s", 1e6},
                              {"GFLOP/s", 1e9},
                              {"TFLOP/s", 1e12},
                              {"PFLOP/s", 1e15}},
                             kMaxFlopRate.value(), kMinFlopRate.value()));
}

std::string format_bytes(Bytes b) { return with_prefix(b.value(), "B", true); }
std::string format_flops(Flops f) { return with_prefix(f.value(), "FLOP", false); }

std::string format_seconds(Seconds s) {
  const double v = s.value();
  if (std::abs(v) >= 1.0 || v == 0.0) return fmt::format("{:.3g} s", v);
  if (std::abs(v) >= 1e-3) return fmt::format("{:.3g} ms", v * 1e3);
  if (std::abs(v) >= 1e-6) return fmt::format("{:.3g} us", v * 1e6);
  return fmt::format("{:.3g} ns", v * 1e9);
}

}  // namespace dlsim
