#pragma once
// A compute thread beside a rank's communication calls, as a training step's backward pass runs
// beside its exchange thread (`run mpi --cpu-cost`, `run gloo --cpu-cost`; docs/calibrate.md,
// "Benchmarks"): it repeats a fixed unit of a training step's kind of work, a float32 matrix
// product of 256 x 256 operands (Eigen's blocked GEMM, 768 KiB of operands: it uses the caches
// as convolutions and GEMMs do, so it also feels what the exchange's copies and sums do to
// them), and counts the units done. It inherits the rank's CPU binding, so it shares the rank's
// cores with the library's progress, its TCP sends and receives and its summation.

#include <Eigen/Core>
#include <atomic>
#include <cstdint>
#include <thread>

namespace dlsim::calibrate {

// Least time (s) of the busy thread's rate measurement and of each loop of calls beside it:
// many of the thread's units (about a millisecond each here), so their count is exact to a few
// per cent.
constexpr double kBesideLoopSeconds = 0.05;

class BusyThread {
 public:
  BusyThread()
      : thread_([this] {
          constexpr int n = 256;
          const Eigen::MatrixXf a = Eigen::MatrixXf::Constant(n, n, 0.5f);
          const Eigen::MatrixXf b = Eigen::MatrixXf::Constant(n, n, 0.25f);
          Eigen::MatrixXf c(n, n);
          while (!stop_.load(std::memory_order_relaxed)) {
            c.noalias() = a * b;
            sink_ = c(0, 0);
            units_.fetch_add(1, std::memory_order_relaxed);
          }
        }) {}
  ~BusyThread() {
    stop_ = true;
    thread_.join();
  }
  BusyThread(const BusyThread&) = delete;
  BusyThread& operator=(const BusyThread&) = delete;
  std::uint64_t units() const { return units_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> units_{0};
  volatile float sink_ = 0;
  std::thread thread_;
};

}  // namespace dlsim::calibrate
