#pragma once
// The discrete-event kernel: a clock and a queue of actions ordered by (time, sequence). Time is
// an integer number of picoseconds so that sums are exact and runs are reproducible; two events
// at the same time run in the order they were scheduled. The kernel keeps no statistics: what
// happens is reported to observers by the engines (simulator/observer.hpp).

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace dlsim::simulator {

using Time = std::int64_t;  // ps
inline constexpr Time kPicosPerSecond = 1'000'000'000'000;
// The longest simulated time: 10^6 s per step (as kMaxSeconds of any one duration), far inside
// the 9.2 x 10^6 s the 64-bit clock holds, so that sums of such times do not wrap. Past it,
// to_time and EventKernel::at throw an InputError naming the step.
inline constexpr double kMaxSimulatedSeconds = 1e6;
inline constexpr Time kMaxSimulatedTime = 1'000'000 * kPicosPerSecond;
// Rounds seconds to the nearest picosecond (durations shorter than 0.5 ps become 0).
Time to_time(double seconds);
// The InputError naming the step where `seconds` (a step the analytic engine computed, which
// runs no clock) lies past kMaxSimulatedSeconds, as the DES's clock would refuse it.
void check_within_clock(double seconds);
inline double to_seconds(Time t) { return static_cast<double>(t) / kPicosPerSecond; }

class EventKernel {
 public:
  using Action = std::function<void()>;

  Time now() const { return now_; }
  // Runs `action` at absolute time `t`, which must not be in the past (std::logic_error).
  void at(Time t, Action action);
  void after(Time delay, Action action) {
    at(delay > kMaxSimulatedTime ? kMaxSimulatedTime + 1 : now_ + delay, std::move(action));
  }
  // Dispatches events until none is left; returns how many ran.
  std::uint64_t run();

 private:
  struct Event {
    Time time;
    std::uint64_t seq;
    Action action;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  Time now_ = 0;
  std::uint64_t next_seq_ = 0;
};

}  // namespace dlsim::simulator
