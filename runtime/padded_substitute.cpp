// Substitute kernels on zero-padded copies: runtime/padded_substitute.h.
#include "runtime/padded_substitute.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "runtime/cuda_driver.h"
#include "runtime/gpu_attention.h"

namespace flashgen {

std::optional<int> substitute_head_dim(const Problem& p) {
  if (p.device == kCpu || p.options.deterministic || p.varlen || p.kv_cache()) return std::nullopt;
  for (int d : kSubstituteHeadDims) {
    if (p.head_dim == d) return std::nullopt;
    if (p.head_dim < d) return d;
  }
  return std::nullopt;
}

std::optional<RowCopyPlan> plan_row_copy(const Tensor& t, int padded_cols) {
  const auto& n = t.shape;
  const auto& s = t.stride;
  if (t.rank != 4 || (n[3] > 1 && s[3] != 1) || n[3] > padded_cols) return std::nullopt;
  RowCopyPlan plan;
  plan.order = {0, 1, 2};
  // Extent-1 dimensions last: their strides say nothing about the layout.
  std::stable_sort(plan.order.begin(), plan.order.end(), [&](int a, int b) {
    return std::pair(n[a] == 1, n[a] == 1 ? 0 : s[a]) < std::pair(n[b] == 1, n[b] == 1 ? 0 : s[b]);
  });
  const int inner = plan.order[0], middle = plan.order[1];
  plan.pitch = n[inner] > 1 ? s[inner] : n[3];
  if (plan.pitch < n[3]) return std::nullopt;  // rows overlap
  plan.rows_per_slice = n[inner];
  if (n[middle] > 1) {
    if (s[middle] % plan.pitch == 0 && s[middle] / plan.pitch >= n[inner]) {
      plan.rows_per_slice = s[middle] / plan.pitch;
    } else {
      // Padded rows of all heads (stride H*d + pad): one copy per (outer, middle) index.
      if (s[middle] < (n[inner] - 1) * plan.pitch + n[3]) return std::nullopt;  // one position's rows overlap the next's
      if (n[plan.order[2]] * n[middle] > kMaxRowCopies) return std::nullopt;
      plan.copy_per_middle = true;
    }
  }
  std::int64_t stride = padded_cols;
  for (int dim : plan.order) {
    plan.padded_stride[dim] = stride;
    stride *= n[dim];
  }
  return plan;
}

std::vector<RowCopy> row_copies(const Tensor& t, const RowCopyPlan& plan, int padded_cols, bool into_padded) {
  const auto& o = plan.order;
  const std::int64_t elem = static_cast<std::int64_t>(size_of(t.dtype));
  const std::int64_t t_pitch = plan.pitch * elem, padded_pitch = padded_cols * elem;
  // Per outer index one copy of [middle][inner] rows, or per (outer, middle) one of [inner].
  const std::int64_t per_copy = plan.copy_per_middle ? t.shape[o[1]] : 1;
  const std::int64_t t_height = plan.copy_per_middle ? t.shape[o[0]] : plan.rows_per_slice;
  const std::int64_t padded_height = t.shape[o[0]];
  std::vector<RowCopy> out;
  out.reserve(static_cast<size_t>(t.shape[o[2]] * per_copy));
  for (std::int64_t i = 0; i < t.shape[o[2]]; ++i)
    for (std::int64_t j = 0; j < per_copy; ++j) {
      RowCopy c;
      const std::int64_t t_offset = (i * t.stride[o[2]] + j * t.stride[o[1]]) * elem;
      const std::int64_t padded_offset = (i * plan.padded_stride[o[2]] + j * plan.padded_stride[o[1]]) * elem;
      c.src_offset = into_padded ? t_offset : padded_offset;
      c.dst_offset = into_padded ? padded_offset : t_offset;
      c.src_pitch = into_padded ? t_pitch : padded_pitch;
      c.dst_pitch = into_padded ? padded_pitch : t_pitch;
      c.src_height = into_padded ? t_height : padded_height;
      c.dst_height = into_padded ? padded_height : t_height;
      c.width_bytes = t.shape[3] * elem;
      c.height = t.shape[o[0]];
      c.depth = plan.copy_per_middle ? 1 : t.shape[o[1]];
      out.push_back(c);
    }
  return out;
}

namespace {

bool capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return cuda_driver().cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The padded copies of one call's tensors, in one stream-ordered allocation freed at the end.
class PaddedCopies {
 public:
  PaddedCopies(int cols, CUstream stream) : cols_(cols), stream_(stream) {}
  ~PaddedCopies() {
    if (memory_ != 0) cuda_driver().cuMemFreeAsync(memory_, stream_);
  }
  PaddedCopies(const PaddedCopies&) = delete;
  PaddedCopies& operator=(const PaddedCopies&) = delete;

  // Plans t's copy (read in when `input`, else written back); false where it cannot be.
  bool add(const Tensor& t, bool input) {
    auto plan = plan_row_copy(t, cols_);
    if (!plan) return false;
    Entry e{&t, *plan, t, input, bytes_};
    e.padded.shape[3] = cols_;
    e.padded.stride = {plan->padded_stride[0], plan->padded_stride[1], plan->padded_stride[2], 1};
    const std::int64_t elem = static_cast<std::int64_t>(size_of(t.dtype));
    const std::int64_t bytes = t.shape[0] * t.shape[1] * t.shape[2] * cols_ * elem;
    bytes_ += (bytes + 255) / 256 * 256;  // TMA wants 16-byte aligned bases; 256 as cudaMalloc gives
    if (input) input_bytes_ = bytes_;  // inputs are added first: their copies lead the allocation
    entries_.push_back(e);
    return true;
  }

  // Allocates the copies and fills the inputs' (zeros, then their rows; the outputs' are
  // written whole by the kernels). The driver's refusal of the memory or of a copy, else
  // empty: the caller then runs its own kernels.
  std::string stage_inputs() {
    const CudaDriver& d = cuda_driver();
    if (CUresult r = d.cuMemAllocAsync(&memory_, bytes_, stream_); r != CUDA_SUCCESS) {
      memory_ = 0;
      return fmt::format("cuMemAllocAsync of {} bytes failed ({})", bytes_, cuda_error_text(r));
    }
    for (Entry& e : entries_) e.padded.data = reinterpret_cast<void*>(memory_ + e.offset);
    if (CUresult r = d.cuMemsetD32Async(memory_, 0, input_bytes_ / 4, stream_); r != CUDA_SUCCESS)
      return fmt::format("cuMemsetD32Async failed ({})", cuda_error_text(r));
    for (const Entry& e : entries_)
      if (!e.input) continue;
      else if (CUresult r = copy(e, true); r != CUDA_SUCCESS)
        return fmt::format("cuMemcpy3DAsync refused a padded copy ({})", cuda_error_text(r));
    return {};
  }

  // The padded tensor of the i-th add().
  const Tensor& padded(size_t i) const { return entries_.at(i).padded; }

  void write_back_outputs() {
    for (const Entry& e : entries_)
      if (CUresult r = e.input ? CUDA_SUCCESS : copy(e, false); r != CUDA_SUCCESS)
        throw Error(Status::internal, fmt::format("cuMemcpy3DAsync refused a padded copy back ({})", cuda_error_text(r)));
  }

 private:
  struct Entry {
    const Tensor* user;
    RowCopyPlan plan;
    Tensor padded;
    bool input;
    std::size_t offset;
  };

  // The entry's rows into its padded copy or back; the driver's first refusal.
  CUresult copy(const Entry& e, bool into_padded) const {
    const auto user = reinterpret_cast<CUdeviceptr>(e.user->data);
    const auto padded = reinterpret_cast<CUdeviceptr>(e.padded.data);
    for (const RowCopy& r : row_copies(*e.user, e.plan, cols_, into_padded)) {
      CUDA_MEMCPY3D c{};
      c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      c.srcDevice = (into_padded ? user : padded) + static_cast<CUdeviceptr>(r.src_offset);
      c.dstDevice = (into_padded ? padded : user) + static_cast<CUdeviceptr>(r.dst_offset);
      c.srcPitch = static_cast<size_t>(r.src_pitch);
      c.dstPitch = static_cast<size_t>(r.dst_pitch);
      c.srcHeight = static_cast<size_t>(r.src_height);
      c.dstHeight = static_cast<size_t>(r.dst_height);
      c.WidthInBytes = static_cast<size_t>(r.width_bytes);
      c.Height = static_cast<size_t>(r.height);
      c.Depth = static_cast<size_t>(r.depth);
      if (CUresult r = cuda_driver().cuMemcpy3DAsync(&c, stream_); r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
  }

  int cols_;
  CUstream stream_;
  CUdeviceptr memory_ = 0;
  std::size_t bytes_ = 0, input_bytes_ = 0;
  std::vector<Entry> entries_;
};

// p's substitute problem and kernels; nullopt, with the obstacle in `declined` where there is
// one, where the substitute may not run now.
std::optional<std::pair<Problem, std::vector<KernelSpec>>> substitute(KernelCache& cache, const Problem& p,
                                                                      CUstream stream,
                                                                      const std::vector<KernelSpec>& specs,
                                                                      const SpecsFor& specs_for,
                                                                      std::string& declined) {
  const std::optional<int> d = substitute_head_dim(p);
  // Steady state costs the memory lookups of ready(); the driver is asked only before a compile.
  if (!d || cache.ready(specs)) return std::nullopt;
  if (capturing(stream)) {
    declined = "the stream is capturing a graph";
    return std::nullopt;
  }
  Problem ps = p;
  ps.head_dim = *d;
  std::vector<KernelSpec> sub = specs_for(ps);
  if (!cache.ready(sub)) {
    declined = fmt::format("the d{} kernels are not ready either", *d);
    return std::nullopt;
  }
  return std::pair(ps, std::move(sub));
}

// The call on the substitute's kernels (`launch(padded args, problem, specs)`) with its tensors
// `in` read into padded copies and `out` written back from theirs; nothing launched where the
// substitute may not run now or a tensor cannot be copied.
template <class Args, class Launch>
SubstituteOutcome run_on_substitute(KernelCache& cache, const Args& args, const Problem& p, CUstream stream,
                                    const std::vector<KernelSpec>& specs, const SpecsFor& specs_for,
                                    std::initializer_list<Tensor Args::*> in,
                                    std::initializer_list<Tensor Args::*> out, const Launch& launch) {
  SubstituteOutcome outcome;
  auto sub = substitute(cache, p, stream, specs, specs_for, outcome.declined);
  if (!sub) return outcome;
  PaddedCopies copies(static_cast<int>(sub->first.head_dim), stream);
  size_t i = 0;
  for (const auto& list : {in, out})
    for (Tensor Args::*t : list)
      if (!copies.add(args.*t, list.begin() == in.begin())) {
        outcome.declined = fmt::format("tensor {} of the call ({} in, then out) has a layout no 3D copy per "
                                       "outer row index pads", i, in.size());
        return outcome;
      } else {
        ++i;
      }
  if (outcome.declined = copies.stage_inputs(); !outcome.declined.empty()) return outcome;
  cache.prefetch(specs);  // p's own kernels, for the calls after this one
  Args a = args;
  i = 0;
  for (const auto& list : {in, out})
    for (Tensor Args::*t : list) a.*t = copies.padded(i++);
  launch(a, sub->first, sub->second);
  copies.write_back_outputs();
  outcome.ran = true;
  return outcome;
}

}  // namespace

SubstituteOutcome forward_on_substitute(KernelCache& cache, const ForwardArgs& args, const Problem& p,
                                        CUstream stream, const std::vector<KernelSpec>& specs,
                                        const SpecsFor& specs_for) {
  using A = ForwardArgs;
  return run_on_substitute(cache, args, p, stream, specs, specs_for, {&A::q, &A::k, &A::v}, {&A::o},
                           [&](const A& a, const Problem& ps, const std::vector<KernelSpec>& sub) {
                             gpu_forward(cache, a, ps, stream, sub);
                           });
}

SubstituteOutcome backward_on_substitute(KernelCache& cache, const BackwardArgs& args, const Problem& p,
                                         CUstream stream, const std::vector<KernelSpec>& specs,
                                         const SpecsFor& specs_for) {
  using A = BackwardArgs;
  return run_on_substitute(cache, args, p, stream, specs, specs_for, {&A::q, &A::k, &A::v, &A::o, &A::dout},
                           {&A::dq, &A::dk, &A::dv}, [&](A a, const Problem& ps, const std::vector<KernelSpec>& sub) {
                             a.workspace = nullptr;  // the caller's was sized for its own head dim
                             a.workspace_bytes = 0;
                             gpu_backward(cache, a, ps, stream, sub);
                           });
}

}  // namespace flashgen
