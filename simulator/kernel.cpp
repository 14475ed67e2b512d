#include "simulator/kernel.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace dlsim::simulator {

Time to_time(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) {
    throw std::logic_error("duration must be finite and non-negative, got " +
                           std::to_string(seconds) + " s");
  }
  return static_cast<Time>(std::llround(seconds * static_cast<double>(kPicosPerSecond)));
}

void EventKernel::at(Time t, Action action) {
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
