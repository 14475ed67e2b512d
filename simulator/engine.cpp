#include "simulator/engine.hpp"

#include <fmt/format.h>
#include <limits>

#include "common/error.hpp"

namespace dlsim::simulator {

const CollectivePlan& CollectivePlanner::plan(const CommGroup& group) {
  auto& slot = cache_[group_key(group)];
  if (slot) return *slot;
  if (!algorithm_) {
    algorithm_ = networks::collective_algorithms().at(setup_.resolved.strategy).make();
    if (!algorithm_->supports(networks::CollectiveOp::kAllReduce)) {
      fail_at({}, "--strategy", fmt::format("'{}' cannot allreduce", setup_.resolved.strategy));
    }
  }
  const auto req = request(group);
  auto p = std::make_unique<CollectivePlan>();
  const auto& library = setup_.cluster->library;
  for (const auto& proto : library.protocols) {
    const Seconds t = algorithm_->closed_form(req, setup_.comm, proto).time;
    if (!p->protocol || t < p->model_time) {
      p->protocol = &proto;
      p->model_time = t;
    }
  }
  // The size-independent part: the same collective of one byte.
  networks::CollectiveRequest tiny = req;
  tiny.size = Bytes(1);
  tiny.ps.tensors = {1.0};
  p->latency = algorithm_->closed_form(tiny, setup_.comm, *p->protocol).time;
  slot = std::move(p);
  return *slot;
}

networks::CollectiveRequest CollectivePlanner::request(const CommGroup& group) const {
  networks::CollectiveRequest req;
  req.op = networks::CollectiveOp::kAllReduce;
  req.size = Bytes(group.bytes);
  req.ps = group.ps;
  return req;
}

networks::Schedule CollectivePlanner::schedule(const CommGroup& group) {
  const auto& p = plan(group);
  return algorithm_->schedule(request(group), setup_.comm, *p.protocol);
}

Seconds CollectivePlanner::copy_time(double bytes) const {
  const auto& g = *setup_.gpu;
  return kernel_time(Flops(0), Bytes(2 * bytes), g.peak_for(Precision::kFp32), g.gemm,
                     g.memory_bandwidth, g.memory, g.kernel_launch);
}

Seconds small_allreduce_time(const networks::Communicator& comm, Bytes bytes) {
  if (comm.size() < 2) return Seconds(0);
  Seconds best(std::numeric_limits<double>::infinity());
  networks::CollectiveRequest req;
  req.size = bytes;
  for (const char* name : {"tree", "ring", "hd"}) {
    const auto algo = networks::collective_algorithms().at(name).make();
    for (const auto& proto : comm.library->protocols) {
      best = std::min(best, algo->closed_form(req, comm, proto).time);
    }
  }
  return best;
}

}  // namespace dlsim::simulator
