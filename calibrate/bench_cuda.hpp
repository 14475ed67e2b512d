#pragma once
// GPU benchmarks of dlcalibrate (`dlcalibrate run gpu`, backend "cuda", built with
// -DDLSIM_WITH_CUDA=ON): cuBLAS GEMM and cuDNN convolution forward, backward-data and
// backward-filter at a zoo model's layer shapes (the shapes `run cpu` measures, bench_cpu.hpp),
// device memory bandwidth (copy, triad) and the cost of an empty kernel launch. Each sample is
// timed with CUDA events around an inner loop on one stream. Conventions and sources are at the
// top of bench_cuda.cu.
//
// This header names no CUDA type: run_commands.cpp, a C++ source, includes it.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace dlsim::calibrate {

// The ops `dlcalibrate run gpu` measures.
const std::vector<std::string>& gpu_ops();

// Adds `gpu` under the `run` subcommand. Without a usable GPU (no driver, no device, or the
// --device asked for is not there) it fails with one InputError line, before creating the
// results file.
void add_run_gpu(CLI::App& run, const std::string& command_line);

}  // namespace dlsim::calibrate
