// Horovod timelines (dlvalidate timeline), closed, unclosed or cut.
#include "fuzz_common.hpp"
#include "validate/readers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return dlsim::fuzz::refuse_or_parse([&] {
    const auto s =
        dlsim::validate::read_timeline(dlsim::fuzz::scratch_file("timeline.json", data, size));
    dlsim::validate::timeline_markdown(s);
    dlsim::validate::timeline_json(s, "fuzz");
  });
}
