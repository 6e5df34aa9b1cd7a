// The device code (templates/**/*.cuh, *.h), embedded into the binary at build time, so
// the installed runtime needs no source tree. NVRTC gets every file as a named header.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace flashgen {

struct EmbeddedFile {
  std::string_view name;  // path under templates/, as included: "fwd/fwd_kernel.cuh"
  std::string_view text;
};

std::span<const EmbeddedFile> embedded_files();

// XXH3-128 (hex) of every embedded file's name and text: part of each kernel's cache key,
// since a generated source names its headers but does not contain them.
const std::string& embedded_files_digest();

}  // namespace flashgen
