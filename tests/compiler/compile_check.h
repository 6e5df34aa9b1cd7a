// Compiles every kernel a problem selects (forward, both backward variants) with
// NVRTC and checks the ptxas report: compiled, no spill stores or loads.
#pragma once

#include <string>

#include "compiler/kernel_selection.h"

namespace flashgen::test {

struct CompileCase {
  int head_dim;
  DType dtype;
  bool causal, window, softcap;
  Arch arch;
};

std::string compile_case_name(const CompileCase& c);

// The spill bytes ptxas may report for `s`: 0 but for the documented exceptions (compile_check.cpp).
int allowed_spill_bytes(const KernelSpec& s);

// Adds a gtest failure per kernel that fails to compile or spills.
void expect_compiles_without_spills(const CompileCase& c);

}  // namespace flashgen::test
