#pragma once
// Slurm host lists ("iris-[001-016]", "node[1-3,7],gpu5"), as scontrol show hostnames expands
// them: ranges keep the zero padding of their first bound; several bracket groups in one name
// expand as a product, left to right.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dlsim {

// The most hosts one list may name (a cluster of a million nodes; a typo such as "n[0-99999999]"
// would otherwise take all the memory there is).
inline constexpr std::size_t kMaxHosts = std::size_t{1} << 20;

// Throws std::invalid_argument naming the problem (unbalanced bracket, reversed range, ...).
std::vector<std::string> expand_hostlist(std::string_view list);

}  // namespace dlsim
