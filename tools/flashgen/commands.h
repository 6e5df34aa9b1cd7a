// The `flashgen` subcommands; each file registers one on the root app.
#pragma once

#include <CLI/CLI.hpp>

namespace flashgen::cli {

void register_demo(CLI::App& app);
void register_dump(CLI::App& app);
void register_tune(CLI::App& app);
void register_bench(CLI::App& app);
void register_cache(CLI::App& app);
// `cache warm`, added to the `cache` subcommand.
void add_cache_warm(CLI::App& cache);

}  // namespace flashgen::cli
