// Placeholder until its owner lands the implementation.
#include <iostream>

#include "tools/flashgen/commands.h"

namespace flashgen::cli {

void register_demo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "not yet available in this build");
  cmd->callback([] { std::cout << "flashgen demo: not yet available in this build\n"; });
}

}  // namespace flashgen::cli
