// Training logs dlvalidate import reads: tf_cnn_benchmarks (single, replicated, Horovod) and
// Horovod's synthetic benchmarks, the format found from the text.
#include "fuzz_common.hpp"
#include "validate/readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    const auto m = dlsim::validate::read_log(dlsim::fuzz::scratch_file("run.log", data, size));
    dlsim::validate::to_row(m, {});
  });
}
