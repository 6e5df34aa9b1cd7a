// The default kernel matrix of issue 3, compiled with NVRTC (label "full": minutes on
// two cores): every pass (the inference kernels too) x head dims 32/64/96/128/192/256 x fp16/bf16 x causal on/off
// x sm_80/sm_90/sm_90a, zero spills asserted on the parsed ptxas report.
#include <gtest/gtest.h>

#include <vector>

#include "compile_check.h"

namespace flashgen::test {
namespace {

class KernelMatrix : public ::testing::TestWithParam<CompileCase> {};

TEST_P(KernelMatrix, SelectedKernelsCompileWithoutSpills) { expect_compiles_without_spills(GetParam()); }

std::vector<CompileCase> matrix() {
  std::vector<CompileCase> out;
  for (int d : {32, 64, 96, 128, 192, 256})
    for (DType t : {DType::f16, DType::bf16})
      for (bool causal : {false, true})
        for (Arch a : {Arch::sm_80, Arch::sm_90, Arch::sm_90a}) out.push_back({d, t, causal, false, false, a});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Default, KernelMatrix, ::testing::ValuesIn(matrix()),
                         [](const ::testing::TestParamInfo<CompileCase>& i) { return compile_case_name(i.param); });

}  // namespace
}  // namespace flashgen::test
