// The generated kv_append kernel (sm_80 source) on the CPU emulator, through the launch plan
// the GPU backend uses, against the append oracle (kv_append_reference.h): dense and paged
// caches, both rotary layouts, q rotated apart and in place, positions past the cache and a
// page entry outside it (never written).
#include <gtest/gtest.h>

#include <random>

#include "kv_append_reference.h"
#include "runtime/launch_plan.h"
#include "runtime/validate.h"
#include "sm80_emulator.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

class KvAppendEmulation : public ::testing::TestWithParam<KvAppendCase> {};

TEST_P(KvAppendEmulation, MatchesTheOracle) {
  const KvAppendCase& c = GetParam();
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  KvAppendBuffers b = kv_append_inputs(c, rng);
  const KvAppendExpected want = kv_append_expected(c, b);
  // Validated as a GPU call would be (positions are not read there), planned for sm_80.
  KvAppendArgs args = kv_append_args(c, b, [](void* host, std::size_t) { return host; }, 0);
  const KvAppendProblem p = validate_kv_append(args);
  const KernelLaunch l = plan_kv_append(args, p, Arch::sm_80);
  const auto it = emu::registry().find(l.spec.uri());
  ASSERT_NE(it, emu::registry().end()) << l.spec.uri() << " was not emitted for the emulator (kv_append_reference.h)";
  emu::launch(it->second, dim3{l.grid[0], l.grid[1], l.grid[2]}, l.spec.threads(), l.spec.shared_memory_bytes(),
              l.params);
  expect_kv_append(c, b, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, KvAppendEmulation, ::testing::ValuesIn(kv_append_cases()),
                         [](const ::testing::TestParamInfo<KvAppendCase>& i) { return name_of(i.param); });

}  // namespace
}  // namespace flashgen::test
