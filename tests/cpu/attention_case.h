// Test support for the CPU backend: an attention problem with owned, NaN-poisoned
// buffers in a chosen memory layout, filled with fresh random inputs, plus the
// comparisons the tests use. Index arithmetic is written here again on purpose:
// the tests must not trust the backend's own address computations.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/validate.h"

namespace flashgen::test {

struct Shape {
  std::int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 32;
};

enum class Layout {
  contiguous,   // (batch, seqlen, heads, head_dim), row-major
  heads_major,  // memory ordered (batch, heads, seqlen, head_dim)
  padded,       // gaps after each head, each row and each batch
  packed_qkv,   // q, k, v (and dq, dk, dv) interleaved in one (batch, seqlen, hq + 2 hkv, head_dim) buffer
};
const char* to_string(Layout layout);

struct Case {
  Shape shape;
  AttentionOptions options;
  DType dtype = DType::f32;
  Layout layout = Layout::contiguous;
  double magnitude = 1.0;         // inputs are uniform in [-magnitude, magnitude]
  cpu::TileConfig tiles{32, 16};  // smaller than the default 64 x 64: several tiles even in small tests
  int threads = 2;
  std::string describe() const;
};

// The Problem validate_* would return (causal folded into window_right, scale resolved).
Problem make_problem(const Case& c);

// One tensor view into (possibly shared) owned storage.
struct Buffer {
  std::shared_ptr<std::vector<unsigned char>> storage;
  Tensor view;
};

// Every tensor of forward and backward for one case. All storage starts as NaN;
// inputs (q, k, v, dout) are then written element by element with random values,
// so a read of a gap or a missing write shows up as NaN.
struct Tensors {
  Buffer q, k, v, o, lse, dout, dq, dk, dv;

  Tensors(const Case& c, std::mt19937_64& rng);
  ForwardArgs forward_args(const AttentionOptions& options) const;
  BackwardArgs backward_args(const AttentionOptions& options) const;
  // Re-poisons every output buffer (o, lse, dq, dk, dv), gaps included.
  void poison_outputs();
  // Elements of the output storages that no output view covers but that are no longer NaN.
  std::int64_t written_outside_outputs() const;
};

// The logical (batch, seqlen, heads, head_dim) or (batch, heads, seqlen) elements of a view, as doubles.
std::vector<double> read(const Buffer& b);
void write(const Buffer& b, const std::vector<double>& values);

// max |got - ref| over elements, and max |ref|; -inf == -inf counts as equal, NaN as infinitely far.
struct Difference {
  double max_abs = 0, max_ref = 0;
  std::int64_t worst = -1;
  double relative() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};
Difference compare(const std::vector<double>& got, const std::vector<double>& ref);

// |got - ref| <= element_rounding * |ref| + slack * max |ref|, element by element (a gtest
// failure naming `what` and the worst element otherwise); -inf == -inf counts as equal.
void expect_close(const char* what, const std::vector<double>& got, const std::vector<double>& ref,
                  double element_rounding, double slack);

// The tiled backend's results (got) against the oracle's unrounded ones (ref) for the same
// inputs, in `dtype`: within the rounding of the outputs to it (attention_case.cpp says how much).
struct Results {
  std::vector<double> o, lse, dq, dk, dv;
};
void expect_tiled_close(DType dtype, const Results& got, const Results& ref);

// Forward / backward of one backend on a case's tensors (backward reads o and lse from `t`).
enum class Backend { standard, tiled };
const char* to_string(Backend backend);
inline void PrintTo(Backend backend, std::ostream* os) { *os << to_string(backend); }
void run_forward(Backend backend, const Case& c, const Tensors& t);
void run_backward(Backend backend, const Case& c, const Tensors& t);

// A seed drawn fresh per test (tests/test_seed.h: FLASHGEN_TEST_SEED replays one).
std::uint64_t fresh_seed();

}  // namespace flashgen::test
