#pragma once
// The collective operations, by the names nccl-tests and dlsim use, and nccl-tests' bus-bandwidth
// factor: busbw = algbw x factor (NVIDIA nccl-tests, doc/PERFORMANCE.md). Shared by the
// collective algorithms (networks/) and the calibration results (calibrate/), defined once.

#include <optional>
#include <string>
#include <vector>

namespace dlsim {

enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll };
const std::vector<CollectiveOp>& all_ops();
std::string to_string(CollectiveOp op);  // allreduce, allgather, ...
std::optional<CollectiveOp> parse_op(const std::string& s);
// 2(n-1)/n for allreduce; (n-1)/n for allgather, reducescatter, alltoall; 1 for broadcast, reduce.
double busbw_factor(CollectiveOp op, int ranks);

}  // namespace dlsim
