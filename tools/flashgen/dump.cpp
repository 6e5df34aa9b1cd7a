// Placeholder until its owner lands the implementation.
#include <iostream>

#include "tools/flashgen/commands.h"

namespace flashgen::cli {

void register_dump(CLI::App& app) {
  auto* cmd = app.add_subcommand("dump", "not yet available in this build");
  cmd->callback([] { std::cout << "flashgen dump: not yet available in this build\n"; });
}

}  // namespace flashgen::cli
