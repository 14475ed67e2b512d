// NCCL collectives (backend "nccl"), one MPI rank per GPU, as nccl-tests measures them (NVIDIA,
// github.com/NVIDIA/nccl-tests, src/common.cu and src/*.cu):
//
// Set-up: rank 0 makes the ncclUniqueId and MPI_Bcast gives it to every rank, which then joins
//   with ncclCommInitRank (NCCL documentation, "Creating a communicator with options" / "Using
//   NCCL with MPI"). Each rank uses the GPU of its rank on its node (the rank in
//   MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), which is OMPI_COMM_WORLD_LOCAL_RANK under mpirun
//   and SLURM_LOCALID under srun), modulo the GPUs it sees, so that one GPU per rank bound by
//   the launcher (CUDA_VISIBLE_DEVICES) works too.
//
// Sizes: nccl-tests' -b/-e/-f sweep and its size column: the per-rank buffer for allreduce and
//   broadcast, the whole gathered buffer for allgather (recvcount x ranks) and reducescatter
//   (sendcount = recvcount x ranks), of float32 (ncclFloat, ncclSum, broadcast from rank 0). A
//   size whose per-rank count is 0 is left out. Out of place (separate send and receive buffers),
//   as nccl-tests' first (out-of-place) column.
//
// Timing: --warmup calls, then each rank records a CUDA event before and after an inner loop on
//   its stream; the sample is its elapsed time over the calls, and the point's sample is the
//   slowest rank's (MPI_Allreduce, MPI_MAX), as nccl-tests reduces its per-rank times. The ranks
//   agree on the inner count first (rank 0's estimate from the slowest rank's single call, for
//   at least --min-time per sample), and meet at an MPI_Barrier before every sample.
//
// Recorded: ncclGetVersion, the CUDA driver and runtime, the MPI library, every rank's GPU, and
// every NCCL_* variable (NCCL_ALGO and NCCL_PROTO also in each record's params, since they pick
// the algorithm the times belong to).

#include "calibrate/bench_nccl.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "calibrate/driver.hpp"
#include "calibrate/results.hpp"
#include "common/error.hpp"
#include "common/units.hpp"

extern char** environ;  // POSIX: the process's environment, for the NCCL_* variables

namespace dlsim::calibrate {
namespace {

constexpr long kMaxInner = 100000;      // calls in one sample's inner loop, at most (as run mpi)
constexpr std::size_t kMessage = 1024;  // B of an error message passed between ranks

struct NcclOptions {
  std::vector<std::string> ops;
  double from = 8, to = 256.0 * 1024 * 1024, factor = 2;
  int iters = 10, warmup = 3;
  double min_time_s = 1e-3;
  bool resume = false;
  std::string out;
};

class OutOfDeviceMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw OutOfDeviceMemory(fmt::format("{}: {}", call, cudaGetErrorString(e)));
  }
  throw std::runtime_error(fmt::format("{}: {}", call, cudaGetErrorString(e)));
}

void check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return;
  throw std::runtime_error(fmt::format("{}: {}", call, ncclGetErrorString(r)));
}

// "2.21.5" from NCCL_VERSION(X, Y, Z): X x 1000 + Y x 100 + Z up to 2.8, X x 10000 + Y x 100 + Z
// from 2.9 (nccl.h).
std::string nccl_version(int v) {
  if (v >= 10000) return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
  return fmt::format("{}.{}.{}", v / 1000, v / 100 % 10, v % 100);
}

// "12.4" from CUDA's 1000 x major + 10 x minor.
std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

// Thrown on every rank but 0 when the ranks agree to stop on an error rank 0 reports.
struct StopRank {};

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0) check(cudaMalloc(&p_, bytes), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

class Runner {
 public:
  Runner(const NcclOptions& o, const std::string& command) : o_(o), command_(command) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    host_ = name;
    hosts_ = allgather_text(host_);
    nodes_ = static_cast<int>(std::set<std::string>(hosts_.begin(), hosts_.end()).size());
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_free(&local);
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  ~Runner() {
    if (comm_) ncclCommDestroy(comm_);
    if (stop_) cudaEventDestroy(stop_);
    if (start_) cudaEventDestroy(start_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  void run() {
    // 1. A GPU on every rank, or one line from rank 0 and a clean exit everywhere.
    agree_or_fail(pick_device());

    // 2. Rank 0 checks the file and opens it; the others follow its decision.
    std::unique_ptr<ResultsWriter> writer;
    std::set<std::string> done;
    std::string error;
    const auto gpus = allgather_text(gpu_name_);
    int nccl = 0;
    check(ncclGetVersion(&nccl), "ncclGetVersion");
    if (rank_ == 0) {
      try {
        DriverOptions d;
        d.resume = o_.resume;
        d.repetitions = o_.iters;
        d.warmup = o_.warmup;
        d.min_time_s = o_.min_time_s;
        check_options(d, o_.out);
        if (o_.resume && std::filesystem::exists(o_.out)) {
          for (const auto& m : read_results(o_.out, true).measurements) {
            done.insert(resume_key(m.op, m.backend, m.ranks, m.bytes, m.shape));
          }
        }
        writer = std::make_unique<ResultsWriter>(o_.out, provenance(gpus, nccl), o_.resume);
      } catch (const InputError& e) {
        error = e.what();
      }
    }
    agree_or_fail(error);

    // 3. The communicator.
    ncclUniqueId id{};
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");

    params_ = {{"placement", "out-of-place"},
               {"nccl_version", nccl_version(nccl)},
               {"nccl_algo", env_or("NCCL_ALGO", "NCCL's choice")},
               {"nccl_proto", env_or("NCCL_PROTO", "NCCL's choice")}};
    const auto sizes = geometric_sizes(o_.from, o_.to, o_.factor);
    for (const auto& op : o_.ops) {
      for (const double bytes : sizes) {
        if (auto m = measure(op, bytes, done)) {
          if (rank_ == 0) writer->add(*m);
          ++measured_;
        }
      }
    }
    if (rank_ == 0) {
      Provenance end;
      end.load_after = load_average();
      end.notes = left_out_;
      writer->finish(end);
      std::cerr << fmt::format("dlcalibrate: {} points measured into {}{}\n", measured_, o_.out,
                               skipped_ ? fmt::format(" ({} already there)", skipped_) : "");
    }
  }

 private:
  // Every rank's `text`, in rank order.
  std::vector<std::string> allgather_text(const std::string& text) const {
    std::array<char, kMessage> mine{};
    std::strncpy(mine.data(), text.c_str(), kMessage - 1);
    std::vector<char> all(kMessage * static_cast<std::size_t>(size_));
    MPI_Allgather(mine.data(), kMessage, MPI_CHAR, all.data(), kMessage, MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.emplace_back(&all[kMessage * static_cast<std::size_t>(r)]);
    return out;
  }

  // The lowest rank's non-empty `error`, on every rank ("" when there is none).
  std::string first_error(const std::string& error) const {
    int failing = error.empty() ? size_ : rank_;
    MPI_Allreduce(MPI_IN_PLACE, &failing, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (failing == size_) return "";
    std::array<char, kMessage> text{};
    if (rank_ == failing) std::strncpy(text.data(), error.c_str(), kMessage - 1);
    MPI_Bcast(text.data(), kMessage, MPI_CHAR, failing, MPI_COMM_WORLD);
    return text.data();
  }

  // Throws the first rank's error on rank 0 (an InputError: one line, exit code 2) and a quiet
  // StopRank on the others, which leave MPI cleanly.
  void agree_or_fail(const std::string& error) const {
    const std::string first = first_error(error);
    if (first.empty()) return;
    if (rank_ == 0) throw InputError(first);
    throw StopRank{};
  }

  // Chooses and opens this rank's GPU; "" or why it cannot.
  std::string pick_device() {
    const std::string where = fmt::format("rank {} on {}", rank_, host_);
    int devices = 0;
    if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
      // A missing driver and one too old for this CUDA give the same error; the driver's
      // version tells them apart (0 without a driver).
      int driver = 0;
      (void)cudaDriverGetVersion(&driver);
      const std::string why =
          driver == 0 ? fmt::format("no NVIDIA driver is loaded (cudaGetDeviceCount: {})",
                                    cudaGetErrorString(e))
          : driver < CUDART_VERSION
              ? fmt::format("the NVIDIA driver supports CUDA {}, older than this build's CUDA {}",
                            cuda_version(driver), cuda_version(CUDART_VERSION))
              : fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(e));
      return fmt::format("run nccl: no usable CUDA GPU ({}): {}", where, why);
    }
    if (devices == 0) {
      return fmt::format("run nccl: no usable CUDA GPU ({}): the CUDA runtime sees 0 devices",
                         where);
    }
    device_ = local_rank_ % devices;
    try {
      check(cudaSetDevice(device_), "cudaSetDevice");
      cudaDeviceProp prop{};
      check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
      gpu_name_ = prop.name;
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreate(&start_), "cudaEventCreate");
      check(cudaEventCreate(&stop_), "cudaEventCreate");
    } catch (const std::runtime_error& e) {
      return fmt::format("run nccl: GPU {} ({}): {}", device_, where, e.what());
    }
    return "";
  }

  static std::string env_or(const char* name, const char* otherwise) {
    const char* v = std::getenv(name);
    return v ? v : otherwise;
  }

  Provenance provenance(const std::vector<std::string>& gpus, int nccl) const {
    Provenance p = host_provenance(command_);
    p.notes.clear();  // the host CPU's notes (first touch, Eigen threads) are not this run's
    p.versions.erase("eigen");
    p.versions.erase("eigen_simd");
    const std::set<std::string> distinct(hosts_.begin(), hosts_.end());
    p.hosts.assign(distinct.begin(), distinct.end());
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(version, &vlen);
    std::string v(version, static_cast<std::size_t>(vlen));
    if (auto nl = v.find('\n'); nl != std::string::npos) v.resize(nl);
    p.versions["mpi"] = v;
    p.versions["nccl"] = nccl_version(nccl);
    p.versions["nccl_compiled"] = nccl_version(NCCL_VERSION_CODE);
    int driver = 0, runtime = 0;
    check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    p.versions["cuda_driver"] = cuda_version(driver);
    p.versions["cuda_runtime"] = cuda_version(runtime);
    p.versions["cuda_compiled"] = cuda_version(CUDART_VERSION);
    const std::set<std::string> models(gpus.begin(), gpus.end());
    std::string list;
    for (const auto& g : models) list += (list.empty() ? "" : ", ") + g;
    p.devices["gpu"] = list;
    p.devices["gpus"] = std::to_string(size_);
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      const auto eq = kv.find('=');
      if (kv.rfind("NCCL_", 0) == 0 && eq != std::string::npos) {
        p.environment[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
    }
    for (const char* e :
         {"CUDA_VISIBLE_DEVICES", "OMPI_MCA_btl", "OMPI_MCA_pml", "UCX_TLS", "UCX_NET_DEVICES"}) {
      if (const char* value = std::getenv(e)) p.environment[e] = value;
    }
    p.notes = {
        fmt::format("{} NCCL ranks on {} node(s), one GPU each (the rank on its node, modulo "
                    "the GPUs it sees); a sample is the slowest rank's mean over its inner loop, "
                    "timed with CUDA events on its stream",
                    size_, nodes_),
        "nccl-tests' sizes, out of place, float32; NCCL_* as set in the environment "
        "(environment block)"};
    return p;
  }

  // s, this rank's GPU time of `n` calls between two events on its stream.
  double elapsed_s(const std::function<void()>& call, long n) const {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (long i = 0; i < n; ++i) call();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;
  }

  // Samples of `call` on every rank (they all take part), each the slowest rank's mean.
  std::vector<double> time_all(const std::function<void()>& call) const {
    for (int i = 0; i < o_.warmup; ++i) call();
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    MPI_Barrier(MPI_COMM_WORLD);
    double one = elapsed_s(call, 1);
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long inner = std::clamp(static_cast<long>(o_.min_time_s / std::max(one, 1e-9)), 1L, kMaxInner);
    MPI_Bcast(&inner, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    std::vector<double> samples;
    for (int s = 0; s < o_.iters; ++s) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t = elapsed_s(call, inner) / static_cast<double>(inner);
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      samples.push_back(t);
    }
    inner_ = inner;
    return samples;
  }

  // One point, or nullopt when it is skipped (--resume), empty (count 0) or left out (device
  // memory on some rank). Every rank takes the same branch.
  std::optional<Measurement> measure(const std::string& op, double bytes,
                                     const std::set<std::string>& done) {
    const bool whole = op == "allgather" || op == "reducescatter";
    auto count = static_cast<std::size_t>(bytes / sizeof(float));
    if (whole) count /= static_cast<std::size_t>(size_);
    if (count == 0) return std::nullopt;
    const auto ranks = static_cast<std::size_t>(size_);
    const double moved = static_cast<double>(count * sizeof(float) * (whole ? ranks : 1));
    int skip = rank_ == 0 && done.count(resume_key(op, "nccl", size_, moved, "")) ? 1 : 0;
    MPI_Bcast(&skip, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (skip) {
      ++skipped_;
      return std::nullopt;
    }
    const std::size_t send_count = op == "reducescatter" ? count * ranks : count;
    const std::size_t recv_count = op == "allgather" ? count * ranks : count;
    std::unique_ptr<DeviceBuffer> send, recv;
    std::string error;
    try {
      send = std::make_unique<DeviceBuffer>(send_count * sizeof(float));
      recv = std::make_unique<DeviceBuffer>(recv_count * sizeof(float));
      // Written before timing; 0x3c3c3c3c is the float 0.0115, finite through any sum.
      check(cudaMemsetAsync(send->get(), 0x3c, send_count * sizeof(float), stream_),
            "cudaMemsetAsync");
      check(cudaMemsetAsync(recv->get(), 0, recv_count * sizeof(float), stream_),
            "cudaMemsetAsync");
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    } catch (const OutOfDeviceMemory& e) {
      error = fmt::format("rank {}: {}", rank_, e.what());
    }
    if (const auto first = first_error(error); !first.empty()) {
      const auto text =
          fmt::format("{} nccl {}: left out, {}", op, format_bytes(Bytes(moved)), first);
      if (rank_ == 0) std::cerr << "dlcalibrate: warning: " << text << "\n";
      left_out_.push_back(text);
      return std::nullopt;
    }
    void* s = send->get();
    void* r = recv->get();
    std::function<void()> call;
    if (op == "allreduce") {
      call = [&] {
        check(ncclAllReduce(s, r, count, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce");
      };
    } else if (op == "allgather") {
      call = [&] { check(ncclAllGather(s, r, count, ncclFloat, comm_, stream_), "ncclAllGather"); };
    } else if (op == "reducescatter") {
      call = [&] {
        check(ncclReduceScatter(s, r, count, ncclFloat, ncclSum, comm_, stream_),
              "ncclReduceScatter");
      };
    } else {
      call = [&] {
        check(ncclBroadcast(s, r, count, ncclFloat, 0, comm_, stream_), "ncclBroadcast");
      };
    }
    Measurement m;
    m.op = op;
    m.backend = "nccl";
    m.ranks = size_;
    m.nodes = nodes_;
    m.bytes = moved;
    m.samples_s = time_all(call);
    m.params = params_;
    m.params["inner_calls"] = std::to_string(inner_);
    return m;
  }

  const NcclOptions& o_;
  std::string command_;
  int rank_ = 0, size_ = 1, nodes_ = 1, local_rank_ = 0, device_ = 0;
  std::string host_, gpu_name_;
  std::vector<std::string> hosts_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::map<std::string, std::string> params_;
  std::vector<std::string> left_out_;
  mutable long inner_ = 1;
  std::size_t measured_ = 0, skipped_ = 0;
};

}  // namespace

void add_run_nccl(CLI::App& run, const std::string& command_line) {
  auto* c = run.add_subcommand(
      "nccl",
      "NCCL allreduce, allgather, reducescatter and broadcast sweeps (run under mpirun or srun, "
      "one rank per GPU)");
  auto o = std::make_shared<NcclOptions>();
  auto text = std::make_shared<std::map<std::string, std::string>>();
  (*text)["ops"] = "allreduce,allgather,reducescatter,broadcast";
  (*text)["from"] = "8B";
  (*text)["to"] = "256MiB";
  (*text)["min_time"] = "1ms";
  c->add_option("--ops", (*text)["ops"],
                "Comma-separated: allreduce, allgather, reducescatter, broadcast")
      ->capture_default_str();
  c->add_option("-b,--minbytes", (*text)["from"], "Smallest size (nccl-tests' size)")
      ->capture_default_str();
  c->add_option("-e,--maxbytes", (*text)["to"], "Largest size")->capture_default_str();
  c->add_option("-f,--stepfactor", o->factor, "Size multiplier between steps")
      ->capture_default_str();
  c->add_option("-n,--iters", o->iters, "Timed samples per point")->capture_default_str();
  c->add_option("-w,--warmup", o->warmup, "Untimed calls per point")->capture_default_str();
  c->add_option("--min-time", (*text)["min_time"], "Least GPU time of one sample's inner loop")
      ->capture_default_str();
  c->add_flag("--resume", o->resume, "Continue an existing results file");
  c->add_option("-o,--output", o->out, "Results file (JSON Lines), written by rank 0")->required();
  c->callback([o, text, command_line] {
    o->ops = split_list((*text)["ops"]);
    static const std::vector<std::string> known = {"allreduce", "allgather", "reducescatter",
                                                   "broadcast"};
    if (o->ops.empty()) fail_at({}, "--ops", "names no operation");
    for (const auto& op : o->ops) {
      if (std::find(known.begin(), known.end(), op) == known.end()) {
        fail_at({}, "--ops", fmt::format("unknown operation '{}'{}", op, did_you_mean(op, known)));
      }
    }
    o->from = parse_size_flag("--minbytes", (*text)["from"]);
    o->to = parse_size_flag("--maxbytes", (*text)["to"]);
    geometric_sizes(o->from, o->to, o->factor);  // checks the sweep
    try {
      o->min_time_s = parse_seconds((*text)["min_time"]).value();
    } catch (const std::invalid_argument& e) {
      fail_at({}, "--min-time", e.what());
    }
    if (!(o->min_time_s > 0)) fail_at({}, "--min-time", "must be positive");
    if (o->iters < 1) fail_at({}, "--iters", "must be at least 1");
    if (o->warmup < 0) fail_at({}, "--warmup", "must not be negative");
    if (o->out == "-") fail_at({}, "--output", "needs a file (results are appended as measured)");
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    try {
      Runner r(*o, command_line);
      r.run();
    } catch (const StopRank&) {
      // Another rank's error, which rank 0 reports.
    } catch (const InputError&) {
      // Agreed by every rank before any collective call: all leave MPI cleanly.
      MPI_Finalize();
      throw;
    } catch (const std::exception& e) {
      // A CUDA or NCCL failure in the middle of the sweep: the other ranks wait in a collective
      // this rank will not join, so the job is aborted (as nccl-tests' NCCLCHECK does).
      std::cerr << fmt::format("dlcalibrate: error: rank {}: {}\n", rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Finalize();
  });
}

}  // namespace dlsim::calibrate
