// `flashgen bench`: the C++ benchmark driver is not implemented yet; the command
// points to the Python comparison with PyTorch SDPA, and fails so scripts notice.
#include "flashgen/flashgen.hpp"
#include "tools/flashgen/commands.h"

namespace flashgen::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "benchmark forward/backward over a shape grid (not implemented yet)");
  cmd->allow_extras();
  cmd->callback([] {
    throw Error(Status::unsupported,
                "flashgen bench: not implemented in this version; on a GPU machine with PyTorch run "
                "bench/compare_sdpa.py (flashgen vs SDPA flash/cuDNN, same inputs, same process)");
  });
}

}  // namespace flashgen::cli
