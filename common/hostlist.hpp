#pragma once
// Slurm host lists ("iris-[001-016]", "node[1-3,7],gpu5"), as scontrol show hostnames expands
// them: ranges keep the zero padding of their first bound; several bracket groups in one name
// expand as a product, left to right.

#include <string>
#include <string_view>
#include <vector>

namespace dlsim {

// Throws std::invalid_argument naming the problem (unbalanced bracket, reversed range, ...).
std::vector<std::string> expand_hostlist(std::string_view list);

}  // namespace dlsim
