// flashgen: the command-line front end (demo, dump, tune, bench, cache).
#include <iostream>

#include "flashgen/flashgen.hpp"
#include "runtime/environment.h"
#include "tools/flashgen/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"flashgen: a JIT kernel generator for exact attention (FlashAttention forward and backward)"};
  app.set_version_flag("--version", std::string("flashgen ") + flashgen::version());
  app.require_subcommand(1);
  flashgen::cli::register_demo(app);
  flashgen::cli::register_dump(app);
  flashgen::cli::register_tune(app);
  flashgen::cli::register_bench(app);
  flashgen::cli::register_cache(app);
  // A bad FLASHGEN_* value stops every command as it stops the runtime, before the command
  // runs; `cache env`, where one looks at them, lists it instead.
  app.parse_complete_callback([&app] {
    const CLI::App* cache = app.get_subcommand("cache");
    if (!(app.got_subcommand(cache) && cache->got_subcommand("env"))) flashgen::validate_environment();
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const flashgen::Error& e) {
    std::cerr << "flashgen: " << flashgen::to_string(e.status()) << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "flashgen: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
