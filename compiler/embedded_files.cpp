#include "compiler/embedded_files.h"

#include <fmt/format.h>
#include <xxhash.h>

namespace flashgen {

const std::string& embedded_files_digest() {
  static const std::string digest = [] {
    XXH3_state_t state;
    XXH3_128bits_reset(&state);
    for (const EmbeddedFile& f : embedded_files()) {
      // Each name and text with its length, so that no two file sets hash the same stream.
      for (std::string_view part : {f.name, f.text}) {
        const std::size_t size = part.size();
        XXH3_128bits_update(&state, &size, sizeof size);
        XXH3_128bits_update(&state, part.data(), part.size());
      }
    }
    const XXH128_hash_t h = XXH3_128bits_digest(&state);
    return fmt::format("{:016x}{:016x}", h.high64, h.low64);
  }();
  return digest;
}

}  // namespace flashgen
