#include "validate/replay_commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "calibrate/slurm.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/output.hpp"
#include "common/units.hpp"
#include "simulator/framework_flags.hpp"
#include "validate/replay.hpp"

namespace dlsim::validate {
namespace {

struct Flags {
  ReplayOptions o;
  simulator::FrameworkFlags fw;
};

// An output's folder must exist before the run, so that a finished run cannot fail to write.
void check_output(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  const auto dir = std::filesystem::path(path).parent_path();
  if (std::error_code ec; !dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    fail_at({}, flag, fmt::format("folder '{}' of '{}' does not exist", dir.string(), path));
  }
}

ReplayOptions resolve(const Flags& f) {
  ReplayOptions o = f.o;
  o.framework_options = simulator::parse_framework_flags(f.fw);
  check_output(o.json, "--json");
  check_output(o.csv, "--csv");
  if (o.json.empty() && o.csv.empty()) {
    fail_at({}, "--json", "give --json and/or --csv: the replay's measurement goes there");
  }
  // Labels of the CSV row: one printable line each, as every other cell of the table.
  for (const auto& [flag, text] :
       {std::pair{"--source-id", o.source_id}, std::pair{"--inter-node", o.inter_node}}) {
    if (std::any_of(text.begin(), text.end(),
                    [](unsigned char ch) { return ch < 0x20 || ch == 0x7f; })) {
      fail_at({}, flag,
              fmt::format("'{}' holds a control character", calibrate::comment_safe(text)));
    }
  }
  return o;
}

}  // namespace

void add_replay_command(CLI::App& app, const std::string& command) {
  auto* c = app.add_subcommand(
      "replay",
      "A real data-parallel training step under mpirun/srun (one rank per worker): the model's "
      "kernels on synthetic data and the framework's gradient exchange, timed");
  auto f = std::make_shared<Flags>();
  c->add_option("--model", f->o.model, "Zoo model or model file")->required();
  c->add_option("--batch", f->o.batch, "Samples per rank and step (default 8)");
  c->add_option(
      "--device", f->o.device,
      "cpu (libtorch: PyTorch's kernels), or gpu (cuDNN and cuBLAS; CUDA build) (default cpu)");
  c->add_option("--framework", f->o.framework,
                "Framework policy: horovod, pytorch-ddp, tf-ps, mxnet-kvstore, ... (default "
                "horovod)");
  c->add_option("--strategy", f->o.strategy, "ring or ps (default: the framework's)");
  c->add_option("--steps", f->o.steps, "Timed steps (default 5)");
  c->add_option("--warmup", f->o.warmup, "Untimed steps first (default 2)");
  c->add_option("--seed", f->o.seed, "Seed of the synthetic data (default 1)")->check(dlsim::kSeed);
  simulator::add_framework_flags(c, f->fw);
  c->add_option("--source-id", f->o.source_id, "source_id of the CSV row (default replay)");
  c->add_option("--inter-node", f->o.inter_node,
                "Label of the network between nodes for the CSV row (e.g. 'tcp 1 Gbit/s')");
  c->add_option("--json", f->o.json, "The measurement as JSON");
  c->add_option("--csv", f->o.csv, "The measurement as a throughput.csv row");
  c->callback([f, command] {
    const ReplayOptions o = resolve(*f);
    auto comm = make_replay_comm(nullptr, nullptr);
    ReplayMeasurement m;
    try {
      m = run_replay(o, *comm, command);
    } catch (const InputError&) {
      throw;  // rank 0's, after every rank agreed to stop
    } catch (const std::exception& e) {
      // An MPI failure or anything else mid-run: the other ranks may be inside a collective,
      // so the whole job ends here, with nothing written.
      std::cerr << fmt::format("dlvalidate: error: replay rank {} of {}: {}\n", comm->rank(),
                               comm->size(), e.what());
      comm->abort(2);
    }
    if (comm->rank() != 0) return;
    std::vector<std::pair<std::string, std::string>> files;
    if (!o.json.empty()) files.emplace_back(o.json, replay_json(m));
    if (!o.csv.empty()) files.emplace_back(o.csv, replay_csv(m));
    write_outputs(files, {o.model});
    std::cerr << fmt::format(
        "dlvalidate: replay {} on {} rank(s), {} node(s), batch {} per rank, {} {}: step {:.4f} s "
        "median ({:.4f}-{:.4f} s over {} steps), {:.2f} samples/s\n",
        m.model, m.ranks, m.nodes, o.batch, o.framework, m.strategy, m.step_median_s, m.step_min_s,
        m.step_max_s, o.steps, m.samples_per_s);
    if (m.ranks > 1 && m.forward_imbalance > kForwardImbalanceWarning) {
      // The ranks run the same forward pass: a slower one had less of its core.
      std::cerr << fmt::format(
          "dlvalidate: warning: the forward pass on {} took {:.1f} % longer than on the fastest "
          "rank (median over the steps): its core gave it less time, and the step measures that\n",
          m.slowest_forward_host, 100 * m.forward_imbalance);
    }
  });
}

}  // namespace dlsim::validate
