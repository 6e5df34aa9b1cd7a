// Kernels that stand in while a variant's own compile (issue 18's first call): a dense call
// whose head dim has no kernels in memory, on disk or in the package runs on the kernels of
// the next head-dim class (64, 128 or 256; the package ships those) with the same options, on
// zero-padded copies of its tensors, while its own kernels compile on the cache's threads.
// Exact: zero columns add nothing to Q.K^T, P.V puts zeros in the padded columns of O, and
// dQ, dK, dV of the real columns are those of the real problem (the softmax scale stays the
// problem's); the padded columns are dropped on the way back. The next call after the
// compile runs the variant's own kernels.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compiler/kernel_spec.h"
#include "flashgen/flashgen.hpp"
#include "runtime/kernel_cache.h"
#include "runtime/validate.h"

namespace flashgen {

// The head dims whose kernels stand in for the others.
constexpr int kSubstituteHeadDims[] = {64, 128, 256};

// The head dim whose kernels may stand in for p's: the smallest class above it. nullopt where
// none may: p's head dim is a class, a CPU call, deterministic gradients (the calls before and
// after the compile would not be bitwise equal), packed sequences or a KV cache (not padded).
std::optional<int> substitute_head_dim(const Problem& p);

// The copies between a (d0, d1, d2, cols) tensor of any row strides and a padded one whose
// rows are contiguous in the tensor's own order (so that its layout follows the caller's):
// per index of the outermost row dimension, one 3D copy of [middle][inner] rows; where the
// middle stride is no whole number of inner pitches (rows of all heads padded), one copy of
// [inner] rows per (outer, middle) index, at most kMaxRowCopies of them (each is a driver
// call: ~2 us of host time). The row dimensions are ordered by stride, those of extent 1
// outermost.
constexpr std::int64_t kMaxRowCopies = 8192;
struct RowCopyPlan {
  std::array<int, 3> order{};                   // the row dimensions, innermost first
  std::array<std::int64_t, 3> padded_stride{};  // the padded tensor's strides of dims 0..2 (elements)
  std::int64_t pitch = 0;           // the tensor's elements from one inner row to the next
  std::int64_t rows_per_slice = 0;  // its rows (pitches) from one middle index to the next
  bool copy_per_middle = false;     // one copy per (outer, middle) index: rows_per_slice unused
};
// The plan for t padded to `padded_cols` columns; nullopt where t's rows overlap, its last
// dimension is not contiguous, it would take more than kMaxRowCopies copies or it is wider
// than padded_cols.
std::optional<RowCopyPlan> plan_row_copy(const Tensor& t, int padded_cols);

// One 3D copy of rows between a tensor and its padded copy (cuMemcpy3D's fields): byte offsets
// from the source's and destination's bases, pitches in bytes, heights in rows.
struct RowCopy {
  std::int64_t src_offset = 0, dst_offset = 0;
  std::int64_t src_pitch = 0, dst_pitch = 0, src_height = 0, dst_height = 0;
  std::int64_t width_bytes = 0, height = 0, depth = 0;
};
// The copies that move t's rows into its padded copy (into_padded) or back into t: one per
// index of the outermost row dimension (or per outer and middle index). Only t's own elements are written on the way back.
std::vector<RowCopy> row_copies(const Tensor& t, const RowCopyPlan& plan, int padded_cols, bool into_padded);

// The kernels a problem runs with (the runtime's selection: tuned winners or the table).
using SpecsFor = std::function<std::vector<KernelSpec>(const Problem&)>;

// What a call's substitute did: ran, or why not. `declined` is empty where there is nothing
// to say (p's own kernels are ready, or p takes no substitute) and names the obstacle where
// one stopped a substitute that could have run (the runtime logs it at debug level).
struct SubstituteOutcome {
  bool ran = false;
  std::string declined;
};

// Runs the call on the substitute's kernels when `specs` (p's own) are not ready, its
// substitute's are, the stream is not capturing a graph and every tensor can be copied; then
// starts compiling `specs`. Where it does not run, nothing was launched.
SubstituteOutcome forward_on_substitute(KernelCache& cache, const ForwardArgs& args, const Problem& p,
                                        CUstream stream, const std::vector<KernelSpec>& specs,
                                        const SpecsFor& specs_for);
SubstituteOutcome backward_on_substitute(KernelCache& cache, const BackwardArgs& args, const Problem& p,
                                         CUstream stream, const std::vector<KernelSpec>& specs,
                                         const SpecsFor& specs_for);

}  // namespace flashgen
