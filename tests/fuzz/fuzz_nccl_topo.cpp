// NCCL topology dumps (NCCL_TOPO_DUMP_FILE XML) into a node profile, which is then loaded back.
#include "calibrate/import.hpp"
#include "fuzz_common.hpp"
#include "hardware/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    dlsim::calibrate::NcclTopoOptions o;
    o.output = dlsim::fuzz::scratch_file("node.yaml", nullptr, 0);
    const auto yaml =
        dlsim::calibrate::import_nccl_topo(dlsim::fuzz::scratch_file("topo.xml", data, size), o);
    const auto node = dlsim::fuzz::scratch_file(
        "node.yaml", reinterpret_cast<const std::uint8_t*>(yaml.data()), yaml.size());
    dlsim::hardware::load_node(node);
  });
}
