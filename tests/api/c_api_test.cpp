// The C boundary: status codes and strings, option defaults and their mapping to the C++
// runtime, null pointers, the thread-local last error, and that no exception gets through.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>

#include <vector>

#include "attention_call.h"
#include "runtime/c_api.h"

extern "C" flashgen_status c_caller_forward_fp32(float* q, float* k, float* v, float* o, float* lse,
                                                 const int64_t* q_shape, const int64_t* k_shape, int32_t causal);

namespace flashgen::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CApi, StatusStringsAreTheCppOnes) {
  for (int s = FLASHGEN_OK; s <= FLASHGEN_ERROR_INTERNAL; ++s)
    EXPECT_STREQ(flashgen_status_string(static_cast<flashgen_status>(s)), to_string(static_cast<Status>(s)));
  EXPECT_STREQ(flashgen_status_string(FLASHGEN_ERROR_NO_DEVICE), "no device");
  EXPECT_STREQ(flashgen_status_string(static_cast<flashgen_status>(42)), "unknown status");
}

TEST(CApi, Version) {
  EXPECT_STREQ(flashgen_version(), FLASHGEN_VERSION_STRING);
  EXPECT_STREQ(flashgen_version(), version());
}

TEST(CApi, AttentionOptionsDefaultsAreTheCppOnes) {
  flashgen_attention_options c;
  std::memset(&c, 0x5a, sizeof c);
  flashgen_attention_options_init(&c);
  const AttentionOptions cpp;
  EXPECT_TRUE(std::isnan(c.softmax_scale));
  EXPECT_TRUE(std::isnan(cpp.softmax_scale));
  EXPECT_EQ(c.causal != 0, cpp.causal);
  EXPECT_EQ(c.window_left, cpp.window_left);
  EXPECT_EQ(c.window_right, cpp.window_right);
  EXPECT_EQ(c.softcap, cpp.softcap);
  EXPECT_EQ(c.deterministic != 0, cpp.deterministic);
  flashgen_attention_options_init(nullptr);  // a no-op, not a crash
}

TEST(CApi, RuntimeOptionsDefaultsAreTheCppOnes) {
  flashgen_runtime_options c;
  std::memset(&c, 0x5a, sizeof c);
  flashgen_runtime_options_init(&c);
  EXPECT_EQ(c.cache_dir, nullptr);
  EXPECT_EQ(c.autotune, static_cast<int>(RuntimeOptions{}.autotune));
  EXPECT_EQ(c.cpu_threads, 0);
  EXPECT_EQ(c.log, nullptr);
  EXPECT_EQ(c.log_user_data, nullptr);
  EXPECT_EQ(c.packaged_kernels, nullptr);
  const RuntimeOptions cpp = c_api::runtime_options(c);
  EXPECT_EQ(cpp.cache_dir, "");
  EXPECT_EQ(cpp.packaged_kernels, "");
  EXPECT_EQ(cpp.autotune, AutotunePolicy::cached);
  EXPECT_EQ(cpp.cpu_threads, 0);
  EXPECT_FALSE(cpp.log);
  flashgen_runtime_options_init(nullptr);
}

// A caller built before packaged_kernels was appended: whatever follows its struct is not read.
TEST(CApi, RuntimeOptionsOfAnOlderCallerHaveNoPackagedKernels) {
  struct {
    flashgen_runtime_options options;
    unsigned char after[64];
  } older;
  std::memset(&older, 0xff, sizeof older);
  flashgen_runtime_options_init(&older.options);
  older.options.struct_size = offsetof(flashgen_runtime_options, packaged_kernels);
  std::memset(&older.options.packaged_kernels, 0xff, sizeof older.options.packaged_kernels);
  EXPECT_EQ(c_api::runtime_options(older.options).packaged_kernels, "");
}

struct LogRecord {
  int level = -1;
  std::string message;
};

void record_log(int32_t level, const char* message, void* user_data) {
  auto* r = static_cast<LogRecord*>(user_data);
  r->level = level;
  r->message = message;
}

TEST(CApi, RuntimeOptionsMapToCpp) {
  const AutotunePolicy policies[] = {AutotunePolicy::off, AutotunePolicy::cached, AutotunePolicy::startup,
                                     AutotunePolicy::full};
  LogRecord log;
  for (int a = 0; a < 4; ++a) {
    flashgen_runtime_options c;
    flashgen_runtime_options_init(&c);
    c.autotune = a;
    c.cache_dir = "/tmp/flashgen-api-test-cache";
    c.cpu_threads = 3;
    c.log = record_log;
    c.log_user_data = &log;
    c.packaged_kernels = "/opt/site-packages/flashgen/kernels";
    const RuntimeOptions cpp = c_api::runtime_options(c);
    EXPECT_EQ(cpp.packaged_kernels, "/opt/site-packages/flashgen/kernels");
    EXPECT_EQ(cpp.autotune, policies[a]);
    EXPECT_EQ(cpp.cache_dir, "/tmp/flashgen-api-test-cache");
    EXPECT_EQ(cpp.cpu_threads, 3);
    ASSERT_TRUE(cpp.log);
    cpp.log(LogLevel::warning, "cache miss " + std::to_string(a));
    EXPECT_EQ(log.level, static_cast<int>(LogLevel::warning));
    EXPECT_EQ(log.message, "cache miss " + std::to_string(a));
  }
}

TEST(CApi, TensorContiguousMatchesCpp) {
  int64_t shape4[] = {2, 5, 3, 7};
  flashgen_tensor t;
  float data[1];
  flashgen_tensor_contiguous(&t, data, FLASHGEN_BF16, 0, 4, shape4);
  const Tensor cpp = Tensor::contiguous(data, DType::bf16, {2, 5, 3, 7}, 0);
  EXPECT_EQ(t.data, data);
  EXPECT_EQ(t.device, 0);
  EXPECT_EQ(t.rank, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.shape[i], cpp.shape[i]);
    EXPECT_EQ(t.stride[i], cpp.stride[i]);
  }
  int64_t shape3[] = {2, 3, 5};
  flashgen_tensor_contiguous(&t, data, FLASHGEN_F32, FLASHGEN_CPU, 3, shape3);
  const Tensor cpp3 = Tensor::contiguous3(data, DType::f32, {2, 3, 5});
  EXPECT_EQ(t.rank, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(t.shape[i], cpp3.shape[i]);
    EXPECT_EQ(t.stride[i], cpp3.stride[i]);
  }
  flashgen_tensor_contiguous(nullptr, data, FLASHGEN_F32, FLASHGEN_CPU, 4, shape4);  // no-op
}

class CApiCall : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(flashgen_runtime_create(nullptr, &runtime_), FLASHGEN_OK) << flashgen_last_error(); }
  void TearDown() override { flashgen_runtime_destroy(runtime_); }

  RandomSource random_;
  CallFactory factory_;
  flashgen_runtime* runtime_ = nullptr;
};

TEST_F(CApiCall, BadRankFromTensorContiguousIsRejectedByTheCall) {
  const AttentionCall call = factory_.make(random_cpu_geometry(random_.rng));
  flashgen_forward_args args = to_c_forward(call);
  const int64_t shape[] = {1, 2, 3, 4, 5};
  flashgen_tensor_contiguous(&args.q, call.q.data, FLASHGEN_F32, FLASHGEN_CPU, 5, shape);
  EXPECT_EQ(flashgen_forward(runtime_, &args, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("q: rank is 5, expected 4"));
}

// Strides past int64 do not wrap (to 0 for {4, 2^31, 2^31, 4}, a view that would fit):
// the call names the view as too large.
TEST_F(CApiCall, TensorContiguousOverflowIsRejectedByTheCall) {
  const AttentionCall call = factory_.make(random_cpu_geometry(random_.rng));
  flashgen_forward_args args = to_c_forward(call);
  const int64_t shape[] = {4, int64_t{1} << 31, int64_t{1} << 31, 4};
  flashgen_tensor_contiguous(&args.q, call.q.data, FLASHGEN_F32, FLASHGEN_CPU, 4, shape);
  EXPECT_NE(args.q.stride[0], 0);
  EXPECT_EQ(flashgen_forward(runtime_, &args, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("q: shape (4, 2147483648, 2147483648, 4)"));
}

// Versioned structs (flashgen.h): struct_size 0 (never initialised) or garbage is named before
// any field is read; a newer header's larger struct works when its unknown tail is zero and is
// refused, naming the byte, when a field there is set; the init functions fill struct_size.
TEST_F(CApiCall, VersionedArgsCheckStructSize) {
  Geometry g = random_cpu_geometry(random_.rng);
  g.dtype = DType::f32;  // the tensors are filled and compared as floats (contiguous, CallFactory)
  AttentionCall call = factory_.make(g);
  std::normal_distribution<float> normal;
  for (const Tensor* t : {&call.q, &call.k, &call.v})
    for (std::int64_t i = 0; i < t->numel(); ++i) static_cast<float*>(t->data)[i] = normal(random_.rng);
  flashgen_forward_args args = to_c_forward(call);
  EXPECT_EQ(args.struct_size, sizeof args);

  // The first versioned layout ended after options; block_table and seqused_k came after it.
  constexpr std::size_t kFirstForwardLayout = offsetof(flashgen_forward_args, options) + sizeof(flashgen_attention_options);
  for (std::size_t size : {std::size_t{0}, kFirstForwardLayout - 8, sizeof args + 4096}) {
    flashgen_forward_args bad = args;
    bad.struct_size = size;
    EXPECT_EQ(flashgen_forward(runtime_, &bad, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT) << size;
    EXPECT_THAT(flashgen_last_error(),
                HasSubstr(fmt::format("args.struct_size: is {}, expected sizeof(flashgen_forward_args) = {}", size,
                                      sizeof args)));
  }

  // A newer caller's struct: 64 more bytes, zero.
  ASSERT_EQ(flashgen_forward(runtime_, &args, nullptr), FLASHGEN_OK) << flashgen_last_error();
  const std::vector<float> expected(static_cast<const float*>(call.o.data),
                                    static_cast<const float*>(call.o.data) + call.o.numel());
  // An older caller's struct (the first layout, then the one before packed sequences): the
  // fields after it are absent, whatever follows it in memory.
  for (std::size_t size : {kFirstForwardLayout, offsetof(flashgen_forward_args, cu_seqlens_q)}) {
    flashgen_forward_args older = args;
    older.struct_size = size;
    unsigned char* const bytes = reinterpret_cast<unsigned char*>(&older);
    std::memset(bytes + size, 0xff, sizeof older - size);
    std::fill_n(static_cast<float*>(call.o.data), call.o.numel(), std::nanf(""));
    ASSERT_EQ(flashgen_forward(runtime_, &older, nullptr), FLASHGEN_OK) << size << ": " << flashgen_last_error();
    EXPECT_EQ(0, std::memcmp(expected.data(), call.o.data, expected.size() * sizeof(float))) << size;
  }
  std::vector<unsigned char> newer(sizeof args + 64, 0);
  std::memcpy(newer.data(), &args, sizeof args);
  const std::size_t newer_size = newer.size();
  std::memcpy(newer.data(), &newer_size, sizeof newer_size);
  std::fill_n(static_cast<float*>(call.o.data), call.o.numel(), std::nanf(""));
  ASSERT_EQ(flashgen_forward(runtime_, reinterpret_cast<const flashgen_forward_args*>(newer.data()), nullptr),
            FLASHGEN_OK)
      << flashgen_last_error();
  EXPECT_EQ(0, std::memcmp(expected.data(), call.o.data, expected.size() * sizeof(float)));
  newer[sizeof args + 17] = 1;
  EXPECT_EQ(flashgen_forward(runtime_, reinterpret_cast<const flashgen_forward_args*>(newer.data()), nullptr),
            FLASHGEN_ERROR_UNSUPPORTED);
  EXPECT_THAT(flashgen_last_error(), HasSubstr(fmt::format("args: byte {} of its {} is set", sizeof args + 17,
                                                           newer_size)));

  flashgen_backward_args bwd = to_c_backward(call);
  EXPECT_EQ(bwd.struct_size, sizeof bwd);
  {  // the first backward layout ended at workspace_bytes: packed sequences after it are absent
    flashgen_backward_args older = bwd;
    older.struct_size = offsetof(flashgen_backward_args, cu_seqlens_q);
    std::memset(&older.cu_seqlens_q, 0xff, sizeof older - older.struct_size);
    std::size_t bytes = 1;
    EXPECT_EQ(flashgen_backward_workspace_bytes(runtime_, &older, &bytes), FLASHGEN_OK) << flashgen_last_error();
    EXPECT_EQ(bytes, 0u);
  }
  bwd.struct_size = 0;
  std::size_t bytes = 1;
  EXPECT_EQ(flashgen_backward_workspace_bytes(runtime_, &bwd, &bytes), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("args.struct_size: is 0, expected sizeof(flashgen_backward_args)"));
}

TEST(CApi, VersionedRuntimeOptionsAndTuneShapes) {
  flashgen_runtime_options options;
  flashgen_runtime_options_init(&options);
  EXPECT_EQ(options.struct_size, sizeof options);
  options.struct_size = 0;
  flashgen_runtime* runtime = nullptr;
  EXPECT_EQ(flashgen_runtime_create(&options, &runtime), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("options.struct_size: is 0, expected sizeof(flashgen_runtime_options)"));
  EXPECT_EQ(runtime, nullptr);
  flashgen_runtime_options_init(&options);
  options.autotune = 0;
  ASSERT_EQ(flashgen_runtime_create(&options, &runtime), FLASHGEN_OK) << flashgen_last_error();

  // An array of shapes is strided by its struct_size: shapes[1] of a newer header's layout
  // (16 more bytes each) is found and named.
  const std::size_t stride = sizeof(flashgen_tune_shape) + 16;
  std::vector<unsigned char> shapes(2 * stride, 0);
  for (int i = 0; i < 2; ++i) {
    flashgen_tune_shape s;
    flashgen_tune_shape_init(&s);
    s.struct_size = stride;
    if (i == 1) {
      const std::int32_t garbage = 777;
      std::memcpy(&s.dtype, &garbage, sizeof garbage);
    }
    std::memcpy(shapes.data() + i * stride, &s, sizeof s);
  }
  const auto* array = reinterpret_cast<const flashgen_tune_shape*>(shapes.data());
  EXPECT_EQ(flashgen_tune(runtime, array, 2, 0), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("shapes[1].dtype: is 777"));
  const std::size_t other = sizeof(flashgen_tune_shape);
  std::memcpy(shapes.data() + stride, &other, sizeof other);
  EXPECT_EQ(flashgen_tune(runtime, array, 2, 0), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr(fmt::format("shapes[1].struct_size: is {}, expected {}", other, stride)));
  flashgen_runtime_destroy(runtime);
}

// A dtype outside the enum (an FFI caller's garbage) is named, not loaded into DType.
TEST_F(CApiCall, TuneRejectsAnUnknownDtype) {
  flashgen_tune_shape shape;
  flashgen_tune_shape_init(&shape);
  shape.head_dim = 64;
  shape.seqlen_q = shape.seqlen_k = 128;
  const std::int32_t garbage = 12345;
  std::memcpy(&shape.dtype, &garbage, sizeof garbage);
  EXPECT_EQ(flashgen_tune(runtime_, &shape, 1, 0), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("shapes[0].dtype: is 12345"));
}

TEST(CApi, RuntimeCreateRejectsNullOut) {
  EXPECT_EQ(flashgen_runtime_create(nullptr, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("out: is null"));
}

TEST(CApi, RuntimeCreateRejectsBadOptions) {
  flashgen_runtime_options options;
  flashgen_runtime_options_init(&options);
  options.autotune = 4;
  flashgen_runtime* runtime = reinterpret_cast<flashgen_runtime*>(&options);  // must be overwritten
  EXPECT_EQ(flashgen_runtime_create(&options, &runtime), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("options.autotune: is 4, expected 0 (off), 1 (cached), 2 (startup) or 3 (full)"));
  EXPECT_EQ(runtime, nullptr);

  flashgen_runtime_options_init(&options);
  options.cpu_threads = -2;
  EXPECT_EQ(flashgen_runtime_create(&options, &runtime), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("options.cpu_threads: is -2, expected >= 0"));
  EXPECT_EQ(runtime, nullptr);

  flashgen_runtime_options_init(&options);
  EXPECT_EQ(options.substitute_while_compiling, 1) << "on by default";
  options.substitute_while_compiling = 2;
  EXPECT_EQ(flashgen_runtime_create(&options, &runtime), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("options.substitute_while_compiling: is 2, expected 0 or 1"));
  EXPECT_EQ(runtime, nullptr);
}

TEST(CApi, RuntimeCreateWithOptions) {
  flashgen_runtime_options options;
  flashgen_runtime_options_init(&options);
  options.autotune = 0;
  options.cpu_threads = 1;
  flashgen_runtime* runtime = nullptr;
  ASSERT_EQ(flashgen_runtime_create(&options, &runtime), FLASHGEN_OK) << flashgen_last_error();
  EXPECT_NE(runtime, nullptr);
  EXPECT_STREQ(flashgen_last_error(), "");
  flashgen_runtime_destroy(runtime);
  flashgen_runtime_destroy(nullptr);  // a no-op
}

TEST_F(CApiCall, NullPointersAreInvalidArguments) {
  const AttentionCall call = factory_.make(random_cpu_geometry(random_.rng));
  const flashgen_forward_args fwd = to_c_forward(call);
  const flashgen_backward_args bwd = to_c_backward(call);
  std::size_t bytes = 0;
  struct Expectation {
    flashgen_status status;
    const char* message;
  };
  const Expectation results[] = {
      {flashgen_forward(nullptr, &fwd, nullptr), "runtime: is null"},
      {flashgen_forward(runtime_, nullptr, nullptr), "args: is null"},
      {flashgen_backward(nullptr, &bwd, nullptr), "runtime: is null"},
      {flashgen_backward(runtime_, nullptr, nullptr), "args: is null"},
      {flashgen_backward_workspace_bytes(nullptr, &bwd, &bytes), "runtime: is null"},
      {flashgen_backward_workspace_bytes(runtime_, nullptr, &bytes), "args: is null"},
      {flashgen_backward_workspace_bytes(runtime_, &bwd, nullptr), "bytes: is null"},
  };
  for (const Expectation& r : results) EXPECT_EQ(r.status, FLASHGEN_ERROR_INVALID_ARGUMENT) << r.message;
  // The message is the last call's: check each call's right after it.
  EXPECT_EQ(flashgen_forward(nullptr, &fwd, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), StartsWith("runtime: is null, expected a runtime from flashgen_runtime_create"));
  EXPECT_EQ(flashgen_backward(runtime_, nullptr, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), StartsWith("args: is null"));
  EXPECT_EQ(flashgen_backward_workspace_bytes(runtime_, &bwd, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), StartsWith("bytes: is null"));
}

TEST_F(CApiCall, WorkspaceBytesOfCpuTensorsIsZeroAndSuccessClearsLastError) {
  const AttentionCall call = factory_.make(random_cpu_geometry(random_.rng));
  const flashgen_backward_args args = to_c_backward(call);
  EXPECT_EQ(flashgen_forward(runtime_, nullptr, nullptr), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_STRNE(flashgen_last_error(), "");
  std::size_t bytes = 777;
  EXPECT_EQ(flashgen_backward_workspace_bytes(runtime_, &args, &bytes), FLASHGEN_OK) << flashgen_last_error();
  EXPECT_EQ(bytes, 0u);
  EXPECT_STREQ(flashgen_last_error(), "");
}

TEST_F(CApiCall, PrepareValidatesItsArgumentsAndIsANoOpOnCpuTensors) {
  const AttentionCall call = factory_.make(random_cpu_geometry(random_.rng));
  flashgen_forward_args args = to_c_forward(call);
  EXPECT_EQ(flashgen_prepare(runtime_, &args, FLASHGEN_PASS_FORWARD | FLASHGEN_PASS_BACKWARD), FLASHGEN_OK)
      << flashgen_last_error();
  EXPECT_EQ(flashgen_prepare(runtime_, &args, FLASHGEN_PASS_BACKWARD), FLASHGEN_OK) << flashgen_last_error();
  for (unsigned passes : {0u, 4u, 7u}) {
    EXPECT_EQ(flashgen_prepare(runtime_, &args, passes), FLASHGEN_ERROR_INVALID_ARGUMENT) << passes;
    EXPECT_THAT(flashgen_last_error(), StartsWith(fmt::format("passes: is {}, expected forward (1), backward (2) "
                                                              "or both (3)", passes)));
  }
  EXPECT_EQ(flashgen_prepare(nullptr, &args, FLASHGEN_PASS_FORWARD), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), StartsWith("runtime: is null"));
  EXPECT_EQ(flashgen_prepare(runtime_, nullptr, FLASHGEN_PASS_FORWARD), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), StartsWith("args: is null"));
  const int64_t shape[] = {1, 2, 3, 4, 5};
  flashgen_tensor_contiguous(&args.k, call.k.data, FLASHGEN_F32, FLASHGEN_CPU, 5, shape);
  EXPECT_EQ(flashgen_prepare(runtime_, &args, FLASHGEN_PASS_FORWARD), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr("k: rank is 5, expected 4"));
}

// Each thread sees its own last error, even when the other thread failed in between.
TEST_F(CApiCall, LastErrorIsPerThread) {
  const AttentionCall call = factory_.make(random_cpu_geometry(random_.rng));
  std::barrier step(2);
  std::string seen_a, seen_b;
  flashgen_status status_a = FLASHGEN_OK, status_b = FLASHGEN_OK;
  std::thread a([&] {
    flashgen_forward_args args = to_c_forward(call);
    args.options.window_left = -3;
    status_a = flashgen_forward(runtime_, &args, nullptr);
    step.arrive_and_wait();  // a has failed
    step.arrive_and_wait();  // b has failed
    seen_a = flashgen_last_error();
  });
  std::thread b([&] {
    flashgen_backward_args args = to_c_backward(call);
    args.dk.data = nullptr;
    step.arrive_and_wait();
    status_b = flashgen_backward(runtime_, &args, nullptr);
    step.arrive_and_wait();
    seen_b = flashgen_last_error();
  });
  a.join();
  b.join();
  EXPECT_EQ(status_a, FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(status_b, FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(seen_a, HasSubstr("options.window_left: is -3"));
  EXPECT_THAT(seen_b, HasSubstr("dk: data is null"));
  EXPECT_STREQ(flashgen_last_error(), "");  // this thread made no failing call
}

// How guarded() maps what a body throws; nothing escapes it.
TEST(CApi, ExceptionsBecomeStatuses) {
  struct Case {
    std::function<void()> body;
    flashgen_status status;
    const char* message;
  };
  const Case cases[] = {
      {[] {}, FLASHGEN_OK, ""},
      {[] { throw Error(Status::no_device, "no GPU here"); }, FLASHGEN_ERROR_NO_DEVICE, "no GPU here"},
      {[] { throw Error(Status::compile_error, "nvrtc: 3 errors"); }, FLASHGEN_ERROR_COMPILE, "nvrtc: 3 errors"},
      {[] { throw Error(Status::cuda_error, "cuLaunchKernel failed"); }, FLASHGEN_ERROR_CUDA, "cuLaunchKernel failed"},
      {[] { throw Error(Status::out_of_memory, "cuMemAlloc"); }, FLASHGEN_ERROR_OUT_OF_MEMORY, "cuMemAlloc"},
      {[] { throw Error(Status::ok, "an Error that claims ok"); }, FLASHGEN_ERROR_INTERNAL, "an Error that claims ok"},
      {[] { throw Error(static_cast<Status>(99), "unknown status"); }, FLASHGEN_ERROR_INTERNAL, "unknown status"},
      {[] { throw std::bad_alloc(); }, FLASHGEN_ERROR_OUT_OF_MEMORY, "out of host memory"},
      {[] { throw std::logic_error("broken invariant"); }, FLASHGEN_ERROR_INTERNAL, "broken invariant"},
      {[] { throw 42; }, FLASHGEN_ERROR_INTERNAL, "unknown exception"},
  };
  for (const Case& c : cases) {
    flashgen_status status = FLASHGEN_ERROR_INVALID_ARGUMENT;
    EXPECT_NO_THROW(status = c_api::guarded(c.body));
    EXPECT_EQ(status, c.status) << c.message;
    EXPECT_THAT(flashgen_last_error(), HasSubstr(c.message));
    if (c.status == FLASHGEN_OK) {
      EXPECT_STREQ(flashgen_last_error(), "");
    }
  }
}

// Garbage arguments (as an FFI caller might pass) give a status, never an exception or a crash.
TEST_F(CApiCall, GarbageArgumentsGiveAStatus) {
  for (int byte : {0x00, 0x7f, 0xff, 0x5a}) {
    SCOPED_TRACE(byte);
    flashgen_forward_args fwd;
    flashgen_backward_args bwd;
    std::memset(&fwd, byte, sizeof fwd);
    std::memset(&bwd, byte, sizeof bwd);
    std::size_t bytes = 0;
    flashgen_status s = FLASHGEN_OK;
    EXPECT_NO_THROW(s = flashgen_forward(runtime_, &fwd, nullptr));
    EXPECT_EQ(s, FLASHGEN_ERROR_INVALID_ARGUMENT) << flashgen_last_error();
    EXPECT_NO_THROW(s = flashgen_backward(runtime_, &bwd, nullptr));
    EXPECT_EQ(s, FLASHGEN_ERROR_INVALID_ARGUMENT) << flashgen_last_error();
    EXPECT_NO_THROW(s = flashgen_backward_workspace_bytes(runtime_, &bwd, &bytes));
    EXPECT_EQ(s, FLASHGEN_ERROR_INVALID_ARGUMENT) << flashgen_last_error();
  }
}

// A C11 caller (c_caller.c) gets the C++ API's results bit for bit, and its errors.
TEST(CApi, UsableFromC) {
  RandomSource random;
  CallFactory factory;
  Geometry g = random_cpu_geometry(random.rng);
  g.dtype = DType::f32;
  AttentionCall call = factory.make(g);
  std::normal_distribution<float> normal;
  for (const Tensor* t : {&call.q, &call.k, &call.v})
    for (std::int64_t i = 0; i < t->numel(); ++i) static_cast<float*>(t->data)[i] = normal(random.rng);
  const std::int64_t nq = call.q.numel(), nl = call.lse.numel();
  std::vector<float> o(nq, std::nanf("")), lse(nl, std::nanf(""));
  std::vector<float> cpp_o(nq, std::nanf("")), cpp_lse(nl, std::nanf(""));
  const std::int64_t q_shape[] = {g.batch, g.seqlen_q, g.heads_q, g.head_dim};
  const std::int64_t k_shape[] = {g.batch, g.seqlen_k, g.heads_kv, g.head_dim};

  call.options.causal = true;
  call.o.data = cpp_o.data();
  call.lse.data = cpp_lse.data();
  Runtime().forward(call.forward());
  auto* q = static_cast<float*>(call.q.data);
  auto* k = static_cast<float*>(call.k.data);
  auto* v = static_cast<float*>(call.v.data);
  ASSERT_EQ(c_caller_forward_fp32(q, k, v, o.data(), lse.data(), q_shape, k_shape, 1), FLASHGEN_OK) << flashgen_last_error();
  EXPECT_EQ(std::memcmp(o.data(), cpp_o.data(), nq * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(lse.data(), cpp_lse.data(), nl * sizeof(float)), 0);
  for (float x : o) ASSERT_TRUE(std::isfinite(x));

  const std::int64_t bad_k_shape[] = {g.batch, g.seqlen_k, g.heads_kv, g.head_dim + 1};
  EXPECT_EQ(c_caller_forward_fp32(q, k, v, o.data(), lse.data(), q_shape, bad_k_shape, 0), FLASHGEN_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(flashgen_last_error(), HasSubstr(fmt::format("k: shape[3] (head_dim) is {}, expected {} like q",
                                                           g.head_dim + 1, g.head_dim)));
}

}  // namespace
}  // namespace flashgen::test
