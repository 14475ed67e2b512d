#include "simulator/trace.hpp"
#include "common/json_text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

namespace dlsim::simulator {
namespace {

const char* category(SpanKind k) {
  switch (k) {
    case SpanKind::kLayerForward:
      return "forward";
    case SpanKind::kLayerBackward:
      return "backward";
    case SpanKind::kUpdate:
      return "update";
    case SpanKind::kIteration:
      return "step";
    case SpanKind::kInputWait:
      return "input";
    default:
      return "communication";
  }
}

// Trace timestamps are microseconds.
double us(Time t) { return static_cast<double>(t) / 1e6; }

}  // namespace

void TraceWriter::event(const std::string& name, const char* cat, int pid, int tid, Time begin,
                        Time end, double bytes) {
  if (!events_.empty()) events_ += ",\n";
  events_ +=
      fmt::format(R"({{"name":{},"cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.6f},)"
                  R"("dur":{:.6f})",
                  json_text(nlohmann::json(name)), cat, pid, tid, us(begin), us(end - begin));
  if (bytes > 0) events_ += fmt::format(R"(,"args":{{"bytes":{:.0f}}})", bytes);
  events_ += "}";
}

void TraceWriter::on_span(const Span& s) {
  switch (s.kind) {
    case SpanKind::kForward:
    case SpanKind::kBackward:
      return;  // the layers show them
    case SpanKind::kIteration:
      // The job's steps on a process of their own after the nodes.
      event(fmt::format("step {}", s.iteration), category(s.kind),
            ranks_.empty() ? 0 : ranks_.back().node + 1, 0, s.begin, s.end, 0);
      return;
    case SpanKind::kInputWait:
      // Beside the job's steps: the end of a step waiting for its batches.
      event(std::string(s.name), category(s.kind), ranks_.empty() ? 0 : ranks_.back().node + 1, 1,
            s.begin, s.end, 0);
      return;
    default:
      break;
  }
  const bool channel = s.rank < 0;
  const std::string name(s.name);
  if (!channel) {
    const auto& r = ranks_.at(static_cast<std::size_t>(s.rank));
    event(name, category(s.kind), r.node, 2 * r.gpu, s.begin, s.end, s.bytes);
    return;
  }
  // A collective involves every GPU: its span appears on each GPU's communication thread.
  for (const auto& r : ranks_) {
    event(name, category(s.kind), r.node, 2 * r.gpu + 1, s.begin, s.end, s.bytes);
  }
}

std::string TraceWriter::str() const {
  std::string meta;
  std::set<int> nodes;
  auto add = [&meta](const std::string& e) {
    if (!meta.empty()) meta += ",\n";
    meta += e;
  };
  for (const auto& r : ranks_) {
    if (nodes.insert(r.node).second) {
      add(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":{}}}}})", r.node,
                      json_text(nlohmann::json(r.host))));
    }
    add(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},)"
                    R"("args":{{"name":"gpu{} compute"}}}})",
                    r.node, 2 * r.gpu, r.gpu));
    add(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},)"
                    R"("args":{{"name":"gpu{} communication"}}}})",
                    r.node, 2 * r.gpu + 1, r.gpu));
  }
  const int job = ranks_.empty() ? 0 : ranks_.back().node + 1;
  add(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"job"}}}})", job));
  add(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":1,)"
                  R"("args":{{"name":"waiting for input"}}}})",
                  job));
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + meta;
  if (!events_.empty()) out += ",\n" + events_;
  out += "\n]}\n";
  return out;
}

}  // namespace dlsim::simulator
