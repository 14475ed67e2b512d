// dlvalidate launch: the sbatch scripts of every framework against golden files, and the rules
// they follow (docs/launch.md).
#include <doctest/doctest.h>

#include "approx.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/version.hpp"
#include "validate/launch.hpp"

namespace val = dlsim::validate;
using val::LaunchFramework;

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

val::LaunchOptions site_options(LaunchFramework f) {
  val::LaunchOptions o;
  o.frameworks = {f};
  o.nodes = {2};
  o.batches = {64};
  o.model = "resnet50";
  o.gpus_per_node = 4;
  o.partition = "gpu";
  o.account = "proj01";
  o.time = "01:00:00";
  o.job_name = "rn50";
  o.output_dir = "/shared/runs";
  o.nccl_socket_ifname = "ib0";
  o.nccl_ib_hca = "mlx5_0,mlx5_1";
  o.command_line = "dlvalidate launch (test)";
  return o;
}

// The one script of a single-point launch, with the checkout's path of ddp_step.py written as
// @DDP_STEP@ and dlsim's version as @VERSION@, so the golden files hold in any clone.
std::string script_of(const val::LaunchOptions& o) {
  const auto jobs = val::plan_launch(o);
  REQUIRE(jobs.size() == 1);
  return replace_all(replace_all(jobs.front().script, DLSIM_DDP_STEP_SCRIPT, "@DDP_STEP@"),
                     std::string("dlsim ") + dlsim::kVersion, "dlsim @VERSION@");
}

void check_golden(const std::string& name, const std::string& got) {
  const auto path = std::filesystem::path(DLSIM_LAUNCH_GOLDEN) / (name + ".sbatch");
  if (std::getenv("DLSIM_UPDATE_GOLDEN")) {
    std::ofstream(path) << got;
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing golden file ", path.string());
  std::stringstream want;
  want << in.rdbuf();
  CHECK_MESSAGE(got == want.str(), "script differs from ", path.string(),
                " (DLSIM_UPDATE_GOLDEN=1 rewrites it)");
}

bool has_line(const std::string& script, const std::string& line) {
  return ("\n" + script).find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("every_framework_writes_the_script_a_site_runs_it_with") {
  struct G {
    const char* name;
    LaunchFramework f;
  };
  for (const G g :
       {G{"pytorch-ddp", LaunchFramework::kPytorchDdp},
        G{"horovod-pytorch", LaunchFramework::kHorovodPytorch},
        G{"horovod-tensorflow", LaunchFramework::kHorovodTensorflow},
        G{"horovod-keras", LaunchFramework::kHorovodKeras}, G{"tf-ps", LaunchFramework::kTfPs},
        G{"keras-mwms", LaunchFramework::kKerasMwms}, G{"mxnet-ps", LaunchFramework::kMxnetPs}}) {
    CAPTURE(g.name);
    auto o = site_options(g.f);
    if (g.f == LaunchFramework::kKerasMwms) o.script = "/home/user/train.py";
    if (g.f == LaunchFramework::kHorovodPytorch || g.f == LaunchFramework::kHorovodTensorflow ||
        g.f == LaunchFramework::kHorovodKeras) {
      o.knobs.fusion_threshold = dlsim::Bytes{64.0 * 1024 * 1024};
      o.knobs.cycle_time = dlsim::Seconds{0.005};
    }
    if (g.f == LaunchFramework::kTfPs || g.f == LaunchFramework::kMxnetPs) {
      o.knobs.ps_servers = 2;
    }
    check_golden(g.name, script_of(o));
  }
  auto torchrun = site_options(LaunchFramework::kPytorchDdp);
  torchrun.torch_launcher = "torchrun";
  check_golden("pytorch-ddp-torchrun", script_of(torchrun));
  auto dedicated = site_options(LaunchFramework::kTfPs);
  dedicated.knobs.ps_servers = 2;
  dedicated.knobs.ps_colocated = false;
  dedicated.knobs.mode = "distributed_replicated";
  check_golden("tf-ps-dedicated", script_of(dedicated));
}

TEST_CASE("pytorch_ddp_ranks_come_from_slurm_and_rendezvous_at_the_first_node") {
  const auto s = script_of(site_options(LaunchFramework::kPytorchDdp));
  CHECK(has_line(s, "#SBATCH --nodes=2"));
  CHECK(has_line(s, "#SBATCH --ntasks-per-node=4"));  // one task per GPU
  CHECK(has_line(s, "#SBATCH --gpus-per-node=4"));
  CHECK(has_line(s, "  export MASTER_ADDR=\"${nodes[0]}\" MASTER_PORT=29500"));
  CHECK(s.find("RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID") !=
        std::string::npos);
  CHECK(has_line(s, "  export NCCL_SOCKET_IFNAME=ib0"));
  CHECK(has_line(s, "  export NCCL_IB_HCA=mlx5_0,mlx5_1"));
  CHECK(s.find("'--device' 'cuda'") != std::string::npos);
}

TEST_CASE("horovod_reads_the_fusion_threshold_in_bytes_and_the_cycle_time_in_ms") {
  auto o = site_options(LaunchFramework::kHorovodPytorch);
  o.knobs.fusion_threshold = dlsim::Bytes{32.0 * 1024 * 1024};
  o.knobs.cycle_time = dlsim::Seconds{0.0035};
  const auto s = script_of(o);
  CHECK(has_line(s, "  export HOROVOD_FUSION_THRESHOLD=33554432"));
  CHECK(has_line(s, "  export HOROVOD_CYCLE_TIME=3.5"));
  CHECK(s.find("--mpi=pmix") != std::string::npos);
}

TEST_CASE("dedicated_parameter_servers_get_nodes_of_their_own") {
  auto o = site_options(LaunchFramework::kTfPs);
  o.knobs.ps_servers = 3;
  o.knobs.ps_colocated = false;
  const auto jobs = val::plan_launch(o);
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].points[0].alloc_nodes == 5);  // 2 workers + 3 servers
  CHECK(has_line(jobs[0].script, "#SBATCH --nodes=5"));
  // The servers' step starts at node 2 (after the workers), one per node.
  CHECK(jobs[0].script.find("--nodes=3 --ntasks=3 --relative=2 --overlap --ntasks-per-node=1") !=
        std::string::npos);
  o.knobs.ps_colocated = true;
  CHECK(val::plan_launch(o)[0].points[0].alloc_nodes == 2);
}

TEST_CASE("a_sweep_shares_one_job_array_per_allocation_shape") {
  auto o = site_options(LaunchFramework::kPytorchDdp);
  o.frameworks = {LaunchFramework::kPytorchDdp, LaunchFramework::kHorovodPytorch};
  o.nodes = {1, 2};
  o.batches = {32, 64};
  const auto jobs = val::plan_launch(o);
  REQUIRE(jobs.size() == 2);  // 1 node and 2 nodes
  CHECK(jobs[0].points.size() == 4);
  CHECK(has_line(jobs[0].script, "#SBATCH --array=0-3"));
  CHECK(has_line(jobs[0].script, "  3) point_3 ;;"));
  CHECK(jobs[1].points[0].nodes == 2);
}

TEST_CASE("a_knob_is_refused_only_where_no_framework_of_the_sweep_reads_it") {
  auto o = site_options(LaunchFramework::kPytorchDdp);
  o.frameworks = {LaunchFramework::kPytorchDdp, LaunchFramework::kHorovodPytorch};
  o.knobs.bucket_cap = dlsim::Bytes{50.0 * 1024 * 1024};
  o.knobs.fusion_threshold = dlsim::Bytes{32.0 * 1024 * 1024};
  const auto jobs = val::plan_launch(o);
  REQUIRE(jobs.size() == 1);
  const auto& s = jobs[0].script;
  // DDP's point runs ddp_step.py with the bucket size; Horovod's exports the fusion threshold.
  CHECK(s.find("'--bucket-cap-mb' '50'") != std::string::npos);
  CHECK(has_line(s, "  export HOROVOD_FUSION_THRESHOLD=33554432"));
  struct Refused {
    std::vector<LaunchFramework> sweep;
    bool bucket;
    const char* field;
  };
  for (const auto& r :
       {Refused{{LaunchFramework::kHorovodPytorch, LaunchFramework::kTfPs}, true, "bucket_cap"},
        Refused{
            {LaunchFramework::kPytorchDdp, LaunchFramework::kTfPs}, false, "fusion_threshold"}}) {
    CAPTURE(r.field);
    auto x = site_options(r.sweep.front());
    x.frameworks = r.sweep;
    if (r.bucket) x.knobs.bucket_cap = dlsim::Bytes{1e6};
    if (!r.bucket) x.knobs.fusion_threshold = dlsim::Bytes{1e6};
    try {
      val::plan_launch(x);
      FAIL("accepted");
    } catch (const dlsim::InputError& e) {
      const std::string what = e.what();
      CHECK(what.find(r.field) != std::string::npos);
      CHECK(what.find("no framework of the sweep") != std::string::npos);
    }
  }
}

TEST_CASE("fp16_compression_reaches_the_benchmarks_that_take_it_and_their_predictions") {
  // --compression fp16: ddp_step.py registers DDP's fp16_compress_hook (--fp16-compress),
  // Horovod's synthetic benchmarks pass Compression.fp16 (--fp16-allreduce); tf_cnn_benchmarks
  // has no such flag, so its point runs and is predicted without compression.
  auto o = site_options(LaunchFramework::kPytorchDdp);
  o.frameworks = {LaunchFramework::kPytorchDdp, LaunchFramework::kHorovodPytorch,
                  LaunchFramework::kHorovodTensorflow};
  o.knobs.compression = dlsim::simulator::GradientCompression::kFp16;
  const auto jobs = val::plan_launch(o);
  REQUIRE(jobs.size() == 1);
  const auto& s = jobs[0].script;
  CHECK(s.find("'--device' 'cuda' '--fp16-compress'") != std::string::npos);
  CHECK(s.find("'--num-iters' '10' '--fp16-allreduce'") != std::string::npos);
  CHECK(s.find("'--horovod_device=gpu'\n") != std::string::npos);
  val::LaunchPoint p;
  p.nodes = 2;
  p.batch = 64;
  p.ranks_per_node = 4;
  for (const auto f : {LaunchFramework::kPytorchDdp, LaunchFramework::kHorovodPytorch,
                       LaunchFramework::kHorovodTensorflow}) {
    p.framework = f;
    const auto q = val::predict_options(o, p, "dgx1-v100");
    CHECK(q.framework_options.compression.has_value() ==
          (f != LaunchFramework::kHorovodTensorflow));
  }
  auto x = site_options(LaunchFramework::kTfPs);
  x.knobs.compression = dlsim::simulator::GradientCompression::kFp16;
  CHECK_THROWS_WITH_AS(val::plan_launch(x), doctest::Contains("compression"), dlsim::InputError);
}

TEST_CASE("nothing_from_the_user_reaches_a_shell_line_unquoted") {
  auto o = site_options(LaunchFramework::kPytorchDdp);
  o.script = "/home/user/my train.py";
  o.script_args = {"--tag", "$(rm -rf ~)", "it's"};
  const auto s = script_of(o);
  CHECK(s.find("'/home/user/my train.py' '--tag' '$(rm -rf ~)' 'it'\\''s'") != std::string::npos);
  struct Bad {
    const char* field;
    void (*set)(val::LaunchOptions&);
  };
  for (const Bad b :
       {Bad{"partition", [](val::LaunchOptions& x) { x.partition = "gpu;reboot"; }},
        Bad{"job_name", [](val::LaunchOptions& x) { x.job_name = "a\nb"; }},
        Bad{"output_dir", [](val::LaunchOptions& x) { x.output_dir = "/x y"; }},
        Bad{"socket_ifname", [](val::LaunchOptions& x) { x.gloo_socket_ifname = "eth0 ; id"; }},
        Bad{"ib_hca", [](val::LaunchOptions& x) { x.nccl_ib_hca = "$(id)"; }},
        Bad{"nccl_algo", [](val::LaunchOptions& x) { x.nccl_algo = "Ring`id`"; }},
        Bad{"time", [](val::LaunchOptions& x) { x.time = "1h"; }},
        Bad{"nodes", [](val::LaunchOptions& x) { x.nodes = {0}; }},
        Bad{"batch", [](val::LaunchOptions& x) { x.batches = {-1}; }},
        Bad{"ps_servers", [](val::LaunchOptions& x) { x.knobs.ps_servers = 0; }},
        Bad{"model", [](val::LaunchOptions& x) { x.model = "bert_base"; }},
        Bad{"backend", [](val::LaunchOptions& x) {
              x.gpus_per_node = 0;
              x.torch_backend = "nccl";
            }}}) {
    CAPTURE(b.field);
    auto x = site_options(LaunchFramework::kPytorchDdp);
    b.set(x);
    try {
      val::plan_launch(x);
      FAIL("accepted");
    } catch (const dlsim::InputError& e) {
      const std::string what = e.what();
      CHECK(what.find(b.field) != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("a_launched_log_gives_the_jobs_samples_per_second_or_one_line_why_not") {
  const auto dir = std::filesystem::temp_directory_path() / "dlsim-launch-test";
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) {
    const auto p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  };
  std::string format;
  const auto ddp =
      write("ddp.out",
            "dlsim-launch: job 7_0 on node1 node2\n"
            "{\"kind\": \"pytorch-ddp-step\", \"ranks\": 2, \"samples_per_s\": 14.25}\n");
  CHECK(val::read_launched_throughput(ddp, 2, 1, &format) == dlsim_test::approx(14.25));
  CHECK(format == "pytorch-ddp-step");
  // MXNet's Speedometer: 2 workers, 1 warm-up batch each left out; mean of the rest times 2.
  const auto mx = write("mx.out",
                        "INFO:root:Epoch[0] Batch [1]\tSpeed: 10.00 samples/sec\n"
                        "INFO:root:Epoch[0] Batch [1]\tSpeed: 12.00 samples/sec\n"
                        "INFO:root:Epoch[0] Batch [2]\tSpeed: 100.00 samples/sec\n"
                        "INFO:root:Epoch[0] Batch [2]\tSpeed: 110.00 samples/sec\n");
  CHECK(val::read_launched_throughput(mx, 2, 1, &format) == dlsim_test::approx(210));
  const auto timeout =
      write("timeout.out",
            "dlsim-launch: job 8_1 on node1\n"
            "slurmstepd: error: *** JOB 9 ON node1 CANCELLED AT 2026-11-26T17:00:00 DUE TO TIME "
            "LIMIT ***\n");
  const auto cut = write("cut.out", "{\"kind\": \"pytorch-ddp-step\", \"ranks\": 2, \"samp");
  const auto none = write("none.out", "ModuleNotFoundError: No module named 'torch'\n");
  for (const auto& log : {std::pair{timeout, "time limit"}, std::pair{cut, "does not parse"},
                          std::pair{none, "No module named 'torch'"}}) {
    const std::string& path = log.first;
    const std::string want = log.second;
    CAPTURE(path);
    try {
      val::read_launched_throughput(path, 2, 1, &format);
      FAIL("read");
    } catch (const dlsim::InputError& e) {
      const std::string what = e.what();
      CHECK(what.find(path) != std::string::npos);
      CHECK(what.find(want) != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("each_framework_is_predicted_by_the_policy_that_models_it") {
  const auto o = site_options(LaunchFramework::kPytorchDdp);
  val::LaunchPoint p;
  p.nodes = 2;
  p.batch = 64;
  p.ranks_per_node = 4;
  struct M {
    LaunchFramework f;
    const char* policy;
  };
  for (const M m : {M{LaunchFramework::kPytorchDdp, "pytorch-ddp"},
                    M{LaunchFramework::kHorovodPytorch, "horovod"},
                    M{LaunchFramework::kHorovodTensorflow, "horovod"},
                    M{LaunchFramework::kHorovodKeras, "keras"}, M{LaunchFramework::kTfPs, "tf-ps"},
                    M{LaunchFramework::kMxnetPs, "mxnet-kvstore"}}) {
    p.framework = m.f;
    const auto q = val::predict_options(o, p, "dgx1-v100");
    CHECK(q.framework == m.policy);
    CHECK(q.gpus == 8);
    CHECK(*q.gpus_per_node == 4);
    CHECK(*q.batch == 64);
  }
}
