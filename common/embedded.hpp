#pragma once
// Data files compiled into the programs (cmake/embed_files.cmake): the model zoo, hardware presets.

#include <string>
#include <vector>

namespace dlsim {

struct EmbeddedFile {
  std::string name;  // path under the embedded folder, without extension ("gpus/v100-sxm2-16gb")
  std::string path;  // repository path, used in messages
  std::string text;  // the file's content
};

}  // namespace dlsim
