// `flashgen tune`: autotuning of tile sizes per GPU is not implemented yet; the
// command says so and what the runtime uses instead, and fails so scripts notice.
#include "flashgen/flashgen.hpp"
#include "tools/flashgen/commands.h"

namespace flashgen::cli {

void register_tune(CLI::App& app) {
  auto* cmd = app.add_subcommand("tune", "autotune tile sizes for this GPU (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] {
    throw Error(Status::unsupported,
                "flashgen tune: autotuning is not implemented in this version; kernels use the heuristic "
                "table in compiler/kernel_selection.cpp (see `flashgen dump --pass all --emit resources`)");
  });
}

}  // namespace flashgen::cli
