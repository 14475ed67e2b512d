#include "calibrate/profile.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <tuple>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "calibrate/fit.hpp"
#include "common/error.hpp"
#include "hardware/loader.hpp"

namespace dlsim::calibrate {
namespace {

// YAML double-quoted scalar.
std::string q(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

// A cost per call and per byte (s, s/B) by ordinary least squares on the seconds themselves:
// the large calls, which carry almost all of a step's bytes, weigh the most, and the small ones'
// noise (a fraction of a millisecond) cannot tilt the slope as relative residuals would. A
// negative intercept is refitted through the origin. worst_relative_error over every point.
AlphaBeta fit_cost(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  const double n = static_cast<double>(bytes.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    sx += bytes[i];
    sy += seconds[i];
    sxx += bytes[i] * bytes[i];
    sxy += bytes[i] * seconds[i];
  }
  AlphaBeta f;
  const double d = n * sxx - sx * sx;
  f.beta = d > 0 ? (n * sxy - sx * sy) / d : 0;
  f.alpha = (sy - f.beta * sx) / n;
  if (f.alpha < 0 || f.beta < 0) {
    f.alpha = 0;
    f.beta = sxx > 0 ? std::max(0.0, sxy / sxx) : 0;
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double fit = f.alpha + f.beta * bytes[i];
    if (seconds[i] > 0) {
      f.worst_relative_error =
          std::max(f.worst_relative_error, std::abs(fit - seconds[i]) / seconds[i]);
    }
  }
  return f;
}

std::string gbps(double bytes_per_s) { return q(fmt::format("{:.6g}GB/s", bytes_per_s / 1e9)); }
std::string us(double s) { return q(fmt::format("{:.6g}us", s * 1e6)); }

// How much later a call ended beside a busy compute thread than alone (`run mpi|gloo
// --cpu-cost`: params.s_per_call_beside_compute less the median sample), s; none where not
// measured.
std::optional<double> wait_beside_compute(const Measurement& m) {
  const auto b = m.params.find("s_per_call_beside_compute");
  if (b == m.params.end() || m.samples_s.empty()) return std::nullopt;
  return std::max(0.0, std::stod(b->second) - m.median_s());
}

// A library's `host_cpu` line: the compute a call takes, c0 + c1 S, and where measured the
// call's own wait for the cores (docs/hardware-format.md).
std::string host_cpu_line(const AlphaBeta& cpu, const std::optional<AlphaBeta>& wait) {
  const auto per_byte = [](double s_per_byte) {
    return q(fmt::format("{:.6g}ns", std::max(0.0, s_per_byte) * 1e9));
  };
  const std::string wait_keys =
      wait ? fmt::format(", wait_per_call: {}, wait_per_byte: {}", us(std::max(0.0, wait->alpha)),
                         per_byte(wait->beta))
           : "";
  return fmt::format("  host_cpu: {{per_call: {}, per_byte: {}{}}}\n", us(std::max(0.0, cpu.alpha)),
                     per_byte(cpu.beta), wait_keys);
}

// The report line of a fitted wait: `call` names the call ("an MPI allreduce beside ...").
std::string wait_report(const std::string& call, const AlphaBeta& wait) {
  return fmt::format(
      "{} ends {:.1f} us + {:.3f} ns/B later than alone (worst error {:.1f} %): the wait for a "
      "core, where cores are shared",
      call, std::max(0.0, wait.alpha) * 1e6, std::max(0.0, wait.beta) * 1e9,
      wait.worst_relative_error * 100);
}
// gloo's CPU cost of the n-rank series: the process CPU time per call (params.cpu_s_per_call,
// the slowest rank's), c0 + c1 S by least squares over every size, and where run gloo
// --cpu-cost timed it, the call's wait beside a busy thread (its time there less alone).
struct GlooCpu {
  std::optional<AlphaBeta> cpu, wait;
  std::size_t sizes = 0;  // sizes with a CPU time
};
GlooCpu gloo_cpu(const std::vector<Measurement>& gloo, int n) {
  std::vector<double> size, cpu, wait_size, wait;
  for (const auto& m : gloo) {
    if (m.ranks != n) continue;
    if (const auto w = wait_beside_compute(m)) {
      wait_size.push_back(m.bytes);
      wait.push_back(*w);
    }
    if (const auto c = m.params.find("cpu_s_per_call"); c != m.params.end()) {
      size.push_back(m.bytes);
      cpu.push_back(std::stod(c->second));
    }
  }
  GlooCpu g;
  g.sizes = size.size();
  if (size.size() >= 2) g.cpu = fit_alpha_beta(size, cpu);
  if (wait_size.size() >= 2) g.wait = fit_cost(wait_size, wait);
  return g;
}

// The library of a gloo job: the `mpi` library's ring at link efficiency 1 (the links are
// measured rates) with gloo's host CPU cost; `between` says between which ranks it was measured.
std::string gloo_library_yaml(const std::string& name, const std::string& between,
                              const std::string& files, const GlooCpu& g) {
  std::string lib = "library:\n";
  lib += "  extends: \"mpi\"\n";
  lib += fmt::format("  name: {}\n", q(name + "-gloo"));
  lib += fmt::format("  description: {}\n",
                     q(fmt::format("gloo (PyTorch's ProcessGroupGloo) between {}", between)));
  lib += fmt::format("  source: {}\n", q("dlcalibrate fit of " + files));
  lib += "  link_efficiency: {nvlink: 1, pcie: 1}   # the links are measured rates\n";
  if (g.cpu) lib += host_cpu_line(*g.cpu, g.wait);
  return lib;
}

// Work and sizes must be positive in a profile: a curve already flat at the smallest size
// measured gets the least value the format takes instead of 0.
std::string gflops(double f) { return q(fmt::format("{:.6g}GFLOP", std::max(f, 1.0) / 1e9)); }
std::string gflop_rate(double f) { return q(fmt::format("{:.6g}GFLOP/s", f / 1e9)); }
std::string bytes(double b) { return q(fmt::format("{:.0f}B", std::max(1.0, b))); }

struct Points {
  std::vector<double> size, rate;
};

// Median rate per size for the records of `ops` on `backend`: FLOP/s by FLOP for compute, B/s
// by bytes for memory. A compute rate measured in another precision than fp32 is scaled by
// `to_fp32[dtype]` (the fp32 peak over that precision's peak), so that rates of several
// precisions share one curve, the fraction of each precision's own peak, as dlsim applies it
// (simulator/compute.cpp: a GEMM's efficiency multiplies its precision's peak). A precision
// without a factor is left out.
Points rates(const std::vector<Measurement>& ms, const std::set<std::string>& ops,
             const std::string& backend, bool compute,
             const std::map<std::string, double>& to_fp32 = {}) {
  std::map<double, std::vector<double>> by;
  for (const auto& m : ms) {
    if (!ops.count(m.op) || m.backend != backend) continue;
    double factor = 1;
    if (compute && m.dtype != "float32") {
      const auto f = to_fp32.find(m.dtype);
      if (f == to_fp32.end()) continue;
      factor = f->second;
    }
    const double x = compute ? m.flops : m.bytes;
    const double r = (compute ? m.flop_rate() : m.algbw()) * factor;
    if (x > 0 && r > 0) by[x].push_back(r);
  }
  Points p;
  for (auto& [x, rs] : by) {
    std::sort(rs.begin(), rs.end());
    p.size.push_back(x);
    p.rate.push_back(rs[rs.size() / 2]);
  }
  return p;
}

// GPU to GPU (docs/calibrate.md, "The profile"): the GEMM rates of `run gpu` from several GPUs,
// one results file or more per GPU (a GPU is its hosts and PCI bus id, else its file; in a
// collected job's file, each record's host and gpu_pci_bus_id). Each GPU's
// speed is the geometric mean, over the GEMM shapes and precisions every GPU measured, of its rate
// over the median GPU's at that shape; the spread is the coefficient of variation of those
// speeds (sample standard deviation over the mean) without the outliers: GPUs beyond Tukey's
// fences, Q1 - 1.5 IQR and Q3 + 1.5 IQR of the speeds (the box plot's whiskers, as Sinha et
// al. read "variation"), which are named instead. Also the GPUs' own noise: the median over
// GPUs and shapes of (max - min) / median of a record's samples.
struct GpuSpread {
  int gpus = 0;
  int shapes = 0;
  double spread = 0;
  double slowest = 1, fastest = 1;  // speeds of the GPUs kept, the median GPU's = 1
  double noise = 0;
  std::vector<std::pair<std::string, double>> outliers;  // GPU, its speed
};

std::optional<GpuSpread> gpu_spread(const std::vector<Results>& results,
                                    const std::function<double(const Measurement&)>& stat) {
  std::map<std::string, std::map<std::string, double>> rate;  // GPU -> shape -> FLOP/s
  std::vector<double> noise;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& pv = results[i].provenance;
    std::string file_id;
    for (const auto& h : pv.hosts) file_id += h + ",";
    const auto bus = pv.devices.find("gpu_pci_bus_id");
    file_id += bus != pv.devices.end() ? bus->second : fmt::format("file {}", i);
    for (const auto& m : results[i].measurements) {
      const double t = stat(m);
      if (m.op != "gemm" || m.backend != "cuda" || m.flops <= 0 || t <= 0) continue;
      // A collected job's file tags each record with its host and GPU (`collect`).
      const auto host = m.params.find("host");
      const auto gpu = m.params.find("gpu_pci_bus_id");
      const std::string id = gpu == m.params.end()
                                 ? file_id
                                 : (host == m.params.end() ? "" : host->second + ",") + gpu->second;
      rate[id][m.dtype + " " + m.shape] = m.flops / t;
      if (m.samples_s.size() > 1) noise.push_back((m.max_s() - m.min_s()) / m.median_s());
    }
  }
  if (rate.size() < 3) return std::nullopt;
  std::set<std::string> common;
  for (const auto& [shape, r] : rate.begin()->second) common.insert(shape);
  for (const auto& [gpu, shapes] : rate) {
    std::set<std::string> keep;
    for (const auto& k : common) {
      if (shapes.count(k)) keep.insert(k);
    }
    common = keep;
  }
  GpuSpread out;
  out.gpus = static_cast<int>(rate.size());
  out.shapes = static_cast<int>(common.size());
  if (common.empty()) return out;
  std::map<std::string, double> log_speed;
  for (const auto& k : common) {
    std::vector<double> at;
    for (const auto& [gpu, shapes] : rate) at.push_back(shapes.at(k));
    std::sort(at.begin(), at.end());
    const double median =
        at.size() % 2 ? at[at.size() / 2] : (at[at.size() / 2 - 1] + at[at.size() / 2]) / 2;
    for (const auto& [gpu, shapes] : rate) {
      log_speed[gpu] += std::log(shapes.at(k) / median) / static_cast<double>(common.size());
    }
  }
  std::vector<double> sorted;
  for (const auto& [gpu, l] : log_speed) sorted.push_back(std::exp(l));
  std::sort(sorted.begin(), sorted.end());
  const auto quartile = [&](double q) {  // linear between order statistics
    const double at = q * static_cast<double>(sorted.size() - 1);
    const auto i = static_cast<std::size_t>(at);
    const double f = at - static_cast<double>(i);
    return i + 1 < sorted.size() ? sorted[i] + f * (sorted[i + 1] - sorted[i]) : sorted[i];
  };
  const double q1 = quartile(0.25), q3 = quartile(0.75);
  std::vector<double> speed;
  for (const auto& [gpu, l] : log_speed) {
    const double v = std::exp(l);
    if (v < q1 - 1.5 * (q3 - q1) || v > q3 + 1.5 * (q3 - q1)) {
      out.outliers.emplace_back(gpu, v);
    } else {
      speed.push_back(v);
    }
  }
  if (speed.size() < 2) speed = sorted;
  double mean = 0;
  for (double v : speed) mean += v / static_cast<double>(speed.size());
  double var = 0;
  for (double v : speed) var += (v - mean) * (v - mean) / static_cast<double>(speed.size() - 1);
  out.spread = std::sqrt(var) / mean;
  out.slowest = *std::min_element(speed.begin(), speed.end());
  out.fastest = *std::max_element(speed.begin(), speed.end());
  if (!noise.empty()) {
    std::sort(noise.begin(), noise.end());
    out.noise = noise[noise.size() / 2];
  }
  return out;
}

}  // namespace

FittedProfile fit_profile(const std::vector<Results>& results, const ProfileOptions& o) {
  if (o.name.empty()) fail_at({}, "--name", "the profile needs a name");
  FittedProfile out;
  std::vector<Measurement> ms;
  std::set<std::string> hosts, tools, dates;
  std::string host_cpu;     // the CPU model the results name
  std::string host_memory;  // and its memory ("16777216000B"), where recorded
  double host_cores = 0;
  std::string gpu_sms;  // the GPU's multiprocessors, where a GPU benchmark recorded them
  for (const auto& r : results) {
    ms.insert(ms.end(), r.measurements.begin(), r.measurements.end());
    if (const auto s = r.provenance.devices.find("gpu_multiprocessors");
        s != r.provenance.devices.end()) {
      const auto& v = s->second;
      const bool digits =
          !v.empty() && v.size() <= 4 &&
          std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
      if (!digits || std::stoi(v) < 1 || std::stoi(v) > 1024) {
        fail_at({}, "provenance.devices.gpu_multiprocessors",
                fmt::format("must be an SM count in 1..1024, got '{}'", v));
      }
      gpu_sms = v;
    }
    if (const auto c = r.provenance.devices.find("cpu"); c != r.provenance.devices.end()) {
      host_cpu = c->second;
    }
    if (r.provenance.devices.count("cpu_cores")) {
      host_cores = std::max(host_cores, recorded_cores(r.provenance));
    }
    if (const auto m = r.provenance.devices.find("memory"); m != r.provenance.devices.end()) {
      host_memory = m->second;
    }
    hosts.insert(r.provenance.hosts.begin(), r.provenance.hosts.end());
    tools.insert(r.provenance.tool);
    if (!r.provenance.date.empty()) dates.insert(r.provenance.date);
    if (r.provenance.load_before && r.provenance.load_after && was_busy(r.provenance)) {
      out.warnings.push_back(fmt::format(
          "the machine was busy while measuring (load average {:.2f} before, {:.2f} after on {} "
          "cores)",
          *r.provenance.load_before, *r.provenance.load_after, recorded_cores(r.provenance)));
    }
  }
  if (ms.empty()) fail_at({}, "RESULTS", "no measurements to fit");
  const auto base = hardware::load_cluster(o.base);
  if (base.groups.size() != 1) {
    fail_at({o.base}, "--base", "a base cluster with one node type is needed");
  }
  const auto& node = base.groups.front().node;
  const auto& net = base.network;

  std::string files;
  for (const auto& f : o.results_files) files += (files.empty() ? "" : ", ") + f;
  std::string host_list;
  for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
  std::string date_list;
  for (const auto& d : dates) date_list += (date_list.empty() ? "" : ", ") + d;
  std::string tool_list;
  for (const auto& t : tools) tool_list += (tool_list.empty() ? "" : ", ") + t;

  // The sample that stands for a record (`--statistic`).
  const auto stat = [&](const Measurement& m) {
    return o.statistic == Statistic::kMin ? m.min_s() : m.median_s();
  };
  // The fastest FLOP rate a layer of a `run torch` table reached on the CPU: the CPU device's
  // peak where no GEMM sweep measured one (its efficiency is 1 there).
  double table_peak = 0;
  for (const auto& m : ms) {
    const auto d = m.params.find("device");
    const bool cpu = d == m.params.end() || d->second == "cpu";
    const double t = stat(m);
    if (m.backend == "torch" && cpu && m.flops > 0 && t > 0) {
      table_peak = std::max(table_peak, m.flops / t);
    }
  }
  std::string gpu_yaml, network_yaml, library_yaml;
  std::vector<std::string> host_fields;  // the node's `host` keys that were measured
  const std::string host_cpu_name = host_cpu.empty() ? node.host.cpu : host_cpu;
  // The host CPU as the compute device (a `gpu` entry of the node), from a sweep or a table:
  // its capacity is the host's memory as recorded, else the base's.
  const auto cpu_device = [&](const std::string& description, const std::string& source,
                              double peak, double bandwidth, const std::string& efficiency) {
    std::string y;
    y += fmt::format("    name: {}\n", q(o.name + "-cpu"));
    y += fmt::format("    description: {}\n", q(description));
    y += fmt::format("    source: {}\n", q(source));
    y += fmt::format("    peak: {{fp32: {}}}\n", gflop_rate(peak));
    y += fmt::format(
        "    memory: {{capacity: {}, bandwidth: {}}}\n",
        q(host_memory.empty() ? fmt::format("{:.0f}B", node.host.memory.value()) : host_memory),
        gbps(bandwidth));
    y += "    efficiency:\n" + efficiency;
    y += fmt::format("    kernel_launch: {}\n", us(0));
    y += "    step_jitter: 0\n";
    return y;
  };

  // ---- device ----
  for (const std::string backend : {"cpu", "cuda"}) {
    // The base GPU's datasheet peaks put fp16/bf16 rates on the fp32 scale (a CPU measures
    // fp32 only).
    std::map<std::string, double> to_fp32;
    if (backend == "cuda") {
      const auto& peaks = node.gpu.peak;
      const auto fp32 = peaks.find("fp32");
      for (const auto& [dtype, key] :
           {std::pair{"float16", "fp16"}, std::pair{"bfloat16", "bf16"}}) {
        const auto p = peaks.find(key);
        if (fp32 != peaks.end() && p != peaks.end() && p->second.value() > 0) {
          to_fp32[dtype] = fp32->second.value() / p->second.value();
        }
      }
    }
    const auto gemm = rates(ms, {"gemm"}, backend, true, to_fp32);
    const auto conv = rates(ms, {"conv_fwd"}, backend, true, to_fp32);
    const auto mem = rates(ms, {"copy", "triad"}, backend, false);
    if (gemm.size.size() < 2 && mem.size.size() < 2) continue;
    if (!gpu_yaml.empty()) fail_at({}, "RESULTS", "results of both a CPU and a GPU device");
    std::optional<SaturatingFit> g, c, m;
    if (gemm.size.size() >= 2) g = fit_saturating(gemm.size, gemm.rate);
    if (conv.size.size() >= 2) c = fit_saturating(conv.size, conv.rate);
    if (mem.size.size() >= 2) {
      const double top = *std::max_element(mem.rate.begin(), mem.rate.end());
      if (mem.rate.back() < 0.8 * top && mem.size.size() >= 3) {
        // Rates that fall with size are caches giving way to memory (a CPU): the bandwidth is
        // that of the largest arrays, beyond the last-level cache: the median of the plateau the
        // largest sizes reach (up to 3 of them, each within 25 % of the largest size's rate).
        const std::size_t n = mem.size.size();
        std::size_t from = n - 1;
        while (from > 0 && n - from < 3 &&
               std::abs(mem.rate[from - 1] - mem.rate.back()) <= 0.25 * mem.rate.back()) {
          --from;
        }
        std::vector<double> tail(mem.rate.begin() + static_cast<std::ptrdiff_t>(from),
                                 mem.rate.end());
        std::sort(tail.begin(), tail.end());
        SaturatingFit f;
        f.rate = tail[tail.size() / 2];
        f.points = tail.size();
        for (std::size_t i = from; i < n; ++i) {
          const double e = std::abs(mem.rate[i] - f.rate) / mem.rate[i];
          if (e > f.worst_relative_error) {
            f.worst_relative_error = e;
            f.worst_at = mem.size[i];
          }
        }
        out.report.push_back(fmt::format(
            "{} memory: rates fall from {:.1f} to {:.1f} GB/s as arrays outgrow the caches; the "
            "bandwidth is the median of the {} largest size(s) on that plateau ({} .. {} B per "
            "call)",
            backend, top / 1e9, mem.rate.back() / 1e9, tail.size(), mem.size[from],
            mem.size.back()));
        if (tail.size() < 3) {
          out.warnings.push_back(fmt::format(
              "{} memory: the rate still falls at the largest sizes ({:.1f} GB/s at {} B per "
              "call, {:.1f} GB/s before): measure larger arrays (run cpu --ops copy -e) for the "
              "memory's own rate",
              backend, mem.rate.back() / 1e9, mem.size.back(), mem.rate[n - 2] / 1e9));
        }
        m = f;
      } else {
        m = fit_saturating(mem.size, mem.rate);
      }
    }
    auto line = [&](const char* what, const SaturatingFit& f, bool compute) {
      out.report.push_back(fmt::format(
          "{} {}: asymptote {:.3f} {}, half at {:.4g} {}, worst error {:.1f} % ({} sizes)", backend,
          what, compute ? f.rate / 1e9 : f.rate / 1e9, compute ? "GFLOP/s" : "GB/s",
          compute ? f.half / 1e9 : f.half / 1024.0, compute ? "GFLOP" : "KiB",
          f.worst_relative_error * 100, f.points));
      if (f.worst_relative_error > 0.1) {
        out.warnings.push_back(fmt::format("the {} {} fit misses a size by {:.1f} %", backend, what,
                                           f.worst_relative_error * 100));
      }
    };
    if (g) line("gemm", *g, true);
    if (c) line("conv", *c, true);
    if (m) line("memory", *m, false);
    std::string y = "  gpu:\n";
    if (backend == "cpu") {
      // The CPU as the device: its peak is the fitted asymptote (efficiency max 1), or the
      // layer table's fastest layer.
      const double peak = g ? g->rate : (table_peak > 0 ? table_peak : 1e9);
      std::string e;
      e += fmt::format("      source: {}\n",
                       q("fitted e(x) = x / (x + half) to the measured rates (max 1: the peak "
                         "and bandwidth are the fitted asymptotes)"));
      e += fmt::format("      gemm: {{max: 1, half: {}}}\n", gflops(g ? g->half : 1e6));
      e += fmt::format("      conv: {{max: {:.4f}, half: {}}}\n",
                       c && g ? std::min(1.0, c->rate / g->rate) : 1.0,
                       gflops(c ? c->half : (g ? g->half : 1e6)));
      e += fmt::format("      memory: {{max: 1, half: {}}}\n", bytes(m ? m->half : 1));
      y += cpu_device("The host CPU as a compute device, measured by dlcalibrate",
                      "dlcalibrate fit of " + files, peak,
                      m ? m->rate : node.host.memory_bandwidth.value(), e);
      if (m) host_fields.push_back(fmt::format("memory_bandwidth: {}", gbps(m->rate)));
    } else {
      // A GPU: datasheet peak and bandwidth of the base, fitted efficiencies.
      const auto& bg = node.gpu;
      y += fmt::format("    extends: {}\n", q(bg.about.name));
      // As the CUDA runtime reported it (cudaDeviceProp::multiProcessorCount): the SMs NCCL's
      // channels take (docs/simulator.md, "NCCL on the compute's SMs").
      if (!gpu_sms.empty()) y += fmt::format("    sm_count: {}\n", gpu_sms);
      if (const auto sp = gpu_spread(results, stat)) {
        if (sp->shapes == 0) {
          out.warnings.push_back(fmt::format(
              "GPU to GPU: the {} GPUs' GEMM results share no shape; speed_spread kept from the "
              "base ({:g})",
              sp->gpus, bg.speed_spread));
        } else {
          y += fmt::format("    speed_spread: {:.4f}\n", std::min(0.5, sp->spread));
          out.report.push_back(fmt::format(
              "GPU to GPU: {} GPUs on {} GEMM shape(s): speeds {:.3f} .. {:.3f} of the median "
              "GPU's, coefficient of variation {:.2f} % -> gpu.speed_spread (a record's own "
              "samples spread by {:.1f} % (max - min) / median; {} outlier(s) left out)",
              sp->gpus, sp->shapes, sp->slowest, sp->fastest, sp->spread * 100, sp->noise * 100,
              sp->outliers.size()));
          for (const auto& [gpu, v] : sp->outliers) {
            out.warnings.push_back(fmt::format(
                "GPU to GPU: GPU {} runs at {:.3f} of the median GPU's speed, beyond the others' "
                "spread (Tukey's fences) and left out of speed_spread: a job that includes it "
                "runs at its speed; drain it, or give the job's GPUs' own figure",
                gpu, v));
          }
          if (sp->spread < sp->noise / 3) {
            out.warnings.push_back(fmt::format(
                "GPU to GPU: the GPUs differ by {:.2f} %, within their own noise ({:.1f} % "
                "between samples): measure with more repetitions (run gpu -n) to tell them apart",
                sp->spread * 100, sp->noise * 100));
          }
        }
      }
      y += "    efficiency:\n";
      y += fmt::format("      source: {}\n", q("dlcalibrate fit of " + files));
      const double peak = bg.peak.at("fp32").value();
      const auto curve = [&](const char* name, const std::optional<SaturatingFit>& f,
                             const hardware::EfficiencyCurve& keep, double scale, bool in_bytes) {
        if (!f) {
          return fmt::format("      {}: {{max: {:.4f}, half: {}}}\n", name, keep.max,
                             in_bytes ? bytes(keep.half) : gflops(keep.half));
        }
        return fmt::format("      {}: {{max: {:.4f}, half: {}}}\n", name,
                           std::min(1.0, f->rate / scale),
                           in_bytes ? bytes(f->half) : gflops(f->half));
      };
      y += curve("gemm", g, bg.gemm, peak, false);
      y += curve("conv", c, bg.conv, peak, false);
      y += curve("memory", m, bg.memory, bg.memory_bandwidth.value(), true);
    }
    gpu_yaml = y;
  }

  // ---- network: point-to-point between two nodes ----
  {
    // One connection (one pair of ranks) and several in parallel (osu_mbw_mr's pairs): over
    // kernel TCP one stream stays below what the link carries (zeromq/libzmq#3525,
    // open-mpi/ompi#9087), and the two together tell the stream ceiling from the link.
    std::vector<Measurement> lat, bw, bw_pairs;
    bool mpi = false;
    for (const auto& m : ms) {
      if (m.nodes < 2) continue;
      if (m.op == "p2p_latency") lat.push_back(m);
      if (m.op == "p2p_bandwidth" && !m.params.count("direction")) {
        const auto pairs = m.params.find("pairs");
        (pairs != m.params.end() && pairs->second != "1" ? bw_pairs : bw).push_back(m);
      }
      mpi = mpi || ((m.op == "p2p_latency" || m.op == "p2p_bandwidth") && m.backend == "mpi");
    }
    std::optional<AlphaBeta> small, large;
    if (!lat.empty()) {
      const auto s = group_series(lat, o.statistic);
      const auto f = fit_piecewise(s.front().bytes, s.front().seconds);
      small = f.regimes.front();
    }
    if (!bw.empty()) {
      const auto fits = fit_series(bw, o.min_bytes, o.statistic);
      if (!fits.empty()) large = fits.front().fit.regimes.back();
    }
    // The parallel series that moves the most: what the link carries.
    std::optional<AlphaBeta> link;
    int link_pairs = 0;
    for (const auto& f : fit_series(bw_pairs, o.min_bytes, o.statistic)) {
      const auto& r = f.fit.regimes.back();
      if (r.bandwidth() > 0 && (!link || r.bandwidth() > link->bandwidth())) {
        link = r;
        link_pairs = f.series.ranks / 2;
      }
    }
    std::optional<double> stream;  // B/s
    if (link && large && large->bandwidth() > 0) {
      // A ceiling only where one stream clearly falls short of the link (10 %: run-to-run
      // spread of such tests); otherwise one stream fills the link (RDMA).
      if (large->bandwidth() < 0.9 * link->bandwidth()) stream = large->bandwidth();
      out.report.push_back(
          fmt::format("one stream: {:.3f} GB/s; {} in parallel: {:.3f} GB/s together{}",
                      large->bandwidth() / 1e9, link_pairs, link->bandwidth() / 1e9,
                      stream ? " (stream_bandwidth: one connection's ceiling, below the link)"
                             : " (one stream fills the link: no stream ceiling)"));
      large = link;
    } else if (link) {
      large = link;
    }
    if (small || large) {
      const double line_rate = net.port.bandwidth.value();
      std::string y = fmt::format("  extends: {}\n", q(net.about.name));
      y += "  transport:\n";
      if (stream) y += fmt::format("    stream_bandwidth: \"{:.4f}GB/s\"\n", *stream / 1e9);
      if (large && large->bandwidth() > 0) {
        double eff = large->bandwidth() / line_rate;
        if (eff > 1) {
          out.warnings.push_back(fmt::format(
              "measured {:.3f} GB/s between nodes exceeds the base network's line rate {:.3f} "
              "GB/s: efficiency capped at 1 (is --base right?)",
              large->bandwidth() / 1e9, line_rate / 1e9));
          eff = 1;
        }
        y += fmt::format("    efficiency: {:.4f}\n", eff);
        out.report.push_back(fmt::format(
            "network bandwidth: {:.3f} GB/s between nodes ({} .. {} B, R^2 {:.5f}, worst error "
            "{:.1f} %) = {:.1f} % of the {:.3f} GB/s line rate",
            large->bandwidth() / 1e9, large->min_bytes, large->max_bytes, large->r2,
            large->worst_relative_error * 100, eff * 100, line_rate / 1e9));
      }
      if (small) {
        // One hop between two nodes: NIC port, switch, NIC port, plus the per-message cost.
        const double wire = 2 * net.port.latency.value() + net.switch_latency.value();
        const double overhead = std::max(0.0, std::max(0.0, small->alpha) - wire);
        y += fmt::format("    message_overhead: {}\n", us(overhead));
        out.report.push_back(fmt::format(
            "network latency: {:.3f} us one-way between nodes (fit over {} sizes) = {:.3f} us of "
            "ports and switch + {:.3f} us per message",
            small->alpha * 1e6, small->points, wire * 1e6, overhead * 1e6));
      }
      network_yaml = y;
      if (mpi) {
        // The figures are MPI's point to point: predictions on this profile cost collectives
        // as the MPI library runs them (a profile for NCCL jobs sets `library: nccl`).
        library_yaml = "library: mpi\n";
        out.report.push_back(
            "library: mpi (the network was measured through MPI point to point; set library: "
            "nccl in the profile to predict NCCL collectives)");
        // The compute each allreduce took from a busy thread on the rank's cores (run mpi
        // --cpu-cost): the library's host CPU cost, c0 + c1 S, across nodes.
        std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_ranks;
        // The call's own time beside the busy thread less its time alone, by size.
        std::map<int, std::pair<std::vector<double>, std::vector<double>>> waits;
        int node_cores = 0;  // the cores a node's ranks were bound to
        for (const auto& m : ms) {
          if (m.backend != "mpi" || m.op != "allreduce" || m.nodes < 2) continue;
          const auto c = m.params.find("cpu_s_per_call");
          if (c == m.params.end()) continue;
          by_ranks[m.ranks].first.push_back(m.bytes);
          by_ranks[m.ranks].second.push_back(std::stod(c->second));
          if (const auto w = wait_beside_compute(m)) {
            waits[m.ranks].first.push_back(m.bytes);
            waits[m.ranks].second.push_back(*w);
          }
          const auto rc = m.params.find("rank_cores");
          const auto rn = m.params.find("ranks_per_node");
          if (rc != m.params.end() && rn != m.params.end()) {
            node_cores = std::max(node_cores, std::stoi(rc->second) * std::stoi(rn->second));
          }
        }
        if (!by_ranks.empty() && by_ranks.rbegin()->second.first.size() >= 2) {
          const auto& [ranks, points] = *by_ranks.rbegin();
          const auto cpu = fit_cost(points.first, points.second);
          std::string lib = "library:\n";
          lib += "  extends: \"mpi\"\n";
          lib += fmt::format("  name: {}\n", q(o.name + "-mpi"));
          lib += fmt::format(
              "  description: {}\n",
              q(fmt::format("MPI between the nodes, with the compute its allreduce takes from "
                            "a busy thread on the rank's cores as dlcalibrate run mpi "
                            "--cpu-cost measured it over {} ranks",
                            ranks)));
          lib += fmt::format("  source: {}\n", q("dlcalibrate fit of " + files));
          std::optional<AlphaBeta> wait;
          if (const auto w = waits.find(ranks); w != waits.end() && w->second.first.size() >= 2) {
            wait = fit_cost(w->second.first, w->second.second);
          }
          lib += host_cpu_line(cpu, wait);
          library_yaml = lib;
          out.report.push_back(fmt::format(
              "host CPU per MPI allreduce: {:.1f} us + {:.3f} ns/B taken from a busy compute "
              "thread (worst error {:.1f} %, {} sizes, {} ranks): taken from compute where the "
              "ranks' threads fill the cores (docs/simulator.md, \"Shared cores\")",
              std::max(0.0, cpu.alpha) * 1e6, std::max(0.0, cpu.beta) * 1e9,
              cpu.worst_relative_error * 100, points.first.size(), ranks));
          if (wait) {
            out.report.push_back(
                wait_report("an MPI allreduce beside a busy compute thread", *wait));
          }
          if (node_cores > 0) {
            host_fields.push_back(fmt::format("cores: {}", node_cores));
            out.report.push_back(fmt::format(
                "node: {} core(s) for its ranks (the cores run mpi's ranks were bound to, times "
                "the ranks of a node): whether the library's CPU time comes out of compute",
                node_cores));
          }
        }
      }
    }
  }

  // ---- collectives: reported only ----
  for (const auto& f : fit_series(ms, o.min_bytes, o.statistic)) {
    const auto& s = f.series;
    if (s.op.rfind("p2p", 0) == 0 || s.op == "gemm" || s.op == "copy" || s.op == "triad" ||
        s.op.rfind("conv", 0) == 0 || s.backend == "torch") {
      continue;
    }
    const auto& first = f.latency;
    const auto& big = f.fit.regimes.back();
    out.report.push_back(fmt::format(
        "{} {} on {} ranks / {} nodes: latency {:.2f} us ({} .. {} B), busbw {:.3f} GB/s at the "
        "largest sizes ({} .. {} B), {} regime(s), worst error {:.1f} % (reported; collectives "
        "are derived from links and library constants)",
        s.op, s.backend, s.ranks, s.nodes, first.alpha * 1e6, first.min_bytes, first.max_bytes,
        s.bytes.empty()
            ? 0.0
            : s.bytes.back() / big.time(s.bytes.back()) * bus_factor(s.op, s.ranks) / 1e9,
        big.min_bytes, big.max_bytes, f.fit.regimes.size(), f.fit.worst_relative_error() * 100));
  }
  // ---- NCCL's SHM transport: GPUs of one node through host memory (host.shm_bandwidth) ----
  {
    // An allreduce on one node whose GPUs NCCL connected through host memory (the INFO lines
    // say SHM, or --transport shm): both directions busy, as a ring loads them. Its bus
    // bandwidth at the largest size measured is what such a ring reaches (docs/networks.md,
    // "NCCL's choices").
    const Measurement* top = nullptr;
    for (const auto& m : ms) {
      const auto t = m.params.find("transport");
      if (m.backend != "nccl" || m.op != "allreduce" || m.nodes != 1 || m.ranks < 2 ||
          t == m.params.end() || t->second != "SHM" || m.samples_s.empty()) {
        continue;
      }
      if (!top || m.bytes > top->bytes || (m.bytes == top->bytes && m.ranks > top->ranks)) {
        top = &m;
      }
    }
    if (top) {
      const double busbw = top->bytes / stat(*top) * bus_factor("allreduce", top->ranks);
      host_fields.push_back(fmt::format("shm_bandwidth: {}", gbps(busbw)));
      out.report.push_back(fmt::format(
          "NCCL's SHM transport: allreduce busbw {:.3f} GB/s at {:.0f} B on {} GPUs of one node "
          "through host memory (host.shm_bandwidth: bounds NCCL rings that cross such a hop)",
          busbw / 1e9, top->bytes, top->ranks));
    }
  }
  // ---- ranks of this host over gloo (run gloo): the node's path between ranks, the library ----
  std::string node_yaml;
  {
    std::vector<Measurement> gloo;
    for (const auto& m : ms) {
      if (m.backend == "gloo" && m.op == "allreduce" && m.nodes == 1 && m.ranks > 1) {
        gloo.push_back(m);
      }
    }
    const auto fits = fit_series(gloo, o.min_bytes, o.statistic);
    const SeriesFit* f = nullptr;
    for (const auto& x : fits) {
      if (!f || x.series.ranks > f->series.ranks) f = &x;
    }
    if (f) {
      // gloo's ring allreduce over n ranks of one host is what the `mpi` library's ring costs
      // (docs/networks.md, "MPI ring"): T = 2(n-1) alpha + 2(n-1)/n S / B, each step one hop
      // rank -> host -> rank. So B is the series' bus bandwidth at its largest sizes and each
      // of the two hops carries half of alpha = (the series' latency) / 2(n-1).
      const int n = f->series.ranks;
      const auto& big = f->fit.regimes.back();
      double link_bw = big.bandwidth();
      if (!(link_bw > 0) && !f->series.bytes.empty() && f->series.seconds.back() > 0) {
        // The largest sizes took no longer than smaller ones (samples slowed by other work):
        // no slope to read, so the largest size's own bus bandwidth.
        link_bw = f->series.bytes.back() / f->series.seconds.back() * bus_factor("allreduce", n);
        out.warnings.push_back(fmt::format(
            "gloo: the times do not grow with size over the largest sizes (a loaded machine?); "
            "the rank -> host -> rank rate is the {:.0f} B all-reduce's bus bandwidth, {:.3f} "
            "GB/s",
            f->series.bytes.back(), link_bw / 1e9));
      }
      const double hop = std::max(0.0, f->latency.alpha) / (2.0 * (n - 1)) / 2;
      const GlooCpu g = gloo_cpu(gloo, n);
      const auto& cpu_fit = g.cpu;
      const auto& wait_fit = g.wait;
      if (link_bw > 0) {
        const int cores = host_cores > 0 ? static_cast<int>(host_cores) : node.host.cores;
        std::string y;
        y += fmt::format("  gpus: {}\n", n);
        y += "  nics: 1\n";
        y += "  link_types:\n";
        y += fmt::format(
            "    loopback: {{bandwidth: {}, latency: {}}}   # run gloo: one hop of a "
            "rank's exchange through the host\n",
            gbps(link_bw), us(hop));
        y += fmt::format("    nic: {{bandwidth: {}, latency: {}}}        # the NIC's port rate\n",
                         gbps(net.port.bandwidth.value()), us(0));
        y += "  switches: []\n";
        y += "  links:\n";
        y += "    - [gpu*, cpu0, loopback]\n";
        y += "    - [nic0, cpu0, nic]\n";
        node_yaml = y;
        host_fields.push_back(fmt::format("cpu: {}", q(host_cpu_name)));
        host_fields.push_back("sockets: 1");
        // The whole host's cores (the MPI fit's bound cores stand for nodes of their own).
        std::erase_if(host_fields,
                      [](const std::string& field) { return field.rfind("cores:", 0) == 0; });
        host_fields.push_back(fmt::format("cores: {}", cores));
        if (!host_memory.empty()) host_fields.push_back(fmt::format("memory: {}", q(host_memory)));
        library_yaml = gloo_library_yaml(
            o.name, fmt::format("{} ranks of this host, as dlcalibrate run gloo measured it", n),
            files, g);
        out.report.push_back(fmt::format(
            "node: {} ranks on {} cores of {}; between ranks gloo's ring (mpi library) over a "
            "rank -> host -> rank path of {:.3f} GB/s and {:.2f} us per hop (allreduce bus "
            "bandwidth {:.3f} GB/s at {} .. {} B, latency {:.1f} us)",
            n, cores, host_cpu_name, link_bw / 1e9, hop * 1e6, link_bw / 1e9, big.min_bytes,
            big.max_bytes, f->latency.alpha * 1e6));
        if (cpu_fit) {
          out.report.push_back(fmt::format(
              "host CPU per gloo call: {:.1f} us + {:.3f} ns/B (worst error {:.1f} %, {} sizes): "
              "taken from compute where the ranks' threads fill the cores (docs/simulator.md, "
              "\"Shared cores\")",
              std::max(0.0, cpu_fit->alpha) * 1e6, std::max(0.0, cpu_fit->beta) * 1e9,
              cpu_fit->worst_relative_error * 100, g.sizes));
        }
        if (cpu_fit && wait_fit) {
          out.report.push_back(wait_report(
              "a gloo all-reduce beside a busy compute thread in each rank", *wait_fit));
        }
      }
    }
  }

  // ---- ranks on several nodes over gloo (run gloo --store, one rank per node): the network
  // between the nodes as gloo crosses it, gloo's CPU time, and each node's share of the cores ----
  {
    std::vector<Measurement> gloo;
    for (const auto& m : ms) {
      if (m.backend == "gloo" && m.op == "allreduce" && m.nodes >= 2 && m.ranks == m.nodes) {
        gloo.push_back(m);
      }
    }
    const auto fits = fit_series(gloo, o.min_bytes, o.statistic);
    const SeriesFit* f = nullptr;
    for (const auto& x : fits) {
      if (!f || x.series.ranks > f->series.ranks) f = &x;
    }
    if (f && f->fit.regimes.back().bandwidth() > 0) {
      // gloo's ring over n ranks on n nodes (the `mpi` library's ring, docs/networks.md):
      // T = 2(n-1) alpha + 2(n-1)/n S / B, each step one hop between two nodes. B is the
      // series' bus bandwidth at its largest sizes, alpha its latency over 2(n-1).
      const int n = f->series.ranks;
      const auto& big = f->fit.regimes.back();
      const double bw = big.bandwidth();
      const double line_rate = net.port.bandwidth.value();
      const double eff = std::min(1.0, bw / line_rate);
      if (bw > line_rate) {
        out.warnings.push_back(fmt::format(
            "gloo between nodes moved {:.3f} GB/s, above the base network's line rate {:.3f} "
            "GB/s: efficiency capped at 1 (is --base right?)",
            bw / 1e9, line_rate / 1e9));
      }
      const double step = std::max(0.0, f->latency.alpha) / (2.0 * (n - 1));
      const double wire = 2 * net.port.latency.value() + net.switch_latency.value();
      std::string y = fmt::format("  extends: {}\n", q(net.about.name));
      y += "  transport:\n";
      y += fmt::format("    efficiency: {:.4f}\n", eff);
      y += fmt::format("    message_overhead: {}\n", us(std::max(0.0, step - wire)));
      network_yaml = y;
      out.report.push_back(fmt::format(
          "network: gloo between {} nodes, bus bandwidth {:.3f} GB/s at {} .. {} B = {:.1f} % "
          "of the {:.3f} GB/s line rate; {:.1f} us per ring step ({:.1f} us latency over "
          "2(n-1) steps)",
          n, bw / 1e9, big.min_bytes, big.max_bytes, eff * 100, line_rate / 1e9, step * 1e6,
          f->latency.alpha * 1e6));
      // Host CPU per call and the wait beside compute, as for ranks of one host.
      const GlooCpu g = gloo_cpu(gloo, n);
      const auto& cpu_fit = g.cpu;
      const auto& wait_fit = g.wait;
      int rank_cores = 0, per_kernel = 1;
      for (const auto& m : gloo) {
        if (m.ranks != n) continue;
        if (const auto c = m.params.find("rank_cores"); c != m.params.end()) {
          rank_cores = std::max(rank_cores, std::stoi(c->second));
        }
        if (const auto k = m.params.find("nodes_per_kernel"); k != m.params.end()) {
          per_kernel = std::max(per_kernel, std::stoi(k->second));
        }
      }
      library_yaml = gloo_library_yaml(
          o.name, fmt::format("{} nodes, as dlcalibrate run gloo --store measured it", n), files,
          g);
      if (cpu_fit) {
        out.report.push_back(fmt::format(
            "host CPU per gloo call between nodes: {:.1f} us + {:.3f} ns/B (worst error {:.1f} "
            "%, {} sizes)",
            std::max(0.0, cpu_fit->alpha) * 1e6, std::max(0.0, cpu_fit->beta) * 1e9,
            cpu_fit->worst_relative_error * 100, g.sizes));
      }
      if (cpu_fit && wait_fit) {
        out.report.push_back(
            wait_report("a gloo all-reduce between nodes beside a busy compute "
                        "thread in each rank",
                        *wait_fit));
      }
      // One rank per node; nodes that share one kernel (network namespaces of one machine)
      // share its cores, so each has the rank's cores over the nodes per kernel.
      const int host = host_cores > 0 ? static_cast<int>(host_cores) : node.host.cores;
      const int cores = std::max(1, (rank_cores > 0 ? rank_cores : host) / per_kernel);
      std::string ny;
      ny += "  gpus: 1\n";
      ny += "  nics: 1\n";
      ny += "  link_types:\n";
      ny += fmt::format("    nic: {{bandwidth: {}, latency: {}}}        # the NIC's port rate\n",
                        gbps(net.port.bandwidth.value()), us(0));
      ny += "  switches: []\n";
      ny += "  links:\n";
      ny += "    - [gpu0, cpu0, nic]\n";
      ny += "    - [nic0, cpu0, nic]\n";
      node_yaml = ny;
      std::erase_if(host_fields, [](const std::string& field) {
        return field.rfind("cores:", 0) == 0 || field.rfind("cpu:", 0) == 0 ||
               field.rfind("sockets:", 0) == 0 || field.rfind("memory:", 0) == 0;
      });
      host_fields.push_back(fmt::format("cpu: {}", q(host_cpu_name)));
      host_fields.push_back("sockets: 1");
      host_fields.push_back(fmt::format("cores: {}", cores));
      if (!host_memory.empty()) host_fields.push_back(fmt::format("memory: {}", q(host_memory)));
      out.report.push_back(fmt::format(
          "node: one rank on {} core(s) of {} ({} core(s) a rank may use, shared by the {} "
          "node(s) of one kernel)",
          cores, host_cpu_name, rank_cores > 0 ? rank_cores : host, per_kernel));
    }
  }

  // ---- layer tables: a model's layers and update through libtorch (run torch) ----
  {
    const auto param = [](const Measurement& m, const char* key) {
      const auto it = m.params.find(key);
      if (it == m.params.end()) {
        fail_at({}, "RESULTS", fmt::format("this {} record has no params.{}", m.op, key));
      }
      return it->second;
    };
    // A params value that must be a whole number (batch, threads, elements, tensors).
    const auto integer = [](const std::string& text, const std::string& what) -> long long {
      try {
        std::size_t used = 0;
        const long long v = std::stoll(text, &used);
        if (used == text.size()) return v;
      } catch (const std::exception&) {
      }
      fail_at({}, "RESULTS", fmt::format("{} is not an integer: '{}'", what, text));
    };
    // The training precision of a record (results before `--precision` are fp32), written into
    // an entry where it is not fp32.
    const auto precision = [](const Measurement& m) {
      const auto it = m.params.find("precision");
      return it == m.params.end() ? std::string("fp32") : it->second;
    };
    // (signature, batch, threads, precision) -> forward and backward in s, and the host's time
    // issuing each where measured (0 otherwise).
    // A layer measured in several runs (records of one signature, batch, threads and precision:
    // the same layer shape in two models' runs, or one file given with a copy of it) takes its
    // last run's times, and fit says how many did and how far their runs differ.
    struct LayerTimes {
      std::vector<double> forward, backward, forward_host, backward_host;
    };
    const auto last = [](const std::vector<double>& v) { return v.empty() ? 0.0 : v.back(); };
    std::map<std::tuple<std::string, std::string, std::string, std::string>, LayerTimes> layers;
    // The optimizer's update by (elements, tensors, threads, precision): its runs' times.
    std::map<std::tuple<long long, long long, long long, std::string>, std::vector<double>>
        update_runs;
    std::set<std::string> threads, models, precisions, devices;
    for (const auto& m : ms) {
      if (m.backend != "torch") continue;
      if (m.op == "layer_forward" || m.op == "layer_backward") {
        auto& e = layers[{m.shape, param(m, "batch"), param(m, "threads"), precision(m)}];
        (m.op == "layer_forward" ? e.forward : e.backward).push_back(stat(m));
        if (!m.host_samples_s.empty()) {
          // The same statistic as the GPU's times: the host's cost without its own stalls.
          Measurement h = m;
          h.samples_s = m.host_samples_s;
          (m.op == "layer_forward" ? e.forward_host : e.backward_host).push_back(stat(h));
        }
        threads.insert(param(m, "threads"));
        models.insert(param(m, "model"));
        precisions.insert(precision(m));
        const auto d = m.params.find("device");
        devices.insert(d == m.params.end() ? "cpu" : d->second);
      } else if (m.op == "optimizer_update") {
        const auto param_integer = [&](const char* key) {
          return integer(param(m, key), fmt::format("the {} record's params.{}", m.op, key));
        };
        update_runs[{param_integer("elements"), param_integer("tensors"), param_integer("threads"),
                     precision(m)}]
            .push_back(stat(m));
      }
    }
    nlohmann::json updates = nlohmann::json::array();
    for (const auto& [key, times] : update_runs) {
      const auto& [elements, tensors, thr, prec] = key;
      nlohmann::json u = {
          {"elements", elements}, {"tensors", tensors}, {"threads", thr}, {"time_s", last(times)}};
      if (prec != "fp32") u["precision"] = prec;
      updates.push_back(u);
    }
    if (devices.size() > 1) {
      fail_at({}, "RESULTS",
              fmt::format("layer tables of {} devices ({}): fit one device's tables at a time",
                          devices.size(), fmt::join(devices, ", ")));
    }
    if (!layers.empty()) {
      std::string y;
      if (threads.size() > 1) {
        out.warnings.push_back(fmt::format(
            "layer tables at {} thread counts: the profile predicts at {} (set `threads` in the "
            "profile's gpu for another)",
            threads.size(), *threads.begin()));
      }
      y += fmt::format("    threads: {}\n", *threads.begin());
      y += "    layers:\n";
      std::string model_list;
      for (const auto& m : models) model_list += (model_list.empty() ? "" : ", ") + m;
      y += fmt::format(
          "      source: {}\n",
          q(fmt::format("dlcalibrate run torch ({}) in {}: each layer's forward and "
                        "backward through libtorch, the {} over the timed steps",
                        model_list, files, o.statistic == Statistic::kMin ? "minimum" : "median")));
      // The entries go to a JSON file beside the profile (docs/hardware-format.md, `layers`):
      // a thousand of them parse in a few ms there and in a hundred as YAML.
      out.layers_file = o.name + ".layers.json";
      y += fmt::format("      file: {}\n", q(out.layers_file));
      nlohmann::json entries = nlohmann::json::array();
      std::size_t half = 0;
      for (const auto& [key, t] : layers) {
        const auto& [signature, batch, thr, prec] = key;
        if (t.forward.empty() || t.backward.empty()) {
          ++half;
          continue;
        }
        nlohmann::json e = {{"layer", signature},
                            {"batch", integer(batch, "a layer record's params.batch")},
                            {"threads", integer(thr, "a layer record's params.threads")},
                            {"forward_s", last(t.forward)},
                            {"backward_s", last(t.backward)}};
        if (prec != "fp32") e["precision"] = prec;
        if (!t.forward_host.empty() && !t.backward_host.empty()) {
          e["forward_host_s"] = last(t.forward_host);
          e["backward_host_s"] = last(t.backward_host);
        }
        entries.push_back(std::move(e));
      }
      std::size_t repeated = 0;
      double spread = 0;  // the largest of (slowest run / fastest run - 1) over those layers
      for (const auto& [key, t] : layers) {
        if (t.forward.size() < 2 && t.backward.size() < 2) continue;
        ++repeated;
        for (const auto* v : {&t.forward, &t.backward}) {
          if (v->size() < 2) continue;
          const auto [lo, hi] = std::minmax_element(v->begin(), v->end());
          spread = std::max(spread, *hi / *lo - 1);
        }
      }
      if (repeated > 0) {
        out.warnings.push_back(fmt::format(
            "{} layer(s) were measured in more than one run (the same shape in several models' "
            "runs, or a file given with a copy of it): each takes its last run's times; their "
            "runs differ by up to {:.0f} %",
            repeated, spread * 100));
      }
      if (half > 0) {
        out.warnings.push_back(fmt::format(
            "{} layer(s) with only a forward or only a backward record are left out", half));
      }
      // One entry per line, so that a table's changes read as lines.
      const auto lines = [](const nlohmann::json& list) {
        std::string text;
        for (const auto& e : list) text += (text.empty() ? "\n  " : ",\n  ") + e.dump();
        return text.empty() ? std::string("[]") : "[" + text + "\n ]";
      };
      out.layers_json = fmt::format(
          "{{\"kind\": \"dlsim-layer-table\", \"format_version\": 1,\n \"source\": {},\n "
          "\"entries\": {},\n \"updates\": {}\n}}\n",
          nlohmann::json(fmt::format("dlcalibrate fit of {}", files)).dump(), lines(entries),
          lines(updates));
      out.report.push_back(fmt::format(
          "layer table: {} layer entries of {} at {} thread(s), {} update(s), {} on {}: "
          "`dlsim predict` takes these layers' times from it in the same precision, the "
          "roofline elsewhere",
          layers.size() - half, model_list, *threads.begin(), updates.size(),
          fmt::join(precisions, " and "), *devices.begin()));
      if (gpu_yaml.empty() && *devices.begin() == "cpu") {
        // The host CPU as the device, from the table itself: its peak is the fastest FLOP rate
        // a layer reached (efficiency 1 there), its memory the base host's.
        const double peak = table_peak;
        gpu_yaml =
            "  gpu:\n" +
            cpu_device(fmt::format("The host CPU as a compute device ({}), measured by "
                                   "dlcalibrate run torch",
                                   host_cpu.empty() ? "model not recorded" : host_cpu),
                       "dlcalibrate fit of " + files +
                           ": peak = the fastest layer's FLOP rate in the table; memory = the "
                           "base host's",
                       peak > 0 ? peak : 1e9, node.host.memory_bandwidth.value(),
                       fmt::format("      source: {}\n",
                                   q("none measured: layers outside the table run at the peak")) +
                           "      gemm: {max: 1, half: \"0.000001GFLOP\"}\n"
                           "      conv: {max: 1, half: \"0.000001GFLOP\"}\n"
                           "      memory: {max: 1, half: \"1B\"}\n");
        out.warnings.push_back(fmt::format(
            "layer tables without a `run cpu` sweep: the CPU device's peak is the table's fastest "
            "layer ({:.2f} GFLOP/s); layers missing from the table run at it",
            peak / 1e9));
      } else if (gpu_yaml.empty()) {
        out.warnings.push_back(
            "layer tables without a `run cpu` or `run gpu` sweep: layers missing from the table "
            "fall back to the base device's roofline");
        gpu_yaml = fmt::format("  gpu:\n    extends: {}\n", q(node.gpu.about.name));
      }
      gpu_yaml += y;
    }
  }

  const std::string host_yaml =
      host_fields.empty() ? "" : fmt::format("  host: {{{}}}\n", fmt::join(host_fields, ", "));
  if (gpu_yaml.empty() && network_yaml.empty() && host_yaml.empty() && node_yaml.empty()) {
    fail_at({fmt::format("{}", fmt::join(o.results_files, ", "))}, "",
            "nothing to fit: no compute or memory sweep, no point-to-point results between "
            "two nodes, and no one-node allreduce through host memory (import nccl-tests "
            "--transport shm)");
  }

  std::string y =
      "# Written by dlcalibrate fit; every figure below comes from the results named\n"
      "# in `source`. Edit with care: dlcalibrate overwrites it.\n";
  y += "kind: cluster\n";
  y += fmt::format("name: {}\n", q(o.name));
  y += fmt::format("description: {}\n",
                   q(fmt::format("{} calibrated by dlcalibrate on {}", base.about.name,
                                 host_list.empty() ? "unnamed hosts" : host_list)));
  y += fmt::format(
      "source: {}\n",
      q(fmt::format("dlcalibrate fit of {} ({}; measured {}; hosts {}); command: {}", files,
                    tool_list, date_list.empty() ? "date not recorded" : date_list,
                    host_list.empty() ? "not recorded" : host_list, o.command)));
  y += fmt::format("extends: {}\n", q(o.base));
  if (!gpu_yaml.empty() || !host_yaml.empty() || !node_yaml.empty()) {
    y += "node:\n";
    y += fmt::format("  extends: {}\n", q(node.about.name));
    y += gpu_yaml + host_yaml + node_yaml;
  }
  if (!network_yaml.empty()) y += "network:\n" + network_yaml;
  y += library_yaml;
  if (hosts.size() > 1) {
    y += fmt::format("nodes: {}\n", hosts.size());
    y += fmt::format("hostnames: {}\n", q(host_list));
  }
  out.yaml = y;
  return out;
}

}  // namespace dlsim::calibrate
