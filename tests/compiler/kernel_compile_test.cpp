// A representative subset of the kernel matrix, compiled with NVRTC (no GPU needed):
// each selected kernel must compile for its arch with zero spills.
#include <gtest/gtest.h>

#include "compile_check.h"

namespace flashgen::test {
namespace {

class KernelCompile : public ::testing::TestWithParam<CompileCase> {};

TEST_P(KernelCompile, SelectedKernelsCompileWithoutSpills) { expect_compiles_without_spills(GetParam()); }

const CompileCase kSubset[] = {
    {64, DType::bf16, false, false, false, Arch::sm_90a},  {128, DType::bf16, true, false, false, Arch::sm_90a},
    {128, DType::f16, false, false, false, Arch::sm_80},   {59, DType::f16, true, true, true, Arch::sm_80},
    {256, DType::bf16, true, false, false, Arch::sm_90},   {96, DType::bf16, false, true, true, Arch::sm_90a},
};

INSTANTIATE_TEST_SUITE_P(Subset, KernelCompile, ::testing::ValuesIn(kSubset),
                         [](const ::testing::TestParamInfo<CompileCase>& i) { return compile_case_name(i.param); });

}  // namespace
}  // namespace flashgen::test
