// NCCL topology dumps imported as node profiles: the fabric graph of a DGX-1 V100 (hybrid
// cube-mesh NVLink, 4 PLX switches, Broadwell QPI) and of a DGX A100-like node (NVSwitch, two
// levels of PCIe switches, 4 NUMA domains of an EPYC 7742 pair, a dual-port x8 NIC), read back
// through dlsim's hardware loader; bad dumps refused with the file and the problem.
//
// Fixtures (tests/fixtures/calibrate/nccl_topo_*.xml) are written in NCCL's dump format: the DGX-1
// from the layout of the 4-GPU DGX-1 dump in NVIDIA/nccl issue #671 (same bus ids, PLX
// 0x10b5:0x8764, "8 GT/s" speeds of older kernels) completed to 8 GPUs with the per-pair NVLink
// counts of hardware/presets/nodes/dgx1-v100.yaml; the DGX A100 from the dump in NVIDIA/nccl issue
// #1505 (six NVSwitch targets 0000:c4..c9:00.0 with count 2 per GPU, Broadcom 0x1000:0xc010
// switches, AMD familyid 143 as NCCL computes it, NUMA domains 1, 3, 5, 7).
#include <doctest/doctest.h>

#include "approx.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "calibrate/import.hpp"
#include "common/error.hpp"
#include "hardware/loader.hpp"

namespace cal = dlsim::calibrate;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) {
  return std::string(DLSIM_CALIBRATE_FIXTURES) + "/" + name;
}

// A fresh folder for the profiles a test writes.
fs::path scratch(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("dlsim_test_topo_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Imports `xml` into DIR/NAME.yaml and loads it with the hardware loader.
dlsim::hardware::NodeSpec import_and_load(const std::string& xml, const fs::path& dir,
                                          const std::string& name,
                                          cal::NcclTopoOptions options = {}) {
  options.output = (dir / (name + ".yaml")).string();
  const auto yaml = cal::import_nccl_topo(xml, options);
  std::ofstream(options.output) << yaml;
  return dlsim::hardware::load_node(options.output);
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

using LinkKey = std::tuple<std::string, std::string, std::string>;  // a, b (sorted), type
std::map<LinkKey, int> links_of(const dlsim::hardware::NodeSpec& n) {
  std::map<LinkKey, int> out;
  for (const auto& l : n.links) {
    out[{std::min(l.a, l.b), std::max(l.a, l.b), l.type}] += l.lanes;
  }
  return out;
}
std::map<LinkKey, int> nvlinks_of(const dlsim::hardware::NodeSpec& n) {
  std::map<LinkKey, int> out;
  for (const auto& [k, lanes] : links_of(n)) {
    if (dlsim::hardware::NodeSpec::is_nvlink_type(std::get<2>(k))) out[k] = lanes;
  }
  return out;
}
double gbps(const dlsim::hardware::NodeSpec& n, const std::string& type) {
  return n.link_types.at(type).bandwidth.value() / 1e9;
}

}  // namespace

TEST_CASE("nccl_topo_dgx1_dump_gives_the_dgx1_v100_fabric_and_its_nvlink_lanes") {
  const auto dir = scratch("dgx1");
  const auto n = import_and_load(fixture("nccl_topo_dgx1.xml"), dir, "dgx1topo");

  CHECK(n.about.name == "dgx1topo");
  CHECK(n.gpu.about.name == "v100-sxm2-16gb");  // inferred from sm 70
  CHECK(n.about.source.find("inferred from sm 70") != std::string::npos);
  CHECK(n.gpus == 8);
  CHECK(n.nics == 4);
  CHECK(n.host.sockets == 2);
  CHECK(n.host.cores == 28);  // not in the dump: from the default base, iris-v100x4
  CHECK(n.switches == std::vector<std::string>{"pcisw0", "pcisw1", "pcisw2", "pcisw3"});

  CHECK(gbps(n, "nvlink") == dlsim_test::approx(25));  // NVLink 2 line rate per link
  CHECK(gbps(n, "pcie") == dlsim_test::approx(8.0 * 16 * 128 / 130 / 8));  // 15.75 GB/s
  CHECK(gbps(n, "qpi") == dlsim_test::approx(6));                          // NCCL's BDW_QPI_BW
  CHECK(n.link_types.at("nvlink").latency.value() == dlsim_test::approx(0.7e-6));  // from the base

  // The NVLink lanes of every GPU pair are those of the DGX-1 preset.
  const auto preset = dlsim::hardware::load_node("dgx1-v100");
  CHECK(nvlinks_of(n) == nvlinks_of(preset));
  CHECK(nvlinks_of(n).size() == 16);

  const std::map<LinkKey, int> pcie_and_sockets = {
      {{"gpu0", "pcisw0", "pcie"}, 1}, {{"gpu1", "pcisw0", "pcie"}, 1},
      {{"nic0", "pcisw0", "pcie"}, 1}, {{"cpu0", "pcisw0", "pcie"}, 1},
      {{"gpu2", "pcisw1", "pcie"}, 1}, {{"gpu3", "pcisw1", "pcie"}, 1},
      {{"nic1", "pcisw1", "pcie"}, 1}, {{"cpu0", "pcisw1", "pcie"}, 1},
      {{"gpu4", "pcisw2", "pcie"}, 1}, {{"gpu5", "pcisw2", "pcie"}, 1},
      {{"nic2", "pcisw2", "pcie"}, 1}, {{"cpu1", "pcisw2", "pcie"}, 1},
      {{"gpu6", "pcisw3", "pcie"}, 1}, {{"gpu7", "pcisw3", "pcie"}, 1},
      {{"nic3", "pcisw3", "pcie"}, 1}, {{"cpu1", "pcisw3", "pcie"}, 1},
      {{"cpu0", "cpu1", "qpi"}, 1}};
  auto rest = links_of(n);
  for (const auto& k : nvlinks_of(n)) rest.erase(k.first);
  CHECK(rest == pcie_and_sockets);
}

TEST_CASE("nccl_topo_nvswitch_dump_folds_the_switch_chips_into_one_vertex_with_12_lanes_per_gpu") {
  const auto dir = scratch("a100");
  const auto n = import_and_load(fixture("nccl_topo_dgx_a100.xml"), dir, "a100topo");

  CHECK(n.gpu.about.name == "a100-sxm4-40gb");  // inferred from sm 80
  CHECK(n.gpus == 8);
  CHECK(n.nics == 10);             // 8 compute NICs and both ports of the storage NIC
  CHECK(n.host.sockets == 4);      // NUMA domains 1, 3, 5, 7
  CHECK(n.switches.size() == 13);  // nvswitch0 and 12 PCIe bridges/switches
  CHECK(n.switches.front() == "nvswitch0");

  CHECK(gbps(n, "nvswitch") == dlsim_test::approx(25));
  CHECK(gbps(n, "pcie4x16") == dlsim_test::approx(16.0 * 16 * 128 / 130 / 8));  // 31.5 GB/s
  CHECK(gbps(n, "pcie4x8") == dlsim_test::approx(16.0 * 8 * 128 / 130 / 8));
  CHECK(gbps(n, "xgmi") == dlsim_test::approx(16));  // NCCL's AMD_ZEN12_BW (family 143 = 0x8F)
  // Two kinds of PCIe link, named by kind (a `pcie` type is the base's, merged by `extends:`).
  for (const auto& l : n.links) CHECK(l.type != "pcie");

  const auto links = links_of(n);
  for (int g = 0; g < 8; ++g) {
    CHECK(links.at({"gpu" + std::to_string(g), "nvswitch0", "nvswitch"}) == 12);
  }
  CHECK(nvlinks_of(n).size() == 8);  // no direct GPU-GPU NVLink

  // gpu0 (dev 0, 0000:07:00.0) sits two switches below NUMA domain 3, the dump's second <cpu>.
  CHECK(links.count({"gpu0", "pcisw4", "pcie4x16"}) == 1);
  CHECK(links.count({"pcisw3", "pcisw4", "pcie4x16"}) == 1);
  CHECK(links.count({"cpu1", "pcisw3", "pcie4x16"}) == 1);
  CHECK(links.count({"nic0", "pcisw4", "pcie4x16"}) == 1);
  // The dual-port storage NIC hangs from the CPU through an x8 link, one vertex per port.
  CHECK(links.count({"cpu1", "nic8", "pcie4x8"}) == 1);
  CHECK(links.count({"cpu1", "nic9", "pcie4x8"}) == 1);
  // Every pair of CPUs.
  int sockets = 0;
  for (const auto& [k, lanes] : links) sockets += std::get<2>(k) == "xgmi" ? lanes : 0;
  CHECK(sockets == 6);
  CHECK(n.about.source.find("mlx5_0 (200000 Mb/s)") != std::string::npos);
}

TEST_CASE("nccl_topo_gpu_and_base_node_options_override_the_inferred_model_and_the_host") {
  const auto dir = scratch("options");
  cal::NcclTopoOptions o;
  o.gpu = "v100-sxm2-32gb";
  o.base_node = "dgx1-v100";
  const auto n = import_and_load(fixture("nccl_topo_dgx1.xml"), dir, "dgx1_32gb", o);
  CHECK(n.gpu.about.name == "v100-sxm2-32gb");
  CHECK(n.host.cores == 40);
  CHECK(gbps(n, "pcie") == dlsim_test::approx(15.7538).epsilon(1e-4));
}

TEST_CASE("nccl_topo_a_nic_port_without_a_speed_is_named_so_not_as_0_mb_per_s") {
  // NCCL writes speed="0" for a port it could not read (one that is down); the speed belongs
  // to the network profile, so the import only names it in the node's source.
  const auto dir = scratch("nospeed");
  std::ifstream in(fixture("nccl_topo_dgx1.xml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "name=\"mlx5_1\" dev=\"1\" speed=\"100000\"";
  REQUIRE(text.find(from) != std::string::npos);
  text.replace(text.find(from), from.size(), "name=\"mlx5_1\" dev=\"1\" speed=\"0\"");
  const auto path = (dir / "nospeed.xml").string();
  std::ofstream(path) << text;
  const auto n = import_and_load(path, dir, "nospeed");
  CHECK(n.about.source.find("mlx5_1 (speed not read)") != std::string::npos);
  CHECK(n.about.source.find("mlx5_0 (100000 Mb/s)") != std::string::npos);
}

TEST_CASE("nccl_topo_bad_dumps_are_refused_with_the_file_and_the_problem") {
  const auto dir = scratch("bad");
  cal::NcclTopoOptions o;
  o.output = (dir / "out.yaml").string();

  const auto target =
      error_of([&] { cal::import_nccl_topo(fixture("nccl_topo_bad_target.xml"), o); });
  CHECK(target.find("nccl_topo_bad_target.xml") != std::string::npos);
  CHECK(target.find("0000:85:00.0") != std::string::npos);
  CHECK(target.find("no GPU of the dump") != std::string::npos);

  auto write = [&](const std::string& name, const std::string& text) {
    const auto p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  };
  const auto malformed = write("malformed.xml",
                               "<system version=\"1\">\n  <cpu numaid=\"0\">\n"
                               "    <pci busid=0000:03:00.0/>\n  </cpu>\n</system>\n");
  const auto e1 = error_of([&] { cal::import_nccl_topo(malformed, o); });
  INFO(e1);
  CHECK(e1.find("malformed.xml:3") != std::string::npos);
  CHECK(e1.find("not well-formed XML") != std::string::npos);

  const auto no_system = write("graph.xml", "<graphs version=\"1\"></graphs>\n");
  CHECK(error_of([&] { cal::import_nccl_topo(no_system, o); }).find("no <system> element") !=
        std::string::npos);

  const auto no_gpu = write("nogpu.xml",
                            "<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\">"
                            "<nic><net name=\"eth0\" dev=\"0\" speed=\"10000\"/></nic>"
                            "</cpu></system>\n");
  CHECK(error_of([&] { cal::import_nccl_topo(no_gpu, o); }).find("no <gpu>") != std::string::npos);

  CHECK(error_of([&] {
          cal::import_nccl_topo((dir / "missing.xml").string(), o);
        }).find("cannot open") != std::string::npos);

  cal::NcclTopoOptions bad_gpu = o;
  bad_gpu.gpu = "v100-sxm3";
  CHECK(error_of([&] {
          cal::import_nccl_topo(fixture("nccl_topo_dgx1.xml"), bad_gpu);
        }).find("unknown gpu preset 'v100-sxm3'") != std::string::npos);

  cal::NcclTopoOptions not_yaml = o;
  not_yaml.output = (dir / "out.txt").string();
  CHECK(error_of([&] {
          cal::import_nccl_topo(fixture("nccl_topo_dgx1.xml"), not_yaml);
        }).find("--output") != std::string::npos);
}
