#include "simulator/kernel.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"

namespace dlsim::simulator {

namespace {
// A time past the clock's range comes from the inputs (a rate far too low, a latency far too
// high), not from the engines: it is the user's to fix.
[[noreturn]] void beyond_clock(double seconds) {
  fail_at({}, "step",
          fmt::format("the simulated step would reach {:.3g} s, past the simulator's clock "
                      "({:g} s): a bandwidth, compute rate or latency in the inputs is far "
                      "outside what any machine has",
                      seconds, kMaxSimulatedSeconds));
}
}  // namespace

Time to_time(double seconds) {
  if (std::isnan(seconds) || seconds < 0) {
    throw std::logic_error("duration must be finite and non-negative, got " +
                           std::to_string(seconds) + " s");
  }
  if (seconds > kMaxSimulatedSeconds) beyond_clock(seconds);
  return static_cast<Time>(std::llround(seconds * static_cast<double>(kPicosPerSecond)));
}

void check_within_clock(double seconds) {
  if (!(seconds <= kMaxSimulatedSeconds)) beyond_clock(seconds);
}

void EventKernel::at(Time t, Action action) {
  if (t > kMaxSimulatedTime) beyond_clock(to_seconds(t));
  if (t < now_) {
    throw std::logic_error("event scheduled at " + std::to_string(t) + " ps, before now (" +
                           std::to_string(now_) + " ps)");
  }
  queue_.push(Event{t, next_seq_++, std::move(action)});
}

std::uint64_t EventKernel::run() {
  std::uint64_t dispatched = 0;
  while (!queue_.empty()) {
    // top() is const: move the action out through a copy of the handle before popping.
    Event e = std::move(const_cast<Event&>(queue_.top()));
    queue_.pop();
    now_ = e.time;
    e.action();
    ++dispatched;
  }
  return dispatched;
}

}  // namespace dlsim::simulator
