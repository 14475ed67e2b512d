// The analytic engine (docs/simulator.md, "The analytic engine"): one step in closed form.
// Every GPU runs at the expected slowest GPU's speed, 1 + cv E[max of N normals]; gradients are
// ready at their backward offsets; the framework's launcher groups them exactly as in the DES;
// each group's collective takes its closed-form time on a channel that runs one at a time.

#include <cmath>
#include <deque>

#include "simulator/engine.hpp"

namespace dlsim::simulator {
namespace {

// E[max of n standard normals] by Blom's approximation, Phi^-1((n - 0.375) / (n + 0.25))
// (Blom 1958; 4.5 % high at n = 2, under 1 % from n of about 8), with Phi^-1 from Acklam's rational
// approximation (relative error below 1.2e-9).
double expected_max_normal(int n) {
  if (n <= 1) return 0.0;
  const double p = (n - 0.375) / (n + 0.25);
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  if (p > 0.97575) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double q = p - 0.5;
  const double r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

}  // namespace

EngineRun run_analytic(const StepSetup& setup, const Observers& observers) {
  const int n = setup.comm.size();
  const double factor = 1 + setup.gpu->step_jitter * expected_max_normal(n);
  const auto& compute = setup.compute;
  auto at = [&](double seconds) { return to_time(seconds * factor); };

  const Time forward_end = at(compute.forward.value());
  const Time backward_end = at(compute.forward.value() + compute.backward.value());
  observers.emit({SpanKind::kForward, 0, 0, "forward", 0, forward_end});
  observers.emit({SpanKind::kBackward, 0, 0, "backward", forward_end, backward_end});

  // Gradient tensors in backward order with the time every GPU has them.
  std::vector<std::pair<Time, int>> ready;
  double t = compute.forward.value();
  for (std::size_t i = compute.layers.size(); i-- > 0;) {
    t += compute.layers[i].backward.value();
    for (int g : compute.layers[i].gradients) ready.emplace_back(at(t), g);
  }

  Time comm_end = backward_end;
  if (n > 1 && !ready.empty()) {
    CollectivePlanner planner(setup);
    auto launcher = setup.policy->launcher(setup.resolved, setup.job);
    Time channel = 0;
    std::size_t reduced = 0;
    const bool ps = setup.resolved.strategy == "ps";
    auto run = [&](const std::vector<CommGroup>& groups, Time now) {
      for (const auto& g : groups) {
        Time t0 = std::max(now, channel);
        auto span = [&](SpanKind k, std::string_view name, Time d) {
          if (d > 0) observers.emit({k, 0, -1, name, t0, t0 + d, g.bytes});
          t0 += d;
        };
        span(SpanKind::kNegotiate, "NEGOTIATE_ALLREDUCE", to_time(g.negotiate.value()));
        const Time copy = to_time(planner.copy_time(g.bytes).value());
        span(SpanKind::kCopyIn, "MEMCPY_IN_FUSION_BUFFER", g.copy_in ? copy : 0);
        const auto& plan = planner.plan(g);
        Span c{SpanKind::kCollective,
               0,
               -1,
               ps ? "PS_PUSH_PULL" : "NCCL_ALLREDUCE",
               t0,
               t0 + to_time(plan.model_time.value()),
               g.bytes};
        c.latency = to_time(plan.latency.value());
        c.parameter_server = ps;
        observers.emit(c);
        t0 = c.end;
        span(SpanKind::kCopyOut, "MEMCPY_OUT_FUSION_BUFFER", g.copy_out ? copy : 0);
        channel = t0;
        reduced += g.tensors.size();
      }
    };
    // The launcher sees ready tensors and its own ticks in time order (a tensor ready at a
    // tick's instant goes first).
    std::size_t next = 0;
    Time clock = 0;
    while (reduced < ready.size()) {
      const auto tick = launcher->next_tick(clock);
      if (next < ready.size() && (!tick || ready[next].first <= *tick)) {
        clock = ready[next].first;
        run(launcher->ready(ready[next].second, clock), clock);
        ++next;
      } else if (tick) {
        clock = *tick;
        run(launcher->tick(clock), clock);
      } else {
        break;  // a launcher that holds tensors and never ticks: nothing more starts
      }
    }
    comm_end = std::max(comm_end, channel);
  }
  const Time update_end = comm_end + at(compute.update.value());
  observers.emit({SpanKind::kUpdate, 0, 0, "update", comm_end, update_end});
  observers.emit({SpanKind::kIteration, 0, -1, "step", 0, update_end});
  return {};
}

}  // namespace dlsim::simulator
