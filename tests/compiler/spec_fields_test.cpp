// The field table (compiler/spec_fields.h): every form of a spec derived from it
// round-trips, tells every field apart, and keeps the spellings from before the table.
// The tests visit the table, so a new field is covered without editing them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "compiler/mlir_text.h"
#include "compiler/spec_fields.h"
#include "compiler/tuning_candidates.h"
#include "runtime/kernel_json.h"
#include "tests/compiler/spec_samples.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

using testing_support::changed_field;
using testing_support::problem_key_of;
using testing_support::random_spec;

TEST(SpecFields, JsonRoundTripsRandomSpecs) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    const KernelSpec s = random_spec(rng);
    std::string problem;
    const nlohmann::json j = spec_to_json(s);
    EXPECT_EQ(spec_from_json(j, problem), s) << j.dump() << " " << problem;
    // Through the text, as the files hold it.
    EXPECT_EQ(spec_from_json(nlohmann::json::parse(j.dump()), problem), s) << problem;
  }
}

TEST(SpecFields, JsonReaderNamesTheBadFieldAndKeepsTheBaseForMissingOnes) {
  nlohmann::json j = spec_to_json(KernelSpec{});
  std::string problem;
  j["arch"] = "sm_70";
  EXPECT_FALSE(spec_from_json(j, problem));
  EXPECT_EQ(problem, "\"arch\" is \"sm_70\", expected sm_80, sm_86, sm_89, sm_90 or sm_90a");
  j = spec_to_json(KernelSpec{});
  j["causal"] = 1;
  EXPECT_FALSE(spec_from_json(j, problem));
  EXPECT_EQ(problem, "\"causal\" is 1, expected true or false");
  j = spec_to_json(KernelSpec{});
  j["warps"] = "four";
  EXPECT_FALSE(spec_from_json(j, problem));
  EXPECT_EQ(problem, "\"warps\" is \"four\", expected an integer");

  KernelSpec base;
  base.block_m = 64;
  base.causal = true;
  j = spec_to_json(KernelSpec{});
  j.erase("block_m");
  j.erase("causal");
  EXPECT_EQ(spec_from_json(j, problem, base), base);
}

TEST(SpecFields, UrisAndHashesAreUniqueOverAGrid) {
  std::set<std::string> uris, hashes;
  size_t n = 0;
  testing_support::for_each_grid_spec([&](const KernelSpec& s) {
    ++n;
    EXPECT_TRUE(uris.insert(s.uri()).second) << s.uri();
    EXPECT_TRUE(hashes.insert(s.hash()).second) << s.uri();
  });
  EXPECT_GT(n, 10000u);
}

// Changing one field changes every identity of the spec: URI, hash, the memory cache's
// key, JSON and MLIR text.
TEST(SpecFields, ChangingAnyOneFieldChangesEveryForm) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 200; ++i) {
    const KernelSpec s = random_spec(rng);
    for_each_spec_field([&](const auto& field) {
      const KernelSpec t = changed_field(s, field);
      ASSERT_NE(t, s) << field.name;
      EXPECT_NE(t.uri(), s.uri()) << field.name;
      EXPECT_NE(t.hash(), s.hash()) << field.name;
      EXPECT_NE(spec_field_values(t), spec_field_values(s)) << field.name;
      EXPECT_NE(spec_to_json(t), spec_to_json(s)) << field.name;
      EXPECT_NE(mlir_kernel(t), mlir_kernel(s)) << field.name;
      if (field.role == FieldRole::problem) {
        EXPECT_NE(problem_field_values(t), problem_field_values(s)) << field.name;
        EXPECT_NE(tuning_key(problem_key_of(t), TunedPass::backward, t.arch).name(),  // it keeps every field
                  tuning_key(problem_key_of(s), TunedPass::backward, s.arch).name())
            << field.name;
      }
    });
  }
}

// The spellings from before the table, byte for byte (cache entries, tuning files,
// goldens and scripts name kernels by them).
TEST(SpecFields, KeepsTheEstablishedSpellings) {
  KernelSpec s;
  s.arch = Arch::sm_90a;
  s.warps = 8;
  s.causal = true;
  EXPECT_EQ(s.uri(), "fwd_d128_bf16_m128n64_w8s2_causal_sm_90a");
  EXPECT_EQ(s.hash(), "cb46daee18953b36e702d7e741c62b17");  // tests/compiler/golden/fwd_d128_..._causal_sm_90a.cu
  EXPECT_EQ(mlir_kernel_body(s), "fwd for sm_90a {head_dim = 128, dtype = bf16, block_m = 128, block_n = 64, "
                                 "warps = 8, stages = 2, causal}");

  KernelSpec b;
  b.pass = Pass::bwd_dq;
  b.head_dim = 59;
  b.block_m = 64;
  b.block_n = 32;
  b.dtype = DType::f16;
  b.window = true;
  b.softcap = true;
  b.deterministic = true;
  b.arch = Arch::sm_90;
  EXPECT_EQ(b.uri(), "bwd_dq_d59_fp16_m64n32_w4s2_window_softcap_det_sm_90");
  EXPECT_EQ(mlir_kernel_body(b), "bwd_dq for sm_90 {head_dim = 59, dtype = f16, block_m = 64, block_n = 32, warps = 4, "
                                 "stages = 2, window, softcap, deterministic}");
  const nlohmann::json j = spec_to_json(b);
  EXPECT_EQ(j.dump(),
            "{\"arch\":\"sm_90\",\"block_m\":64,\"block_n\":32,\"causal\":false,\"deterministic\":true,\"dtype\":"
            "\"fp16\",\"dynamic_shared_bytes\":" +
                std::to_string(b.shared_memory_bytes()) +
                ",\"head_dim\":59,\"paged\":false,\"pass\":\"bwd_dq\",\"persistent\":false,\"softcap\":true,\"stages\":2,\"uri\":\"" + b.uri() +
                "\",\"varlen\":false,\"warps\":4,\"window\":true}");

  ProblemKey p;
  p.head_dim = 64;
  p.dtype = DType::f16;
  p.causal = true;
  p.deterministic = true;
  p.seqlen_q = p.seqlen_k = 1000;
  EXPECT_EQ(tuning_key(p, TunedPass::backward, Arch::sm_90a).name(), "bwd_d64_fp16_causal_det_n1024_sm_90a");
  EXPECT_EQ(describe(p), "head_dim 64, fp16, causal, deterministic");
}

TEST(SpecFields, DeviceConstantsComeFromTheTable) {
  KernelSpec s;
  s.head_dim = 96;
  s.dtype = DType::f16;
  s.block_n = 32;
  s.softcap = true;
  std::vector<std::string> lines;
  for (const DeviceConstant& c : device_constants(s))
    lines.push_back(c.type + " " + c.name + " = " + c.value);
  EXPECT_THAT(lines, ::testing::ElementsAre("int kHeadDim = 96", "bool kIsBf16 = false", "int kBlockM = 128",
                                            "int kBlockN = 32", "int kWarps = 4", "int kStages = 2",
                                            "bool kCausal = false", "bool kWindow = false", "bool kSoftcap = true",
                                            "bool kDeterministic = false", "bool kPaged = false",
                                            "bool kVarlen = false", "bool kPersistent = false"));
  for (const DeviceConstant& c : device_constants(s)) EXPECT_FALSE(c.doc.empty()) << c.name;
}

TEST(SpecFields, ProblemOptionsAreTheProblemFields) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 100; ++i) {
    const KernelSpec s = random_spec(rng);
    // Selection builds its specs from the problem's options: the spec's own come back.
    const TuningKey k = tuning_key(problem_key_of(s), TunedPass::backward, s.arch);  // the forward drops deterministic
    EXPECT_EQ(static_cast<const ProblemOptions&>(k), static_cast<const ProblemOptions&>(s));
    EXPECT_EQ(static_cast<const ProblemOptions&>(tuning_problem(k)), static_cast<const ProblemOptions&>(s));
  }
}

}  // namespace
}  // namespace flashgen
