// Placeholder until its owner lands the implementation.
#include <iostream>

#include "tools/flashgen/commands.h"

namespace flashgen::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "not yet available in this build");
  cmd->callback([] { std::cout << "flashgen bench: not yet available in this build\n"; });
}

}  // namespace flashgen::cli
