// The CUDA templates (templates/*.cuh, *.h), embedded into the binary at build time.
#pragma once

#include <span>
#include <string_view>

namespace flashgen {

struct EmbeddedFile {
  std::string_view name;  // file name, e.g. "mma_sm80.cuh"
  std::string_view text;
};

std::span<const EmbeddedFile> embedded_files();

}  // namespace flashgen
