#include "common/collective_op.hpp"

#include <cmath>

namespace dlsim {

const std::vector<CollectiveOp>& all_ops() {
  static const std::vector<CollectiveOp> ops = {
      CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
      CollectiveOp::kBroadcast, CollectiveOp::kReduce,    CollectiveOp::kAllToAll};
  return ops;
}

std::string to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "allreduce";
    case CollectiveOp::kAllGather:
      return "allgather";
    case CollectiveOp::kReduceScatter:
      return "reducescatter";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kReduce:
      return "reduce";
    case CollectiveOp::kAllToAll:
      return "alltoall";
  }
  return "allreduce";
}

std::optional<CollectiveOp> parse_op(const std::string& s) {
  for (auto op : all_ops()) {
    if (to_string(op) == s) return op;
  }
  return std::nullopt;
}

double busbw_factor(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return static_cast<double>(n - 1) / n;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
      return 1.0;
  }
  return 1.0;
}

bool count_is_share(CollectiveOp op) {
  return op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter ||
         op == CollectiveOp::kAllToAll;
}

double count_elements(CollectiveOp op, double size_bytes, int ranks) {
  const double elements = std::floor(size_bytes / 4);
  return count_is_share(op) ? std::floor(elements / ranks) : elements;
}

}  // namespace dlsim
