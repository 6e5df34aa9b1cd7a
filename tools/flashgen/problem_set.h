// The problems `flashgen tune` and `flashgen cache warm` take: head dims x dtypes x causal
// x sequence lengths, forward and/or backward, given by the same options (--head-dims,
// --dtypes, --causal, --seqlens, --passes) and expanded into declared shapes (TuneShape).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::cli {

struct ProblemSetOptions {
  std::vector<int> head_dims = {64, 128};
  std::vector<std::string> dtypes = {"bf16", "fp16"};
  std::string causal = "both";
  std::vector<std::string> seqlens = {"1k", "4k", "16k"};
  std::vector<std::string> passes = {"fwd", "bwd"};
  // The kernel variants to cover, each {false}, {true} or both: the commands spell them
  // differently (tune: flags; cache warm: on, off or both).
  std::vector<bool> window = {false}, softcap = {false}, deterministic = {false};
  int device = 0;

  // --head-dims, --dtypes, --causal, --seqlens, --passes.
  void add_to(CLI::App& cmd);
};

// A list option's check: CLI11 reads an empty value as 0 or "", this says what was meant.
CLI::Validator not_empty(const char* expected);

// Every shape of the set (with a window of seqlen/8 to the left and a cap of 30 where the
// variant has one: only their presence selects kernels). Throws Error(invalid_argument)
// naming the option: an empty list, a head dim outside the GPU kernels' range, a dtype
// other than bf16 or fp16, a length that is not one.
std::vector<TuneShape> problem_shapes(const ProblemSetOptions& o);

}  // namespace flashgen::cli
