#pragma once
// A Chrome trace event file of a predicted run (the JSON Object Format of the Trace Event
// Format, which Perfetto and chrome://tracing open): a process per node, on each GPU a compute
// thread (a span per layer) and a communication thread whose spans are named as in Horovod's
// timeline (NEGOTIATE_ALLREDUCE, MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, ...).

#include <string>
#include <vector>

#include "simulator/observer.hpp"

namespace dlsim::simulator {

class TraceWriter : public StepObserver {
 public:
  void on_layout(const std::vector<RankInfo>& ranks) override { ranks_ = ranks; }
  void on_span(const Span& s) override;
  bool wants_layers() const override { return true; }
  // The whole document.
  std::string str() const;

 private:
  void event(const std::string& name, const char* cat, int pid, int tid, Time begin, Time end,
             double bytes);
  std::vector<RankInfo> ranks_;
  std::string events_;
};

}  // namespace dlsim::simulator
