// What the C API tests on CPU tensors share: a contiguous view of caller memory, and a fixture
// that owns a runtime.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "flashgen/flashgen.h"

namespace flashgen::test {

inline flashgen_tensor view(void* data, flashgen_dtype dtype, std::vector<std::int64_t> shape) {
  flashgen_tensor t;
  flashgen_tensor_contiguous(&t, data, dtype, FLASHGEN_CPU, static_cast<int32_t>(shape.size()), shape.data());
  return t;
}

class CApiRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(flashgen_runtime_create(nullptr, &runtime_), FLASHGEN_OK) << flashgen_last_error(); }
  void TearDown() override { flashgen_runtime_destroy(runtime_); }
  flashgen_runtime* runtime_ = nullptr;
};

}  // namespace flashgen::test
