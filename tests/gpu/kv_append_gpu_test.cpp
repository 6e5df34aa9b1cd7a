// Runtime::append_kv on the GPU against the append oracle (kv_append_reference.h): dense and
// paged caches, both rotary layouts, q rotated apart and in place, positions past the cache
// and a page entry outside it (never written: the old rows stay), then the CPU backend on the
// same inputs where it takes them.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>

#include "device_buffer.h"
#include "kv_append_reference.h"
#include "runtime/cuda_driver.h"
#include "tests/test_seed.h"

namespace flashgen::test {
namespace {

class KvAppendGpu : public ::testing::TestWithParam<KvAppendCase> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA driver or GPU on this machine: the gpu label runs on the GPU machine";
    ensure_context(0);
  }
};

TEST_P(KvAppendGpu, MatchesTheOracle) {
  const KvAppendCase& c = GetParam();
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  KvAppendBuffers b = kv_append_inputs(c, rng);
  const KvAppendExpected want = kv_append_expected(c, b);
  // Every host buffer gets a device copy; after the call each is copied back over its host twin.
  std::map<void*, std::unique_ptr<DeviceBuffer>> copies;
  const Place on_device = [&](void* host, std::size_t bytes) {
    auto& d = copies[host];
    if (!d) {
      d = std::make_unique<DeviceBuffer>(bytes);
      d->upload(host, bytes);
    }
    return d->data();
  };
  const KvAppendArgs args = kv_append_args(c, b, on_device, 0);
  Runtime rt;
  rt.append_kv(args);
  ASSERT_EQ(cuda_driver().cuCtxSynchronize(), CUDA_SUCCESS);
  for (auto& [host, d] : copies) d->download(host, d->bytes());
  expect_kv_append(c, b, want);
}

INSTANTIATE_TEST_SUITE_P(Cases, KvAppendGpu, ::testing::ValuesIn(kv_append_cases()),
                         [](const ::testing::TestParamInfo<KvAppendCase>& i) { return name_of(i.param); });

}  // namespace
}  // namespace flashgen::test
