#pragma once
// Printing resolved profiles: an indented text listing with units, or JSON whose keys carry
// the unit (`_bytes`, `_s`, `_bytes_per_s`, `_flop_per_s`) as docs/cli.md describes.

#include <nlohmann/json.hpp>
#include <string>

#include "hardware/loader.hpp"

namespace dlsim::hardware {

nlohmann::json to_json(const AnySpec& spec);
std::string to_text(const AnySpec& spec);

}  // namespace dlsim::hardware
