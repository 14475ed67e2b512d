#pragma once
// What the engines report as a step runs: spans of compute on each GPU and of the job's
// communication channel. Observers (the Chrome trace writer, the step breakdown, link load)
// subscribe to them; the engines keep no statistics of their own.

#include <string>
#include <string_view>
#include <vector>

#include "simulator/kernel.hpp"

namespace dlsim::simulator {

enum class SpanKind {
  kIteration,     // one training step of the whole job
  kForward,       // a GPU's forward pass
  kBackward,      // a GPU's backward pass
  kUpdate,        // a GPU's optimizer step
  kLayerForward,  // one layer (only to observers that want layers)
  kLayerBackward,
  kNegotiate,   // channel: agreeing on ready tensors (Horovod)
  kCopyIn,      // channel: into a fusion or bucket buffer
  kCollective,  // channel: the collective of one group
  kCopyOut,     // channel: out of the buffer
  // The job: host CPU time a collective's library work took from the ranks' compute where they
  // share cores with it (docs/simulator.md, "Shared cores"); backward ends that much later.
  kHostShare,
  // The job: the step's end waiting for the input pipeline's next batch, from when the step
  // would have ended to when it does (docs/simulator.md, "Input pipeline").
  kInputWait,
};

struct Span {
  SpanKind kind;
  int iteration = 0;
  int rank = -1;          // GPU rank; -1 for the job (iteration, channel)
  std::string_view name;  // layer name, or the trace name of a channel activity
  Time begin = 0, end = 0;
  double bytes = 0;               // channel spans: the group's gradient bytes
  Time latency = 0;               // collectives: the size-independent part of their time
  bool parameter_server = false;  // collectives run by parameter servers
};

// Where a rank runs, for observers that group by node.
struct RankInfo {
  int node = 0;  // job node slot
  std::string host;
  int gpu = 0;  // index inside the node
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void on_layout(const std::vector<RankInfo>& /*ranks*/) {}
  virtual void on_span(const Span& s) = 0;
  // Per-layer spans cost time on large jobs; only observers that ask get them.
  virtual bool wants_layers() const { return false; }
};

// Sends each span to every observer.
class Observers {
 public:
  void add(StepObserver* o) {
    list_.push_back(o);
    layers_ = layers_ || o->wants_layers();
  }
  void emit(const Span& s) const {
    for (auto* o : list_) o->on_span(s);
  }
  bool wants_layers() const { return layers_; }

 private:
  std::vector<StepObserver*> list_;
  bool layers_ = false;
};

}  // namespace dlsim::simulator
