#pragma once
// Numeric precision of a training run and the size of one element in it.

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

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

// How a step trains: fp32; tf32 (fp32 tensors, GEMMs and convolutions on TF32 tensor cores:
// 10-bit mantissa inputs, fp32 accumulation; NVIDIA A100 whitepaper 2020); fp16 (everything in
// half precision); amp (mixed: float16 tensor-core arithmetic and activations, fp32 master
// weights, gradients and optimizer state; Micikevicius et al. 2018); bf16 (the same mixed scheme
// with bfloat16, as torch.autocast(dtype=torch.bfloat16) runs it, without loss scaling).
enum class TrainingPrecision { kFp32, kTf32, kFp16, kAmp, kBf16 };

// Every training precision with its name, the one list that parsing, messages and file checks
// use.
inline constexpr std::array<std::pair<TrainingPrecision, std::string_view>, 5> kTrainingPrecisions{
    {{TrainingPrecision::kFp32, "fp32"},
     {TrainingPrecision::kTf32, "tf32"},
     {TrainingPrecision::kFp16, "fp16"},
     {TrainingPrecision::kAmp, "amp"},
     {TrainingPrecision::kBf16, "bf16"}}};

inline std::optional<TrainingPrecision> parse_training_precision(std::string_view s) {
  for (const auto& [p, name] : kTrainingPrecisions) {
    if (name == s) return p;
  }
  return std::nullopt;
}

inline std::string to_string(TrainingPrecision p) {
  for (const auto& [q, name] : kTrainingPrecisions) {
    if (q == p) return std::string(name);
  }
  return "fp32";
}

// The names, for messages: "fp32, tf32, fp16, amp, bf16".
inline const std::string& training_precision_names() {
  static const std::string names = [] {
    std::string s;
    for (const auto& [p, name] : kTrainingPrecisions) {
      s += (s.empty() ? "" : ", ") + std::string(name);
    }
    return s;
  }();
  return names;
}

}  // namespace dlsim
