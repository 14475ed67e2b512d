#pragma once
// The ranks of a replay and the messages between them (docs/validate.md, "Replay"). With MPI
// (DLSIM_HAVE_MPI) every rank of the MPI job is a worker; without it, the replay is one rank.
// Every call is collective (all ranks make it, in the same order) unless it says otherwise. A
// failing MPI call throws MpiError with the library's own message.

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlsim::validate {

class MpiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A parameter server's part of a fused buffer: elements [offset, offset + count) live on `server`.
struct Shard {
  int server = 0;
  std::int64_t offset = 0, count = 0;
};

class ReplayComm {
 public:
  virtual ~ReplayComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string host() const = 0;     // this rank's node name
  virtual std::string library() const = 0;  // "Open MPI v4.1.4, ..." or "none (one rank)"

  // Sums `n` floats over the ranks in place with the ring algorithm: N - 1 reduce-scatter steps
  // then N - 1 allgather steps, each rank sending one chunk of about n / N to its right
  // neighbour per step (Patarasuk & Yuan 2009; NCCL's and Horovod's ring).
  virtual void ring_allreduce(float* data, std::int64_t n, int tag) = 0;
  // Parameter-server exchange of one buffer: every rank pushes each shard to its server, the
  // server sums the pushes, every rank pulls the sums back (Li et al. 2014).
  virtual void ps_exchange(float* data, const std::vector<Shard>& shards, int tag) = 0;
  // Bitwise AND over the ranks, in place (Horovod's response-cache negotiation).
  virtual void and_bits(std::vector<std::uint64_t>& bits) = 0;
  // True on every rank when `mine` is true on every rank.
  virtual bool all(bool mine) = 0;
  // Rank 0 gets every rank's string in rank order; the others get an empty list.
  virtual std::vector<std::string> gather(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // Time spent in the ring's point-to-point steps (each send and receive posted, until both are
  // done) and the bytes this rank sent in them, since the communicator was made: what the
  // exchange actually got from the link, beside what a calibration measured on it.
  struct Transfers {
    double seconds = 0;
    double bytes_sent = 0;
  };
  virtual Transfers ring_transfers() const { return {}; }
  // Ends the whole job with `code` (not collective: after an error on one rank).
  [[noreturn]] virtual void abort(int code) = 0;
};

// The communicator of this process: MPI's world when built with MPI (initializing MPI with
// threads serialized: the exchange runs on its own thread), else one rank.
std::unique_ptr<ReplayComm> make_replay_comm(int* argc, char*** argv);

}  // namespace dlsim::validate
