// `flashgen bench`: what was measured and how it is shown: the table on stdout (one
// row per shape and pass, printed as it is measured), JSON and CSV files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "runtime/kernel_timer.h"
#include "tools/flashgen/bench_grid.h"

namespace flashgen::cli {

// The machine and method, stated once in every output.
struct BenchSetup {
  std::string device;  // e.g. "NVIDIA H200 (132 SMs)"
  DType dtype = DType::bf16;
  TimingOptions timing;
};

struct BenchResult {
  BenchShape shape;
  BenchPass pass = BenchPass::forward;
  std::optional<Timing> timing;  // absent when the measurement failed
  double tflops = 0;
  // Device memory flashgen allocated beyond the inputs and outputs, at its peak during
  // the pass: the high watermark of the device's stream-ordered memory pool, where the
  // runtime allocates its backward workspace.
  std::uint64_t peak_extra_bytes = 0;
  std::size_t workspace_bytes = 0;  // Runtime::backward_workspace_bytes for this shape
  std::size_t io_bytes = 0;         // q, k, v, o, lse (and dO, dQ, dK, dV) allocated by the bench
  std::string error;                // why the measurement failed
};

void print_header(std::ostream& out, const BenchSetup& setup);
void print_row(std::ostream& out, const BenchResult& result);

std::string bench_json(const BenchSetup& setup, const std::vector<BenchResult>& results);
std::string bench_csv(const BenchSetup& setup, const std::vector<BenchResult>& results);

}  // namespace flashgen::cli
