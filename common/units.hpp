#pragma once
// Dimensioned quantities. Every number dlsim stores for a physical quantity carries its unit in
// its type; values are kept in SI base units (bytes, seconds, FLOP) as doubles, which are exact
// for integers below 2^53.

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace dlsim {

template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(double value) : value_(value) {}

  // The value in the base unit named by Tag::symbol.
  constexpr double value() const { return value_; }
  static constexpr std::string_view symbol() { return Tag::symbol; }

  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }
  constexpr Quantity& operator*=(double k) {
    value_ *= k;
    return *this;
  }
  friend constexpr Quantity operator+(Quantity a, Quantity b) {
    return Quantity(a.value_ + b.value_);
  }
  friend constexpr Quantity operator-(Quantity a, Quantity b) {
    return Quantity(a.value_ - b.value_);
  }
  friend constexpr Quantity operator*(Quantity a, double k) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator*(double k, Quantity a) { return Quantity(a.value_ * k); }
  friend constexpr Quantity operator/(Quantity a, double k) { return Quantity(a.value_ / k); }
  friend constexpr double operator/(Quantity a, Quantity b) { return a.value_ / b.value_; }
  friend constexpr auto operator<=>(Quantity, Quantity) = default;

 private:
  double value_ = 0.0;
};

struct BytesTag {
  static constexpr std::string_view symbol = "B";
};
struct FlopsTag {
  static constexpr std::string_view symbol = "FLOP";
};
struct SecondsTag {
  static constexpr std::string_view symbol = "s";
};
struct BandwidthTag {
  static constexpr std::string_view symbol = "B/s";
};
struct FlopRateTag {
  static constexpr std::string_view symbol = "FLOP/s";
};

using Bytes = Quantity<BytesTag>;          // bytes
using Flops = Quantity<FlopsTag>;          // floating-point operations (a multiply-add is 2)
using Seconds = Quantity<SecondsTag>;      // seconds
using Bandwidth = Quantity<BandwidthTag>;  // bytes per second
using FlopRate = Quantity<FlopRateTag>;    // floating-point operations per second

constexpr Seconds operator/(Bytes b, Bandwidth bw) { return Seconds(b.value() / bw.value()); }
constexpr Seconds operator/(Flops f, FlopRate r) { return Seconds(f.value() / r.value()); }

// The largest value each parser accepts. Above them dlsim's own arithmetic would overflow: byte
// counts become 64-bit integers (2^60 B = 1 EiB leaves room to multiply by GPU counts), the
// simulator's clock is a 64-bit count of picoseconds (about 106 days; a duration is held to
// 10^6 s, 11.6 days); bandwidths and rates are held far above any machine's (1 PB/s, 10^21
// FLOP/s, 10^24 FLOP) so that quotients of them stay finite.
inline constexpr Bytes kMaxBytes{1152921504606846976.0};  // 2^60 B
inline constexpr Seconds kMaxSeconds{1e6};
inline constexpr Bandwidth kMaxBandwidth{1e15};
inline constexpr FlopRate kMaxFlopRate{1e21};
inline constexpr Flops kMaxFlops{1e24};
// The smallest nonzero values: a duration below the clock's 1 ps, a bandwidth below 1 kB/s or a
// compute rate below 1 MFLOP/s describes no machine and would push a step past the clock's range.
inline constexpr Seconds kMinSeconds{1e-12};
inline constexpr Bandwidth kMinBandwidth{1e3};
inline constexpr FlopRate kMinFlopRate{1e6};

// Parse "16GiB", "900GB/s", "25Gbit/s", "2.5us", "15.7TFLOP/s". The unit is required: a bare
// number is rejected; so are negative, NaN, infinite and out-of-range values (above kMax*,
// nonzero below kMin*: a size below 1 B). Zero
// is accepted: a caller for which zero means nothing refuses it, naming its field. Throws
// std::invalid_argument with a message naming the accepted units.
// A finite number written in full ("12", "1.5e3"), or nothing.
std::optional<double> parse_number(std::string_view text);
Bytes parse_bytes(std::string_view text);
// A size that a program sends or allocates (a message, a buffer, a partition, a chunk): a whole
// number of bytes as well.
Bytes parse_whole_bytes(std::string_view text);
Seconds parse_seconds(std::string_view text);
Bandwidth parse_bandwidth(std::string_view text);
FlopRate parse_flop_rate(std::string_view text);
Flops parse_flops(std::string_view text);

// Human-readable with an SI (or, for bytes, binary) prefix: "1.50 GiB", "3.2 GFLOP".
std::string format_bytes(Bytes b);
std::string format_flops(Flops f);
std::string format_seconds(Seconds s);
// Four significant digits, decimal prefixes: "25 GB/s", "15.7 TFLOP/s".
std::string format_bandwidth(Bandwidth b);
std::string format_flop_rate(FlopRate r);

}  // namespace dlsim
