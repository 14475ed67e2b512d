// Hardware profiles of every kind (docs/hardware-format.md), read as a file named f.yaml: the
// kind comes from the file, as `dlsim hardware show f.yaml` reads it.
#include "fuzz_common.hpp"
#include "hardware/loader.hpp"
#include "hardware/render.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    const auto path = dlsim::fuzz::scratch_file("f.yaml", data, size);
    dlsim::hardware::to_json(dlsim::hardware::load_any(path, ""));
  });
}
