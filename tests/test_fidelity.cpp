// First fidelity checks against published multi-GPU runs (validate/data), each table's 1-GPU
// row anchoring compute (--anchor-throughput). Each case prints its error.

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "simulator/predict.hpp"

namespace sim = dlsim::simulator;

namespace {

// A minimal CSV reader for the validation files: quoted fields may hold commas.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  auto split = [](const std::string& line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (char c : line) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        out.emplace_back();
      } else {
        out.back() += c;
      }
    }
    return out;
  };
  std::string line;
  std::getline(in, line);
  const auto header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto cells = split(line);
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

struct Case {
  std::string model, comm, framework;
  int batch;
  double tolerance;  // relative
};

}  // namespace

TEST_CASE("tfbench2017_dgx1_p100_scaling_with_the_1_gpu_row_as_anchor") {
  const auto rows = read_csv(std::string(DLSIM_VALIDATION_DIR) + "/throughput.csv");
  // Synthetic-data tables of the DGX-1 (P100) page. Parameter-server rows within 10 %; the
  // NCCL-replicated rows lose more to communication in 2017's TensorFlow than the NCCL 2
  // model predicts (docs/simulator.md, "Known limitations"), so their bound is looser.
  const std::vector<Case> cases = {
      {"inception_v3", "parameter_server(cpu)", "tf-ps", 64, 0.10},
      {"resnet50", "parameter_server(cpu)", "tf-ps", 64, 0.10},
      {"resnet152", "parameter_server(cpu)", "tf-ps", 64, 0.10},
      {"vgg16", "replicated(nccl)", "tf-replicated", 64, 0.15},
      {"alexnet", "replicated(nccl)", "tf-replicated", 512, 0.35},
  };
  for (const auto& c : cases) {
    std::map<int, double> measured;
    for (const auto& r : rows) {
      if (r.at("source_id") == "tfbench2017" && r.at("gpu") == "P100-SXM2" &&
          r.at("model") == c.model && r.at("comm") == c.comm &&
          std::stoi(r.at("batch_per_gpu")) == c.batch &&
          r.at("locator").find("synthetic") != std::string::npos &&
          !measured.count(std::stoi(r.at("num_gpus")))) {
        measured[std::stoi(r.at("num_gpus"))] = std::stod(r.at("value"));
      }
    }
    REQUIRE(measured.count(1));
    for (const auto& [gpus, value] : measured) {
      sim::PredictOptions o;
      o.model = c.model;
      o.gpus = gpus;
      o.cluster = "dgx1-p100";
      o.framework = c.framework;
      o.batch = std::to_string(c.batch);
      o.optimizer = "sgd";  // tf_cnn_benchmarks' default
      o.anchor_throughput = measured.at(1);
      const double predicted = sim::predict(o).throughput;
      const double error = (predicted - value) / value;
      MESSAGE(c.model << " " << c.comm << " " << gpus << " GPUs: measured " << value
                      << ", predicted " << predicted << ", error " << error * 100 << " %");
      CHECK(std::abs(error) <= c.tolerance);
    }
  }
}

TEST_CASE("horovod_docs_efficiency_at_128_pascal_gpus_over_25gbe") {
  // docs/benchmarks: 32 servers x 4 Pascal GPUs on RoCE 25 Gbit/s, Horovod 2018 (64 MiB
  // fusion, 5 ms cycle, NCCL 2.3), batch 64 (the docs' example); the 1-GPU rates anchor compute
  // from tfbench2017's P100 rows (ResNet-101 interpolated by FLOP between 50 and 152).
  const std::vector<std::tuple<std::string, double, double>> cases = {
      {"inception_v3", 142, 0.90}, {"resnet101", 125, 0.90}, {"vgg16", 154, 0.79}};
  for (const auto& [model, anchor, efficiency] : cases) {
    sim::PredictOptions o;
    o.model = model;
    o.gpus = 128;
    o.cluster = "horovod-pascal-25gbe";
    o.batch = "64";
    o.framework_options.fusion_threshold = dlsim::Bytes(64.0 * 1024 * 1024);
    o.framework_options.cycle_time = dlsim::Seconds(5e-3);
    o.anchor_throughput = anchor;
    const double predicted = sim::predict(o).scaling_efficiency;
    const double error = (predicted - efficiency) / efficiency;
    MESSAGE(model << " at 128 GPUs: published " << efficiency * 100 << " %, predicted "
                  << predicted * 100 << " %, error " << error * 100 << " %");
    CHECK(std::abs(error) <= 0.10);
  }
}
