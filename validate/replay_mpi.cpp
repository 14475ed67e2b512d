// The replay's communicator over MPI (point-to-point ring and parameter-server messages, an
// AND-allreduce for negotiation), or a single rank where dlsim is built without MPI.

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>

#include "validate/replay_comm.hpp"

#ifdef DLSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace dlsim::validate {
namespace {

class SingleRank final : public ReplayComm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string host() const override {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return name;
  }
  std::string library() const override { return "none (one rank)"; }
  void ring_allreduce(float*, std::int64_t, int) override {}
  void ps_exchange(float*, const std::vector<Shard>&, int) override {}
  void and_bits(std::vector<std::uint64_t>&) override {}
  bool all(bool mine) override { return mine; }
  std::vector<std::string> gather(const std::string& mine) override { return {mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

#ifdef DLSIM_HAVE_MPI

// Messages are cut into pieces of at most 1 GiB (MPI counts are int).
constexpr std::int64_t kMaxCount = std::int64_t{1} << 28;

class Mpi final : public ReplayComm {
 public:
  Mpi(int* argc, char*** argv) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED) {
      throw MpiError(
          "the MPI library does not allow calls from a second thread "
          "(MPI_THREAD_SERIALIZED), which the replay's exchange needs");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~Mpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string host() const override {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, static_cast<std::size_t>(len));
  }
  std::string library() const override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(v, &len);
    std::string s(v, static_cast<std::size_t>(len));
    s = s.substr(0, s.find_first_of("\n,"));
    return s;
  }

  void ring_allreduce(float* data, std::int64_t n, int tag) override {
    const int N = size_;
    if (N == 1 || n == 0) return;
    auto lo = [&](int c) { return n * c / N; };
    const int right = (rank_ + 1) % N, left = (rank_ + N - 1) % N;
    scratch_.resize(static_cast<std::size_t>(lo(1) + 1 + n / N + 1));
    // Reduce-scatter: after step k, chunk (rank - k - 1) holds k + 2 ranks' sum.
    for (int k = 0; k < N - 1; ++k) {
      const int send = ((rank_ - k) % N + N) % N, recv = ((rank_ - k - 1) % N + N) % N;
      const std::int64_t sn = lo(send + 1) - lo(send), rn = lo(recv + 1) - lo(recv);
      scratch_.resize(static_cast<std::size_t>(std::max<std::int64_t>(rn, 1)));
      sendrecv(data + lo(send), sn, right, scratch_.data(), rn, left, tag);
      float* dst = data + lo(recv);
      for (std::int64_t i = 0; i < rn; ++i) dst[i] += scratch_[static_cast<std::size_t>(i)];
    }
    // Allgather: rank r owns the full sum of chunk (r + 1) mod N and passes it on.
    for (int k = 0; k < N - 1; ++k) {
      const int send = ((rank_ + 1 - k) % N + N) % N, recv = ((rank_ - k) % N + N) % N;
      sendrecv(data + lo(send), lo(send + 1) - lo(send), right, data + lo(recv),
               lo(recv + 1) - lo(recv), left, tag);
    }
  }

  void ps_exchange(float* data, const std::vector<Shard>& shards, int tag) override {
    if (size_ == 1) return;
    // Push: each rank sends every shard to its server; a server receives the others' copies.
    std::vector<MPI_Request> reqs;
    std::vector<std::vector<float>> inbox;
    for (const auto& s : shards) {
      if (s.count == 0) continue;
      if (s.server == rank_) {
        for (int r = 0; r < size_; ++r) {
          if (r == rank_) continue;
          inbox.emplace_back(static_cast<std::size_t>(s.count));
          post_irecv(inbox.back().data(), s.count, r, tag, reqs);
        }
      } else {
        post_isend(data + s.offset, s.count, s.server, tag, reqs);
      }
    }
    wait(reqs, "MPI_Waitall (push)");
    // Sum on the server.
    std::size_t box = 0;
    for (const auto& s : shards) {
      if (s.count == 0 || s.server != rank_) continue;
      float* dst = data + s.offset;
      for (int r = 0; r + 1 < size_; ++r, ++box) {
        const auto& in = inbox[box];
        for (std::int64_t i = 0; i < s.count; ++i) dst[i] += in[static_cast<std::size_t>(i)];
      }
    }
    // Pull: the server sends the sums back to every other rank.
    for (const auto& s : shards) {
      if (s.count == 0) continue;
      if (s.server == rank_) {
        for (int r = 0; r < size_; ++r) {
          if (r != rank_) post_isend(data + s.offset, s.count, r, tag + 1, reqs);
        }
      } else {
        post_irecv(data + s.offset, s.count, s.server, tag + 1, reqs);
      }
    }
    wait(reqs, "MPI_Waitall (pull)");
  }

  void and_bits(std::vector<std::uint64_t>& bits) override {
    check(MPI_Allreduce(MPI_IN_PLACE, bits.data(), static_cast<int>(bits.size()), MPI_UINT64_T,
                        MPI_BAND, MPI_COMM_WORLD),
          "MPI_Allreduce (negotiation)");
  }
  bool all(bool mine) override {
    int v = mine ? 1 : 0;
    check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), "MPI_Allreduce");
    return v != 0;
  }
  std::vector<std::string> gather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<std::size_t>(size_));
    check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    std::vector<int> displs(lens.size(), 0);
    for (std::size_t i = 1; i < lens.size(); ++i) displs[i] = displs[i - 1] + lens[i - 1];
    std::string all(rank_ == 0 ? static_cast<std::size_t>(displs.back() + lens.back()) : 0, '\0');
    check(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                      0, MPI_COMM_WORLD),
          "MPI_Gatherv");
    std::vector<std::string> out;
    if (rank_ != 0) return out;
    for (std::size_t i = 0; i < lens.size(); ++i) {
      out.push_back(
          all.substr(static_cast<std::size_t>(displs[i]), static_cast<std::size_t>(lens[i])));
    }
    return out;
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  Transfers ring_transfers() const override { return ring_; }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  void check(int rc, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw MpiError(fmt::format("{} failed on rank {}: {}", what, rank_,
                               std::string(text, static_cast<std::size_t>(len))));
  }
  void sendrecv(const float* s, std::int64_t sn, int to, float* r, std::int64_t rn, int from,
                int tag) {
    std::vector<MPI_Request> reqs;
    const double start = MPI_Wtime();
    post_irecv(r, rn, from, tag, reqs);
    post_isend(s, sn, to, tag, reqs);
    wait(reqs, "MPI_Waitall (ring step)");
    ring_.seconds += MPI_Wtime() - start;
    ring_.bytes_sent += 4.0 * static_cast<double>(sn);
  }
  void post_isend(const float* p, std::int64_t n, int to, int tag, std::vector<MPI_Request>& reqs) {
    for (std::int64_t at = 0; at < n; at += kMaxCount) {
      reqs.emplace_back();
      check(MPI_Isend(p + at, static_cast<int>(std::min(kMaxCount, n - at)), MPI_FLOAT, to,
                      tag & 0x7fff, MPI_COMM_WORLD, &reqs.back()),
            "MPI_Isend");
    }
  }
  void post_irecv(float* p, std::int64_t n, int from, int tag, std::vector<MPI_Request>& reqs) {
    for (std::int64_t at = 0; at < n; at += kMaxCount) {
      reqs.emplace_back();
      check(MPI_Irecv(p + at, static_cast<int>(std::min(kMaxCount, n - at)), MPI_FLOAT, from,
                      tag & 0x7fff, MPI_COMM_WORLD, &reqs.back()),
            "MPI_Irecv");
    }
  }
  void wait(std::vector<MPI_Request>& reqs, const char* what) {
    if (reqs.empty()) return;
    const int rc = MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    reqs.clear();
    check(rc, what);
  }

  int rank_ = 0, size_ = 1;
  std::vector<float> scratch_;
  Transfers ring_;
};

#endif

}  // namespace

std::unique_ptr<ReplayComm> make_replay_comm([[maybe_unused]] int* argc,
                                             [[maybe_unused]] char*** argv) {
#ifdef DLSIM_HAVE_MPI
  return std::make_unique<Mpi>(argc, argv);
#else
  return std::make_unique<SingleRank>();
#endif
}

}  // namespace dlsim::validate
