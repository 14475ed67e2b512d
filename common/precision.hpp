#pragma once
// Numeric precision of a training run and the size of one element in it.

#include <optional>
#include <string>
#include <string_view>

#include "common/units.hpp"

namespace dlsim {

enum class Precision { kFp32, kFp16, kBf16 };

constexpr Bytes element_size(Precision p) { return Bytes(p == Precision::kFp32 ? 4.0 : 2.0); }

inline std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kBf16:
      return "bf16";
  }
  return "fp32";
}

inline std::optional<Precision> parse_precision(std::string_view s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "fp16") return Precision::kFp16;
  if (s == "bf16") return Precision::kBf16;
  return std::nullopt;
}

}  // namespace dlsim
