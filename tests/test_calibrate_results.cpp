// Calibration results files: statistics of a measurement, nccl-tests' bus factors, the JSON Lines
// round trip, streaming and resuming, and every malformed file as one InputError naming it.
#include <doctest/doctest.h>

#include "approx.hpp"

#include <filesystem>
#include <fstream>

#include "calibrate/results.hpp"
#include "common/error.hpp"

namespace cal = dlsim::calibrate;
namespace fs = std::filesystem;

namespace {

fs::path temp_file(const std::string& name) {
  const auto dir = fs::temp_directory_path() / "dlsim_test_calibrate";
  fs::create_directories(dir);
  const auto p = dir / name;
  fs::remove(p);
  return p;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

std::string error_of(const fs::path& p, bool tolerate = false) {
  try {
    cal::read_results(p.string(), tolerate);
  } catch (const dlsim::InputError& e) {
    return e.what();
  }
  return "";
}

cal::Measurement allreduce(double bytes, std::vector<double> samples) {
  cal::Measurement m;
  m.op = "allreduce";
  m.backend = "mpi";
  m.ranks = 4;
  m.nodes = 2;
  m.bytes = bytes;
  m.samples_s = std::move(samples);
  return m;
}

const char* kHeader =
    R"({"kind":"dlcalibrate-results","format_version":1,"provenance":{"tool":"test"}})"
    "\n";

}  // namespace

TEST_CASE("a measurement's statistics and nccl-tests bandwidths") {
  const auto m = allreduce(1 << 20, {4e-3, 1e-3, 2e-3, 3e-3});
  CHECK(m.min_s() == dlsim_test::approx(1e-3));
  CHECK(m.max_s() == dlsim_test::approx(4e-3));
  CHECK(m.median_s() == dlsim_test::approx(2.5e-3));  // mean of the middle two
  CHECK(m.algbw() == dlsim_test::approx((1 << 20) / 2.5e-3));
  // nccl-tests: allreduce busbw = algbw x 2(n-1)/n.
  CHECK(m.busbw() == dlsim_test::approx(m.algbw() * 2.0 * 3.0 / 4.0));
  CHECK(cal::bus_factor("allgather", 8) == dlsim_test::approx(7.0 / 8.0));
  CHECK(cal::bus_factor("reducescatter", 8) == dlsim_test::approx(7.0 / 8.0));
  CHECK(cal::bus_factor("broadcast", 8) == dlsim_test::approx(1.0));
  CHECK(cal::bus_factor("p2p_bandwidth", 2) == dlsim_test::approx(1.0));
  cal::Measurement g;
  g.op = "gemm";
  g.flops = 2.0 * 1024 * 1024 * 1024;
  g.samples_s = {1e-3};
  CHECK(g.flop_rate() == dlsim_test::approx(2.147483648e12));
  CHECK(g.algbw() == 0);
}

TEST_CASE("results stream to a file line by line and read back unchanged") {
  const auto p = temp_file("stream.jsonl");
  cal::Provenance prov;
  prov.tool = "dlcalibrate test";
  prov.hosts = {"node1", "node2"};
  prov.versions["mpi"] = "Open MPI 4.1.4";
  prov.load_before = 0.5;
  {
    cal::ResultsWriter w(p.string(), prov);
    w.add(allreduce(1024, {1e-5, 1.2e-5}));
    // Written and flushed at once: a reader sees it before the writer is done.
    const auto mid = cal::read_results(p.string());
    CHECK(mid.measurements.size() == 1);
    auto with_host = allreduce(2048, {2e-5});
    with_host.host_samples_s = {3e-6};  // the host's time issuing it, where measured
    w.add(with_host);
    prov.load_after = 0.7;
    prov.notes = {"buffers touched before timing"};
    w.finish(prov);
  }
  const auto r = cal::read_results(p.string());
  REQUIRE(r.measurements.size() == 2);
  CHECK(r.provenance.tool == "dlcalibrate test");
  CHECK(r.provenance.hosts == std::vector<std::string>{"node1", "node2"});
  CHECK(r.provenance.versions.at("mpi") == "Open MPI 4.1.4");
  CHECK(*r.provenance.load_before == dlsim_test::approx(0.5));
  CHECK(*r.provenance.load_after == dlsim_test::approx(0.7));
  CHECK(r.provenance.notes == std::vector<std::string>{"buffers touched before timing"});
  CHECK(r.measurements[0].samples_s == std::vector<double>{1e-5, 1.2e-5});
  CHECK(r.measurements[1].bytes == 2048);
  CHECK(r.measurements[1].nodes == 2);
  CHECK(r.measurements[1].host_samples_s == std::vector<double>{3e-6});
  CHECK(r.measurements[0].host_samples_s.empty());
  // A second writer on the same path refuses unless it resumes.
  CHECK_THROWS_AS(cal::ResultsWriter(p.string(), prov), dlsim::InputError);
}

TEST_CASE("a run cut short mid-record is reported, and resuming drops the partial record") {
  const auto p = temp_file("cut.jsonl");
  write(p,
        std::string(kHeader) +
            R"({"op":"allreduce","backend":"mpi","ranks":2,"nodes":1,"bytes":8,"samples_s":[1e-6]})"
            "\n"
            R"({"op":"allreduce","backend":"mpi","ranks":2,"nodes":1,"bytes":16,"samp)");
  const auto e = error_of(p);
  CHECK(e.find("cut.jsonl:3") != std::string::npos);
  CHECK(e.find("cut short") != std::string::npos);
  CHECK(cal::read_results(p.string(), true).measurements.size() == 1);
  {
    cal::ResultsWriter w(p.string(), {}, /*append=*/true);
    w.add(allreduce(16, {2e-6}));
  }
  const auto r = cal::read_results(p.string());
  REQUIRE(r.measurements.size() == 2);
  CHECK(r.measurements[1].bytes == 16);
}

TEST_CASE("malformed results files: one error naming the file, line and field") {
  struct Case {
    const char* name;
    std::string text;
    const char* expect;
  };
  const std::string rec =
      R"({"op":"allreduce","backend":"mpi","ranks":2,"nodes":1,"bytes":8,"samples_s":[1e-6]})";
  const std::vector<Case> cases = {
      {"empty.jsonl", "", "no header"},
      {"notresults.jsonl",
       R"({"kind":"something-else"})"
       "\n",
       "not a dlcalibrate results file"},
      {"version.jsonl",
       R"({"kind":"dlcalibrate-results","format_version":99,"provenance":{"tool":"x"}})"
       "\n",
       "format_version: 99 is not the version"},
      {"typo.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduce","backend":"mpi","rank":2,"nodes":1,"bytes":8,"samples_s":[1e-6]})"
           "\n",
       "typo.jsonl:2: rank: unknown key; did you mean 'ranks'"},
      {"op.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduse","backend":"mpi","ranks":2,"nodes":1,"bytes":8,"samples_s":[1e-6]})"
           "\n",
       "op: unknown operation 'allreduse'; did you mean 'allreduce'"},
      {"negative.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduce","backend":"mpi","ranks":2,"nodes":1,"bytes":8,"samples_s":[-1e-6]})"
           "\n",
       "samples_s: every sample must be a positive time"},
      {"host_count.jsonl",
       std::string(kHeader) +
           R"({"op":"layer_forward","backend":"torch","ranks":1,"nodes":1,"bytes":0,"samples_s":[1e-6,2e-6],"host_samples_s":[1e-6]})"
           "\n",
       "host_samples_s: has 1 samples where samples_s has 2"},
      {"host_negative.jsonl",
       std::string(kHeader) +
           R"({"op":"layer_forward","backend":"torch","ranks":1,"nodes":1,"bytes":0,"samples_s":[1e-6],"host_samples_s":[0]})"
           "\n",
       "host_samples_s: every sample must be a positive time"},
      {"nodes.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduce","backend":"mpi","ranks":2,"nodes":3,"bytes":8,"samples_s":[1e-6]})"
           "\n",
       "nodes: must be 1 ... ranks"},
      {"garbage.jsonl", std::string(kHeader) + "not json\n" + rec + "\n", "garbage.jsonl:2"},
      {"type.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduce","backend":"mpi","ranks":"two","nodes":1,"bytes":8,"samples_s":[1e-6]})"
           "\n",
       "ranks: has the wrong type"},
      {"backend.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduce","backend":"ncll","ranks":2,"nodes":1,"bytes":8,"samples_s":[1e-6]})"
           "\n",
       "backend.jsonl:2: backend: unknown backend 'ncll'; did you mean 'nccl'"},
      {"fraction.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduce","backend":"mpi","ranks":2.5,"nodes":1,"bytes":8,"samples_s":[1e-6]})"
           "\n",
       "fraction.jsonl:2: ranks: must be a whole number, got 2.5"},
      {"wrap.jsonl",
       std::string(kHeader) +
           R"({"op":"allreduce","backend":"mpi","ranks":4294967298,"nodes":1,"bytes":8,"samples_s":[1e-6]})"
           "\n",
       "wrap.jsonl:2: ranks: must be a whole number, got 4294967298"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto p = temp_file(c.name);
    write(p, c.text);
    const auto e = error_of(p);
    CHECK(e.find(c.name) != std::string::npos);
    CHECK(e.find(c.expect) != std::string::npos);
    CHECK(e.find('\n') == std::string::npos);
  }
}
