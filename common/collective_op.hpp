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
// What nccl-tests prints in its count column for a size of `size_bytes` (its size column) on
// `ranks` ranks, in 4-byte floats: the whole buffer for allreduce, broadcast and reduce; each
// rank's share for allgather and reducescatter; each peer's share for alltoall
// (NVIDIA/nccl-tests, src/*.cu, the *GetCollByteCount functions' paramcount, which nccl-tests
// also rounds down to a multiple of 4 elements; here the size is kept as given). 0 when the size
// holds less than one element per rank.
double count_elements(CollectiveOp op, double size_bytes, int ranks);
// Whether nccl-tests' count is a share of its size (allgather, reducescatter: each rank's;
// alltoall: each peer's) rather than the whole buffer (allreduce, broadcast, reduce).
bool count_is_share(CollectiveOp op);

}  // namespace dlsim
