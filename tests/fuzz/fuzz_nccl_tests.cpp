// nccl-tests output, text of any version or -J JSON (dlcalibrate import nccl-tests).
#include "calibrate/import.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    const auto r =
        dlsim::calibrate::import_nccl_tests(dlsim::fuzz::scratch_file("nccl.log", data, size));
    dlsim::calibrate::to_jsonl(r);
  });
}
