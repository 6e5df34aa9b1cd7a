// parse_ptxas_report on captured ptxas -v text (NVRTC 13 logs).
#include <gtest/gtest.h>

#include "runtime/nvrtc_compiler.h"

namespace flashgen {
namespace {

// sm_80, --maxrregcount=32: an entry that spills, followed by a non-inlined device function.
constexpr const char* kSpillingLog = R"(ptxas info    : Overriding maximum register limit 256 for 'spilly' with  32 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spilly' for 'sm_80'
ptxas info    : Function properties for spilly
ptxas         .     1792 bytes stack frame, 2600 bytes spill stores, 2680 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 1792 bytes cumulative stack size, 364 bytes cmem[0]
ptxas info    : Compile time = 146.723 ms
ptxas info    : Function properties for _Z6helperPfi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
)";

// sm_90a: two entries, one with static shared memory and a barrier.
constexpr const char* kTwoEntriesLog = R"(ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1gPi' for 'sm_90a'
ptxas info    : Function properties for _Z1gPi
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 1.751 ms
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem, 364 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compile time = 51.813 ms
)";

TEST(PtxasReport, SpillsOfTheNamedEntry) {
  const KernelResources r = parse_ptxas_report(kSpillingLog, "spilly");
  EXPECT_EQ(r.registers, 32);
  EXPECT_EQ(r.stack_bytes, 1792);
  EXPECT_EQ(r.spill_stores, 2600);
  EXPECT_EQ(r.spill_loads, 2680);
  EXPECT_EQ(r.constant_bytes, 364);
  EXPECT_EQ(r.shared_bytes, 0);
  EXPECT_EQ(r.barriers, 0);
}

TEST(PtxasReport, DeviceFunctionPropertiesDoNotOverwriteTheEntry) {
  const KernelResources helper = parse_ptxas_report(kSpillingLog, "_Z6helperPfi");
  EXPECT_EQ(helper.spill_stores, 0);
  EXPECT_EQ(helper.registers, 0);
  EXPECT_EQ(parse_ptxas_report(kSpillingLog, "spilly").spill_stores, 2600);
}

TEST(PtxasReport, EachEntryOfSeveral) {
  const KernelResources g = parse_ptxas_report(kTwoEntriesLog, "_Z1gPi");
  EXPECT_EQ(g.registers, 8);
  EXPECT_EQ(g.stack_bytes, 0);
  EXPECT_EQ(g.shared_bytes, 0);
  const KernelResources k = parse_ptxas_report(kTwoEntriesLog, "k");
  EXPECT_EQ(k.registers, 24);
  EXPECT_EQ(k.barriers, 1);
  EXPECT_EQ(k.stack_bytes, 256);
  EXPECT_EQ(k.shared_bytes, 1024);
  EXPECT_EQ(k.constant_bytes, 364 + 8);
}

TEST(PtxasReport, WithoutANameTheWorstCaseOverFunctions) {
  const KernelResources r = parse_ptxas_report(kTwoEntriesLog);
  EXPECT_EQ(r.registers, 24);
  EXPECT_EQ(r.shared_bytes, 1024);
  EXPECT_EQ(r.stack_bytes, 256);
}

TEST(PtxasReport, UnknownFunctionAndEmptyLogGiveZeros) {
  EXPECT_EQ(parse_ptxas_report(kTwoEntriesLog, "absent").registers, 0);
  const KernelResources empty = parse_ptxas_report("");
  EXPECT_EQ(empty.registers, 0);
  EXPECT_EQ(empty.spill_stores, 0);
}

}  // namespace
}  // namespace flashgen
