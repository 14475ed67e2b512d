// Log and timeline readers (validate/readers.hpp) against the fixtures in
// tests/fixtures/validate/logs (their README says what each follows); the expected numbers are
// read off the fixtures by hand.

#include <doctest/doctest.h>

#include "approx.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "validate/published.hpp"
#include "validate/readers.hpp"

namespace val = dlsim::validate;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) {
  return std::string(DLSIM_VALIDATE_LOGS) + "/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A file in a fresh temporary folder, removed with the object.
struct TempFile {
  fs::path dir, path;
  TempFile(const std::string& name, const std::string& content) {
    dir = fs::temp_directory_path() /
          ("dlsim_readers_" + std::to_string(reinterpret_cast<std::uintptr_t>(this)));
    fs::create_directories(dir);
    path = dir / name;
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() { fs::remove_all(dir); }
  std::string str() const { return path.string(); }
};

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dlsim::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("tf_cnn_benchmarks_single_gpu_log_gives_its_total_spread_and_steps") {
  const auto m = val::read_log(fixture("tf_cnn_benchmarks_1gpu.log"));
  CHECK(m.format == "tf_cnn_benchmarks");
  CHECK(m.model == "resnet50");
  CHECK(m.gpus == 1);
  CHECK(m.batch_per_gpu == 64);
  CHECK(m.variables == "parameter_server");
  CHECK(m.all_reduce.empty());
  CHECK(m.tensorflow == "1.15");
  CHECK(m.total == dlsim_test::approx(219.05));
  CHECK(m.spread == dlsim_test::approx(0.1));  // the +/- of step 100
  CHECK(m.total_lines == std::vector<int>{39});
  CHECK(m.lines.at("model") == 7);
  CHECK(m.lines.at("spread") == 37);
  REQUIRE(m.steps.size() == 11);
  CHECK(m.steps.front().step == 1);
  CHECK(m.steps.front().rate == dlsim_test::approx(218.6));
  CHECK(m.steps.front().line == 27);
  CHECK(m.steps.back().step == 100);
  CHECK(m.steps.back().rate == dlsim_test::approx(219.4));
  CHECK(*m.steps.back().loss == dlsim_test::approx(7.744));
  CHECK(m.steps.back().rank == -1);
}

TEST_CASE("tf_cnn_benchmarks_replicated_log_counts_gpus_from_the_batch_sizes") {
  const auto m = val::read_log(fixture("tf_cnn_benchmarks_replicated_8gpu.log"));
  CHECK(m.gpus == 8);  // 512 global / 64 per device, and 8 Devices
  CHECK(m.lines.at("gpus") == 11);
  CHECK(m.batch_per_gpu == 64);
  CHECK(m.variables == "replicated");
  CHECK(m.all_reduce == "nccl");
  CHECK(m.total == dlsim_test::approx(1701.32));
  CHECK(m.spread == dlsim_test::approx(0.8));
  const auto r = val::to_row(m, {});
  CHECK(r.at("comm") == "replicated(nccl)");
  CHECK(r.at("framework") == "tensorflow(tf_cnn_benchmarks)");
  CHECK(r.at("num_gpus") == "8");
  CHECK(r.at("num_nodes") == "1");  // a local run is one machine
  CHECK(r.at("gpus_per_node") == "8");
  CHECK(r.at("data") == "synthetic");
  CHECK(r.at("value") == "1701.32");
  CHECK(r.at("unit") == "images/s");
}

TEST_CASE("horovod_run_tf_cnn_benchmarks_log_averages_the_ranks_totals") {
  const auto m = val::read_log(fixture("tf_cnn_benchmarks_horovod_4gpu.log"));
  CHECK(m.model == "resnet101");
  CHECK(m.gpus == 4);
  CHECK(m.batch_per_gpu == 64);
  CHECK(m.variables == "horovod");
  // Each rank prints num_workers x its own rate (413.21 / 103.4 = 4.0): the job's rate seen
  // from that rank. Mean (413.55 + 413.21 + 412.63 + 412.87) / 4, half range (413.55 - 412.63)/2.
  CHECK(m.rank_totals.size() == 4);
  CHECK(m.total == dlsim_test::approx(413.065));
  CHECK(m.spread == dlsim_test::approx(0.46));
  CHECK(m.total_lines == std::vector<int>{102, 103, 104, 105});
  REQUIRE(m.steps.size() == 12);
  int rank3 = 0;
  for (const auto& s : m.steps) rank3 += s.rank == 3;
  CHECK(rank3 == 3);
  const auto r = val::to_row(m, {});
  CHECK(r.at("comm") == "horovod");
  CHECK(r.at("num_nodes").empty());  // not printed, not given
  CHECK(r.at("locator").ends_with(":102,103,104,105"));
  CHECK(r.at("value") == "413.065");
}

TEST_CASE("a_log_as_a_job_writes_it_reads_the_same_total_through_its_noise") {
  // What jobs add around the benchmark's own lines: a Slurm prologue, UCX warnings before the
  // first line, NCCL INFO lines between the ranks' lines, Windows line ends.
  std::string text = slurp(fixture("tf_cnn_benchmarks_horovod_4gpu.log"));
  text =
      "SLURM_JOB_ID=4242\nSLURM_JOB_NODELIST=g[0185-0186]\n"
      "[1622510346.876958] [g0185:144167:0]    ucp_context.c:1437 UCX  WARN  UCP version is "
      "incompatible, required: 1.10, actual: 1.9 (release 0)\n" +
      replace(text, "[1,0]<stdout>:Model:",
              "[1,0]<stdout>:g0185:144167:144167 [0] NCCL INFO NCCL version 2.8.4+cuda11.2\n"
              "[1,0]<stdout>:Model:");
  text = std::regex_replace(text, std::regex("\n"), "\r\n");
  const TempFile f("noisy.log", text);
  const auto m = val::read_log(f.str());
  CHECK(m.model == "resnet101");
  CHECK(m.gpus == 4);
  CHECK(m.total == dlsim_test::approx(413.065));
  CHECK(m.spread == dlsim_test::approx(0.46));
  CHECK(m.steps.size() == 12);
}

TEST_CASE("horovod_run_without_output_tags_reads_the_same_total") {
  const std::string text = std::regex_replace(slurp(fixture("tf_cnn_benchmarks_horovod_4gpu.log")),
                                              std::regex(R"(\[1,\d\]<stdout>:)"), "");
  const TempFile f("untagged.log", text);
  const auto m = val::read_log(f.str());
  CHECK(m.total == dlsim_test::approx(413.065));
  CHECK(m.steps.size() == 12);
  CHECK(m.steps.front().rank == -1);
}

TEST_CASE("horovod_run_whose_ranks_print_their_own_rate_sums_them") {
  std::string text = slurp(fixture("tf_cnn_benchmarks_horovod_4gpu.log"));
  text = replace(text, "total images/sec: 413.55", "total images/sec: 103.39");
  text = replace(text, "total images/sec: 413.21", "total images/sec: 103.30");
  text = replace(text, "total images/sec: 412.63", "total images/sec: 103.16");
  text = replace(text, "total images/sec: 412.87", "total images/sec: 103.21");
  const TempFile f("own_rate.log", text);
  const auto m = val::read_log(f.str());
  CHECK(m.total == dlsim_test::approx(413.06));
  CHECK(m.spread == dlsim_test::approx((103.39 - 103.16) / 2 * 4));
}

TEST_CASE("horovod_run_with_a_rank_cut_before_its_total_is_an_error") {
  const std::string text = replace(slurp(fixture("tf_cnn_benchmarks_horovod_4gpu.log")),
                                   "[1,3]<stdout>:total images/sec: 412.63\n", "");
  const TempFile f("rank_cut.log", text);
  const auto e = error_of([&] { val::read_log(f.str()); });
  CHECK(e.find("rank_cut.log:") != std::string::npos);
  CHECK(e.find("rank 3's output ends here without its 'total images/sec'") != std::string::npos);
}

TEST_CASE("horovod_pytorch_synthetic_benchmark_gives_total_and_its_confidence") {
  const auto m = val::read_log(fixture("horovod_pytorch_synthetic_16gpu.log"));
  CHECK(m.format == "horovod");
  CHECK(m.model == "resnet50");
  CHECK(m.batch_per_gpu == 32);
  CHECK(m.gpus == 16);
  CHECK(m.total == dlsim_test::approx(1682.9));
  CHECK(m.spread == dlsim_test::approx(23.4));
  CHECK(m.total_lines == std::vector<int>{21});
  REQUIRE(m.steps.size() == 10);
  CHECK(m.steps[9].step == 9);
  CHECK(m.steps[9].rate == dlsim_test::approx(104.9));
  CHECK(m.steps[9].line == 19);
  double sum = 0;
  for (const auto& s : m.steps) sum += s.rate;
  CHECK(sum / 10 * 16 == dlsim_test::approx(m.total).epsilon(1e-4));  // the script's own sum
  val::RowOptions o;
  o.gpus_per_node = 8;
  o.gpu = "V100-SXM2-16GB";
  const auto r = val::to_row(m, o);
  CHECK(r.at("num_nodes") == "2");
  CHECK(r.at("gpus_per_node") == "8");
  CHECK(r.at("comm") == "horovod");
  CHECK(r.at("data") == "synthetic");
  CHECK(r.at("gpu") == "V100-SXM2-16GB");
  CHECK(r.at("framework").empty());
  o.gpus_per_node.reset();
  o.nodes = 3;
  CHECK(error_of([&] { val::to_row(m, o); }).find("--nodes: 16 GPUs") != std::string::npos);
}

TEST_CASE("log_cut_before_its_total_is_an_error_naming_the_last_step") {
  const auto e = error_of([] { val::read_log(fixture("tf_cnn_benchmarks_cut.log")); });
  CHECK(e.find("tf_cnn_benchmarks_cut.log:34: no 'total images/sec' line") != std::string::npos);
  CHECK(e.find("the log ends with step 60: was the job stopped") != std::string::npos);
}

TEST_CASE("format_is_told_from_the_lines_and_a_forced_wrong_format_is_an_error") {
  CHECK(val::read_log(fixture("horovod_pytorch_synthetic_16gpu.log")).format == "horovod");
  val::LogOptions forced;
  forced.format = "tf_cnn_benchmarks";
  const auto e =
      error_of([&] { val::read_log(fixture("horovod_pytorch_synthetic_16gpu.log"), forced); });
  CHECK(e.find("horovod_pytorch_synthetic_16gpu.log:6: Batch size: '32' is not 'N global'") !=
        std::string::npos);
  const TempFile f("other.log", "epoch 1 loss 0.3\n");
  CHECK(error_of([&] { val::read_log(f.str()); }).find("neither a tf_cnn_benchmarks log") !=
        std::string::npos);
}

TEST_CASE("unknown_model_is_an_error_unless_a_zoo_model_is_given") {
  const std::string text = replace(slurp(fixture("tf_cnn_benchmarks_1gpu.log")),
                                   "Model:       resnet50", "Model:       inception4");
  const TempFile f("inception4.log", text);
  const auto e = error_of([&] { val::read_log(f.str()); });
  CHECK(e.find("inception4.log:7: model: 'inception4' is not a dlsim zoo model") !=
        std::string::npos);
  CHECK(e.find("--model") != std::string::npos);
  const auto m = val::read_log(f.str(), {"auto", "inception_v3"});
  CHECK(m.model == "inception_v3");
  CHECK(m.model_printed == "inception4");
  CHECK(error_of([&] {
          val::read_log(f.str(), {"auto", "inception_v9"});
        }).find("--model: 'inception_v9' is not a dlsim zoo model") != std::string::npos);
}

TEST_CASE("benchmark_model_spellings_map_to_zoo_names") {
  const dlsim::SourceLocation at{"x.log", 1};
  CHECK(val::zoo_model_name("inception3", at) == "inception_v3");   // tf_cnn_benchmarks
  CHECK(val::zoo_model_name("InceptionV3", at) == "inception_v3");  // Keras applications
  CHECK(val::zoo_model_name("ResNet50", at) == "resnet50");
  CHECK(val::zoo_model_name("resnet50_v1.5", at) == "resnet50");
  CHECK(val::zoo_model_name("VGG16", at) == "vgg16");
  CHECK(val::zoo_model_name("googlenet", at) == "googlenet");
  CHECK(error_of([&] { val::zoo_model_name("resnt50", at); }).find("did you mean 'resnet50'") !=
        std::string::npos);
}

TEST_CASE("malformed_log_values_are_errors_naming_the_line") {
  const std::string base = slurp(fixture("tf_cnn_benchmarks_1gpu.log"));
  {
    const TempFile f("step.log",
                     replace(base, "images/sec: 219.3 +/- 0.2", "images/sec: x +/- 0.2"));
    CHECK(error_of([&] {
            val::read_log(f.str());
          }).find("step.log:28: images/sec: 'x' is not a number") != std::string::npos);
  }
  {
    const TempFile f("total.log",
                     replace(base, "total images/sec: 219.05", "total images/sec: 2l9"));
    CHECK(error_of([&] {
            val::read_log(f.str());
          }).find("total.log:39: total images/sec: '2l9' is not a number") != std::string::npos);
  }
  {
    const TempFile f("per.log", replace(base, "64 per device", "6.5 per device"));
    CHECK(error_of([&] {
            val::read_log(f.str());
          }).find("per.log:12: per device: '6.5' is not a positive whole number") !=
          std::string::npos);
  }
  {
    const TempFile f("two.log", base + base);
    CHECK(error_of([&] { val::read_log(f.str()); }).find("two.log:47: a second run starts here") !=
          std::string::npos);
  }
  {
    const std::string hvd = slurp(fixture("horovod_pytorch_synthetic_16gpu.log"));
    const TempFile f("cpu.log", replace(hvd, "Number of GPUs: 16", "Number of CPUs: 16"));
    CHECK(error_of([&] { val::read_log(f.str()); }).find("cpu.log:7: the run used CPUs") !=
          std::string::npos);
    const TempFile g("gpus.log", replace(hvd, "on 16 GPU(s)", "on 8 GPU(s)"));
    CHECK(error_of([&] {
            val::read_log(g.str());
          }).find("gpus.log:21: the total is on 8 GPUs where line 7 says 16") != std::string::npos);
  }
  CHECK(error_of([] { val::read_log(fixture("none.log")); }).find("none.log: cannot open") !=
        std::string::npos);
}

TEST_CASE("rows_have_exactly_the_columns_of_throughput_csv_and_read_back") {
  const auto published = val::read_table(std::string(DLSIM_VALIDATION_DIR) + "/throughput.csv");
  CHECK(val::throughput_columns() == published.columns);
  val::RowOptions o;
  o.source_id = "mylab";
  o.notes = "run \"a\", second try";
  const std::vector<val::Row> rows = {
      val::to_row(val::read_log(fixture("tf_cnn_benchmarks_1gpu.log")), o),
      val::to_row(val::read_log(fixture("horovod_pytorch_synthetic_16gpu.log")), o)};
  const TempFile f("mylab.csv", val::write_csv(val::throughput_columns(), rows));
  const auto t = val::read_table(f.str());
  CHECK(t.name == "mylab");
  CHECK(t.columns == published.columns);
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0] == rows[0]);
  CHECK(t.rows[1] == rows[1]);
  CHECK(t.rows[0].at("notes").starts_with("run \"a\", second try; tf_cnn_benchmarks log"));
  CHECK(t.rows[1].at("value") == "1682.9");
  o.notes = "two\nlines";
  CHECK(error_of([&] {
          val::write_csv(val::throughput_columns(),
                         {val::to_row(val::read_log(fixture("tf_cnn_benchmarks_1gpu.log")), o)});
        }).find("notes:") != std::string::npos);
}

namespace {

void check_phases(const val::TimelineSummary& s) {
  // name, kind, intervals, total, per step (2 steps), longest; in ms, summed over both tensors.
  struct Want {
    const char* name;
    bool activity;
    int intervals;
    double total, per_step, longest;
  };
  const Want want[] = {{"NEGOTIATE_ALLREDUCE", false, 4, 0.53, 0.265, 0.2},
                       {"ALLREDUCE", false, 4, 2.34, 1.17, 0.63},
                       {"QUEUE", true, 4, 0.14, 0.07, 0.05},
                       {"MEMCPY_IN_FUSION_BUFFER", true, 4, 0.16, 0.08, 0.04},
                       {"NCCL_ALLREDUCE", true, 4, 1.86, 0.93, 0.5},
                       {"MEMCPY_OUT_FUSION_BUFFER", true, 4, 0.14, 0.07, 0.04}};
  REQUIRE(s.phases.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    const std::string name = want[i].name;
    CAPTURE(name);
    CHECK(s.phases[i].name == want[i].name);
    CHECK(s.phases[i].activity == want[i].activity);
    CHECK(s.phases[i].intervals == want[i].intervals);
    CHECK(s.phases[i].total_ms == dlsim_test::approx(want[i].total));
    CHECK(s.phases[i].per_step_ms == dlsim_test::approx(want[i].per_step));
    CHECK(s.phases[i].longest_ms == dlsim_test::approx(want[i].longest));
  }
  CHECK(s.tensors == 2);
  CHECK(s.steps == 2);
  CHECK(s.unmatched_ends == 0);
}

}  // namespace

TEST_CASE("timeline_with_its_closing_bracket_gives_per_phase_times") {
  const auto s = val::read_timeline(fixture("timeline_closed.json"));
  CHECK(s.closed);
  CHECK(s.records == 66);
  CHECK(s.cycles == 4);
  CHECK(s.rank_ready == 8);
  CHECK(s.open_at_end == 0);
  CHECK(s.span_ms == dlsim_test::approx(10.65));  // ts 1000 to 11650 us
  check_phases(s);
  const auto md = val::timeline_markdown(s);
  CHECK(md.find("| NCCL_ALLREDUCE | activity | 4 | 1.860 | 0.930 | 0.500 |") != std::string::npos);
  const auto json = val::timeline_json(s, "dlvalidate test");
  CHECK(json.find("\"time_unit\": \"ms\"") != std::string::npos);
}

TEST_CASE("timeline_without_its_closing_bracket_is_read_as_chrome_reads_it") {
  // The older writer: one record per line, each followed by ",", never closed; this job stopped
  // during a third negotiation, which stays open and is not counted.
  const auto s = val::read_timeline(fixture("timeline_unclosed.json"));
  CHECK_FALSE(s.closed);
  CHECK(s.records == 62);
  CHECK(s.cycles == 0);
  CHECK(s.rank_ready == 9);
  CHECK(s.open_at_end == 1);
  CHECK(s.span_ms == dlsim_test::approx(20.0));  // ts 1000 to 21000 us
  check_phases(s);
  CHECK(val::timeline_markdown(s).find("1 intervals begun and never ended") != std::string::npos);
}

TEST_CASE("timeline_record_cut_in_the_middle_is_an_error_naming_its_line") {
  const auto e = error_of([] { val::read_timeline(fixture("timeline_truncated.json")); });
  CHECK(e.find("timeline_truncated.json:8: the record that starts on this line is cut") !=
        std::string::npos);
}

TEST_CASE("timeline_field_of_the_wrong_type_or_bad_structure_is_an_error") {
  const std::string head =
      "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"t\"}},\n";
  auto error = [](const std::string& text) {
    const TempFile f("t.json", text);
    return error_of([&] { val::read_timeline(f.str()); });
  };
  CHECK(error(head + "{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": \"1200\", \"pid\": 1},\n")
            .find("t.json:3: ts: \"1200\" is not a number") != std::string::npos);
  CHECK(error(head + "{\"ph\": \"B\", \"name\": \"ALLREDUCE\", \"ts\": 1200, \"pid\": 1.5}\n]")
            .find("t.json:3: pid: 1.5 is not an integer") != std::string::npos);
  CHECK(
      error(head + "{\"ph\": \"B\", \"ts\": 1200, \"pid\": 1}]").find("t.json:3: name: missing") !=
      std::string::npos);
  CHECK(error(head + "{\"ph\": \"C\", \"name\": \"x\", \"ts\": 1, \"pid\": 1}]")
            .find("t.json:3: ph: 'C' is not an event phase") != std::string::npos);
  CHECK(error(head + "{\"ph\": \"B\", \"name\": \"A\", \"ts\": 50, \"pid\": 1},\n"
                     "{\"ph\": \"E\", \"ts\": 40, \"pid\": 1}]")
            .find("t.json:4: ts: 40 ends 'A' before it began (ts 50)") != std::string::npos);
  CHECK(error(head + "{\"ph\": \"B\", \"name\": \"A\", \"ts\": 50, \"pid\": 1} x")
            .find("t.json:3: expected ',' or ']' after a record, found 'x'") != std::string::npos);
  CHECK(error(head + "{\"ph\": \"B\" \"name\": \"A\"}").find("t.json:3: the record is not JSON") !=
        std::string::npos);
  CHECK(error("{\"traceEvents\": []}").find("expected '['") != std::string::npos);
  CHECK(error("").find("empty file") != std::string::npos);
  CHECK(error(head + "]\n]").find("t.json:4: ']' after the closing ']'") != std::string::npos);
}
