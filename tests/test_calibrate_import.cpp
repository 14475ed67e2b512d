// Importers: nccl-tests text (2.x with redop/root/#wrong, 1.x-style without) and -J JSON, and OSU
// micro-benchmarks output, read into results with their values, and bad files refused with the
// file and line in one message.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include "calibrate/import.hpp"
#include "common/error.hpp"

namespace cal = dlsim::calibrate;

namespace {

std::string fixture(const std::string& name) {
  return std::string(DLSIM_CALIBRATE_FIXTURES) + "/" + name;
}

// The InputError message `f` throws (empty when it does not throw).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const dlsim::InputError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("nccl-tests 2.x text: every row of an 8-rank, 2-host allreduce with its time") {
  const auto r = cal::import_nccl_tests(fixture("nccl_tests_allreduce_2x4.txt"));
  REQUIRE(r.measurements.size() == 13);
  CHECK(r.provenance.tool == "nccl-tests");
  CHECK(r.provenance.source == fixture("nccl_tests_allreduce_2x4.txt"));
  CHECK(r.provenance.versions.at("nccl") == "2.18.5");
  CHECK(r.provenance.versions.at("cuda") == "12.2");
  CHECK(r.provenance.versions.at("nccl-tests") == "2.13.8");
  CHECK(r.provenance.devices.at("gpu") == "NVIDIA A100-SXM4-80GB");
  CHECK(r.provenance.hosts == std::vector<std::string>{"node001", "node002"});
  CHECK(r.provenance.environment.at("NCCL_IB_HCA") == "mlx5_0,mlx5_1");
  CHECK(r.provenance.command.starts_with("mpirun -np 8"));

  const auto& first = r.measurements.front();
  CHECK(first.op == "allreduce");
  CHECK(first.backend == "nccl");
  CHECK(first.ranks == 8);
  CHECK(first.nodes == 2);
  CHECK(first.bytes == 8);
  CHECK(first.dtype == "float32");
  REQUIRE(first.samples_s.size() == 1);
  CHECK(first.samples_s[0] == dlsim_test::approx(31.81e-6));
  CHECK(first.params.at("source_line") == "20");
  CHECK(first.params.at("in_place_time_us") == "32.19");

  const auto& last = r.measurements.back();
  CHECK(last.bytes == 134217728);
  CHECK(last.samples_s[0] == dlsim_test::approx(1479.01e-6));
  CHECK(last.params.at("source_line") == "32");
  // The printed busbw (158.81 GB/s) comes back from the time and the bus factor 2 x 7/8.
  CHECK(last.busbw() / 1e9 == dlsim_test::approx(158.81).epsilon(1e-3));
}

TEST_CASE("nccl-tests old text: no redop/root columns, 'error' column, op from the command line") {
  const auto r = cal::import_nccl_tests(fixture("nccl_tests_allgather_old.txt"));
  REQUIRE(r.measurements.size() == 15);
  CHECK(r.provenance.versions.at("nccl") == "2.4.8");
  CHECK(r.provenance.devices.at("gpu") == "Tesla V100-SXM2-16GB");
  CHECK(r.provenance.hosts == std::vector<std::string>{"dgx-test"});
  const auto& m = r.measurements[4];
  CHECK(m.op == "allgather");
  CHECK(m.ranks == 4);
  CHECK(m.nodes == 1);
  CHECK(m.bytes == 16384);
  CHECK(m.samples_s[0] == dlsim_test::approx(12.14e-6));
  CHECK(m.params.at("in_place_time_us") == "11.96");
  CHECK(r.measurements.back().bytes == 16777216);
  CHECK(r.measurements.back().samples_s[0] == dlsim_test::approx(361.33e-6));
}

TEST_CASE("nccl-tests -J JSON: results, ranks = nthreads x ngpus x processes, hosts, versions") {
  const auto r = cal::import_nccl_tests(fixture("nccl_tests_reducescatter.json"));
  REQUIRE(r.measurements.size() == 6);
  CHECK(r.provenance.versions.at("nccl") == "2.27.3");
  CHECK(r.provenance.hosts == std::vector<std::string>{"node003", "node004"});
  CHECK(r.provenance.devices.at("gpu") == "NVIDIA H100 80GB HBM3");
  CHECK(r.provenance.environment.at("NCCL_ALGO") == "Ring");
  CHECK(r.provenance.environment.count("PATH") == 0);
  CHECK(r.provenance.date == "2025-03-14T09:26:53");
  CHECK(r.provenance.command.starts_with("./build/reduce_scatter_perf -b 1K"));
  const auto& m = r.measurements[2];
  CHECK(m.op == "reducescatter");
  CHECK(m.ranks == 8);
  CHECK(m.nodes == 2);
  CHECK(m.bytes == 65536);
  CHECK(m.dtype == "float16");
  CHECK(m.samples_s[0] == dlsim_test::approx(24.4096e-6));
  CHECK(r.measurements.back().bytes == 33554432);
}

TEST_CASE("nccl-tests: a file cut in the middle of a row is truncated at its last line") {
  const auto msg = error_of([] { cal::import_nccl_tests(fixture("nccl_tests_truncated.txt")); });
  CHECK(msg.find("nccl_tests_truncated.txt:29") != std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);
}

TEST_CASE("nccl-tests: a JSON file cut short is truncated, with its line") {
  const auto msg = error_of([] { cal::import_nccl_tests(fixture("nccl_tests_truncated.json")); });
  CHECK(msg.find("nccl_tests_truncated.json:1") != std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);
}

TEST_CASE("nccl-tests: a row whose busbw is not algbw x the bus factor is refused at its line") {
  const auto msg = error_of([] { cal::import_nccl_tests(fixture("nccl_tests_bad_busbw.txt")); });
  CHECK(msg.find("nccl_tests_bad_busbw.txt:29") != std::string::npos);
  CHECK(msg.find("busbw") != std::string::npos);
}

TEST_CASE(
    "nccl-tests: a table named nowhere is an allreduce when its redop, root and counts say so") {
  // Reduction, no root, each rank's count the whole buffer, busbw = 2(n-1)/n algbw.
  const auto r = cal::import_nccl_tests(fixture("nccl_tests_unknown_op.txt"));
  REQUIRE(!r.measurements.empty());
  CHECK(r.measurements.front().op == "allreduce");
  CHECK(r.measurements.front().ranks == 8);
  CHECK(r.provenance.notes.front().find("decided by the table's columns") != std::string::npos);
}

TEST_CASE("nccl-tests: a table that fits two collectives names them and --op, and --op decides") {
  // No reduction, no root, a 1/n count: allgather and alltoall print alike.
  const auto msg = error_of([] { cal::import_nccl_tests(fixture("nccl_tests_undecided_op.txt")); });
  CHECK(msg.find("nccl_tests_undecided_op.txt:10") != std::string::npos);
  CHECK(msg.find("fit allgather, alltoall") != std::string::npos);
  CHECK(msg.find("give --op") != std::string::npos);
  cal::ImportOptions o;
  o.op = "allgather";
  const auto r = cal::import_nccl_tests(fixture("nccl_tests_undecided_op.txt"), o);
  CHECK(r.measurements.size() == 28);
  CHECK(r.measurements.back().op == "allgather");
  // A wrong --op does not pass: broadcast's count is the whole buffer, and the table's counts
  // are each rank's share (its bus factor, 1, contradicts the printed busbw as well).
  o.op = "broadcast";
  const auto wrong =
      error_of([&] { cal::import_nccl_tests(fixture("nccl_tests_undecided_op.txt"), o); });
  CHECK(wrong.find("nccl_tests_undecided_op.txt:14: count: 4 element(s) of float make 16 B, "
                   "not the row's 32 B") != std::string::npos);
}

TEST_CASE("nccl-tests: --op that contradicts the log's binary is refused naming both") {
  cal::ImportOptions o;
  o.op = "broadcast";
  const auto msg =
      error_of([&] { cal::import_nccl_tests(fixture("nccl_tests_allreduce_2x4.txt"), o); });
  CHECK(msg.find("--op") != std::string::npos);
  CHECK(msg.find("(allreduce), not broadcast") != std::string::npos);
}

TEST_CASE("nccl-tests: OSU output is not nccl-tests output") {
  const auto msg = error_of([] { cal::import_nccl_tests(fixture("osu_latency.txt")); });
  CHECK(msg.find("osu_latency.txt") != std::string::npos);
  CHECK(msg.find("not nccl-tests output") != std::string::npos);
}

TEST_CASE("osu_latency: one-way latency per size on 2 ranks") {
  const auto r = cal::import_osu(fixture("osu_latency.txt"));
  REQUIRE(r.measurements.size() == 24);
  CHECK(r.provenance.tool == "osu-micro-benchmarks 7.3");
  const auto& zero = r.measurements.front();
  CHECK(zero.op == "p2p_latency");
  CHECK(zero.backend == "mpi");
  CHECK(zero.ranks == 2);
  CHECK(zero.bytes == 0);
  CHECK(zero.dtype == "int8");
  CHECK(zero.samples_s[0] == dlsim_test::approx(1.62e-6));
  CHECK(zero.params.at("osu_metric") == "one-way latency");
  CHECK(zero.params.at("source_line") == "4");
  CHECK(r.measurements.back().bytes == 4194304);
  CHECK(r.measurements.back().samples_s[0] == dlsim_test::approx(366.34e-6));
}

TEST_CASE("osu_bw (CUDA build): time per message = size / (MB/s x 1e6)") {
  const auto r = cal::import_osu(fixture("osu_bw.txt"));
  REQUIRE(r.measurements.size() == 23);
  const auto& m = r.measurements.back();
  CHECK(m.op == "p2p_bandwidth");
  CHECK(m.ranks == 2);
  CHECK(m.nodes == 2);
  CHECK(m.bytes == 4194304);
  CHECK(m.samples_s[0] == dlsim_test::approx(4194304 / (23350.37 * 1e6)));
  CHECK(m.algbw() == dlsim_test::approx(23350.37e6));
  CHECK(m.params.at("osu_buffers") == "send DEVICE, receive DEVICE");
  CHECK(m.params.count("direction") == 0);
}

TEST_CASE("osu_bibw: bandwidth marked bidirectional") {
  const auto r = cal::import_osu(fixture("osu_bibw.txt"));
  REQUIRE(r.measurements.size() == 23);
  CHECK(r.measurements[0].op == "p2p_bandwidth");
  CHECK(r.measurements[0].params.at("direction") == "bidirectional");
}

TEST_CASE("osu_allreduce -f: average as the sample, min/max/iterations kept, ranks from comment") {
  const auto r = cal::import_osu(fixture("osu_allreduce.txt"));
  REQUIRE(r.measurements.size() == 21);
  const auto& m = r.measurements.front();
  CHECK(m.op == "allreduce");
  CHECK(m.ranks == 16);
  CHECK(m.nodes == 4);
  CHECK(m.bytes == 4);
  CHECK(m.dtype == "float32");
  REQUIRE(m.samples_s.size() == 1);
  CHECK(m.samples_s[0] == dlsim_test::approx(6.80e-6));
  CHECK(m.params.at("min_latency_us") == "6.19");
  CHECK(m.params.at("max_latency_us") == "7.69");
  CHECK(m.params.at("iterations") == "1000");
  CHECK(r.measurements.back().bytes == 4194304);
  CHECK(r.measurements.back().samples_s[0] == dlsim_test::approx(1453.11e-6));
}

TEST_CASE("osu_allgather: bytes are OSU's per-rank size x ranks (nccl-tests' size)") {
  const auto r = cal::import_osu(fixture("osu_allgather.txt"));
  REQUIRE(r.measurements.size() == 11);
  const auto& m = r.measurements.back();
  CHECK(m.op == "allgather");
  CHECK(m.ranks == 4);
  CHECK(m.nodes == 1);
  CHECK(m.bytes == 1024 * 4);
  CHECK(m.params.at("osu_size_bytes") == "1024");
}

TEST_CASE("osu: a collective without its rank count is refused") {
  const auto msg = error_of([] { cal::import_osu(fixture("osu_allgather_no_ranks.txt")); });
  CHECK(msg.find("osu_allgather_no_ranks.txt") != std::string::npos);
  CHECK(msg.find("number of ranks") != std::string::npos);
}

TEST_CASE("osu: a last row cut mid-number (no end of line) is truncated at its line") {
  const auto msg = error_of([] { cal::import_osu(fixture("osu_bw_truncated.txt")); });
  CHECK(msg.find("osu_bw_truncated.txt:28") != std::string::npos);
  CHECK(msg.find("truncated") != std::string::npos);
}

TEST_CASE("osu: an unsupported test is refused at its header line") {
  const auto msg = error_of([] { cal::import_osu(fixture("osu_gather.txt")); });
  CHECK(msg.find("osu_gather.txt:2") != std::string::npos);
  CHECK(msg.find("is not imported") != std::string::npos);
}

TEST_CASE("osu: mbw_mr adds up its pairs, each record moving size x pairs bytes") {
  const auto r = cal::import_osu(fixture("osu_mbw_mr.txt"));
  REQUIRE(!r.measurements.empty());
  const auto& m = r.measurements.front();
  CHECK(m.op == "p2p_bandwidth");
  const int pairs = std::stoi(m.params.at("pairs"));
  CHECK(m.ranks == 2 * pairs);
  CHECK(m.samples_s.at(0) ==
        dlsim_test::approx(m.bytes / (std::stod(m.params.at("bandwidth_MBps")) * 1e6)));
}

TEST_CASE("osu: nccl-tests output is not OSU output") {
  const auto msg = error_of([] { cal::import_osu(fixture("nccl_tests_allreduce_2x4.txt")); });
  CHECK(msg.find("nccl_tests_allreduce_2x4.txt:1") != std::string::npos);
  CHECK(msg.find("not OSU") != std::string::npos);
}

TEST_CASE("importers: a missing file is an InputError naming it") {
  CHECK_THROWS_AS(cal::import_nccl_tests(fixture("no_such_file.txt")), dlsim::InputError);
  CHECK_THROWS_AS(cal::import_osu(fixture("no_such_file.txt")), dlsim::InputError);
}

TEST_CASE("importers: imported results are valid results files (written and read back)") {
  for (const auto& r : {cal::import_nccl_tests(fixture("nccl_tests_allreduce_2x4.txt")),
                        cal::import_nccl_tests(fixture("nccl_tests_reducescatter.json")),
                        cal::import_osu(fixture("osu_allreduce.txt"))}) {
    const auto file = std::filesystem::temp_directory_path() / "dlsim_test_import.jsonl";
    std::ofstream(file) << cal::to_jsonl(r);
    const auto back = cal::read_results(file.string());
    std::filesystem::remove(file);
    REQUIRE(back.measurements.size() == r.measurements.size());
    CHECK(back.measurements.back().samples_s == r.measurements.back().samples_s);
    CHECK(back.measurements.back().ranks == r.measurements.back().ranks);
    CHECK(back.provenance.tool == r.provenance.tool);
  }
}

TEST_CASE("nccl-tests: NCCL INFO channel lines name the transport, --transport where they do not") {
  const std::string corpus = std::string(DLSIM_LOG_CORPUS) + "/nccl-tests/";
  // Two nodes of one T4 each: every channel line says "via NET/AWS Libfabric/0".
  const std::string efa = corpus + "eksefa_allreduce_t4_2node_tagged_ncclinfo.log";
  const auto net = cal::import_nccl_tests(efa);
  REQUIRE(!net.measurements.empty());
  for (const auto& m : net.measurements) CHECK(m.params.at("transport") == "NET");
  cal::ImportOptions shm;
  shm.transport = "shm";
  CHECK(error_of([&] {
          cal::import_nccl_tests(efa, shm);
        }).find("--transport: the log's NCCL INFO lines say NET, not SHM") != std::string::npos);
  // Two GeForce RTX 2080 Ti (no peer-to-peer): the log has no INFO lines; the user says SHM.
  const std::string geforce =
      corpus + "autodl_2080ti_multirun_allreduce_allgather_bcast_reduce_alltoall.log";
  for (const auto& m : cal::import_nccl_tests(geforce).measurements) {
    CHECK(m.params.count("transport") == 0);
  }
  for (const auto& m : cal::import_nccl_tests(geforce, shm).measurements) {
    CHECK(m.params.at("transport") == "SHM");
  }
  // NCCL 2.4's wording ("via direct shared memory", "via P2P/IPC") in the first run of that log.
  std::ifstream in(geforce);
  std::string text, line;
  for (int n = 1; std::getline(in, line) && n <= 42; ++n) {
    text += line + "\n";
    if (n == 6) {
      text += "node:1:2 [0] NCCL INFO Ring 00 : 0[0] -> 1[1] via direct shared memory\n";
      text += "node:1:2 [1] NCCL INFO Ring 00 : 1[1] -> 0[0] via P2P/IPC\n";
    }
  }
  const auto path = std::filesystem::temp_directory_path() / "dlsim_nccl_tests_ring24.log";
  std::ofstream(path) << text;
  const auto both = cal::import_nccl_tests(path.string());
  REQUIRE(!both.measurements.empty());
  CHECK(both.measurements.front().params.at("transport") == "P2P+SHM");
  std::filesystem::remove(path);
}
