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
    if (s[middle] % plan.pitch != 0 || s[middle] / plan.pitch < n[inner]) return std::nullopt;
    plan.rows_per_slice = s[middle] / plan.pitch;
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
  const std::int64_t t_height = plan.rows_per_slice, padded_height = t.shape[o[0]];
  std::vector<RowCopy> out;
  out.reserve(static_cast<size_t>(t.shape[o[2]]));
  for (std::int64_t i = 0; i < t.shape[o[2]]; ++i) {
    RowCopy c;
    const std::int64_t t_offset = i * t.stride[o[2]] * elem, padded_offset = i * plan.padded_stride[o[2]] * elem;
    c.src_offset = into_padded ? t_offset : padded_offset;
    c.dst_offset = into_padded ? padded_offset : t_offset;
    c.src_pitch = into_padded ? t_pitch : padded_pitch;
    c.dst_pitch = into_padded ? padded_pitch : t_pitch;
    c.src_height = into_padded ? t_height : padded_height;
    c.dst_height = into_padded ? padded_height : t_height;
    c.width_bytes = t.shape[3] * elem;
    c.height = t.shape[o[0]];
    c.depth = t.shape[o[1]];
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
  // written whole by the kernels). false where the driver refuses the memory or a copy: the
  // caller then runs its own kernels.
  bool stage_inputs() {
    const CudaDriver& d = cuda_driver();
    if (d.cuMemAllocAsync(&memory_, bytes_, stream_) != CUDA_SUCCESS) {
      memory_ = 0;
      return false;
    }
    for (Entry& e : entries_) e.padded.data = reinterpret_cast<void*>(memory_ + e.offset);
    if (d.cuMemsetD32Async(memory_, 0, input_bytes_ / 4, stream_) != CUDA_SUCCESS) return false;
    for (const Entry& e : entries_)
      if (e.input && !copy(e, true)) return false;
    return true;
  }

  // The padded tensor of the i-th add().
  const Tensor& padded(size_t i) const { return entries_.at(i).padded; }

  void write_back_outputs() {
    for (const Entry& e : entries_)
      if (!e.input && !copy(e, false)) throw Error(Status::internal, "cuMemcpy3DAsync refused a padded copy back");
  }

 private:
  struct Entry {
    const Tensor* user;
    RowCopyPlan plan;
    Tensor padded;
    bool input;
    std::size_t offset;
  };

  // The entry's rows into its padded copy or back.
  bool copy(const Entry& e, bool into_padded) const {
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
      if (cuda_driver().cuMemcpy3DAsync(&c, stream_) != CUDA_SUCCESS) return false;
    }
    return true;
  }

  int cols_;
  CUstream stream_;
  CUdeviceptr memory_ = 0;
  std::size_t bytes_ = 0, input_bytes_ = 0;
  std::vector<Entry> entries_;
};

// p's substitute problem and kernels, or nullopt where the substitute may not run now.
std::optional<std::pair<Problem, std::vector<KernelSpec>>> substitute(KernelCache& cache, const Problem& p,
                                                                      CUstream stream,
                                                                      const std::vector<KernelSpec>& specs,
                                                                      const SpecsFor& specs_for) {
  const std::optional<int> d = substitute_head_dim(p);
  // Steady state costs the memory lookups of ready(); the driver is asked only before a compile.
  if (!d || cache.ready(specs) || capturing(stream)) return std::nullopt;
  Problem ps = p;
  ps.head_dim = *d;
  std::vector<KernelSpec> sub = specs_for(ps);
  if (!cache.ready(sub)) return std::nullopt;
  return std::pair(ps, std::move(sub));
}

// The call on the substitute's kernels (`launch(padded args, problem, specs)`) with its tensors
// `in` read into padded copies and `out` written back from theirs; false, with nothing
// launched, where the substitute may not run now or a tensor cannot be copied.
template <class Args, class Launch>
bool run_on_substitute(KernelCache& cache, const Args& args, const Problem& p, CUstream stream,
                       const std::vector<KernelSpec>& specs, const SpecsFor& specs_for,
                       std::initializer_list<Tensor Args::*> in, std::initializer_list<Tensor Args::*> out,
                       const Launch& launch) {
  auto sub = substitute(cache, p, stream, specs, specs_for);
  if (!sub) return false;
  PaddedCopies copies(static_cast<int>(sub->first.head_dim), stream);
  for (Tensor Args::*t : in)
    if (!copies.add(args.*t, true)) return false;
  for (Tensor Args::*t : out)
    if (!copies.add(args.*t, false)) return false;
  if (!copies.stage_inputs()) return false;
  cache.prefetch(specs);  // p's own kernels, for the calls after this one
  Args a = args;
  size_t i = 0;
  for (const auto& list : {in, out})
    for (Tensor Args::*t : list) a.*t = copies.padded(i++);
  launch(a, sub->first, sub->second);
  copies.write_back_outputs();
  return true;
}

}  // namespace

bool forward_on_substitute(KernelCache& cache, const ForwardArgs& args, const Problem& p, CUstream stream,
                           const std::vector<KernelSpec>& specs, const SpecsFor& specs_for) {
  using A = ForwardArgs;
  return run_on_substitute(cache, args, p, stream, specs, specs_for, {&A::q, &A::k, &A::v}, {&A::o},
                           [&](const A& a, const Problem& ps, const std::vector<KernelSpec>& sub) {
                             gpu_forward(cache, a, ps, stream, sub);
                           });
}

bool backward_on_substitute(KernelCache& cache, const BackwardArgs& args, const Problem& p, CUstream stream,
                            const std::vector<KernelSpec>& specs, const SpecsFor& specs_for) {
  using A = BackwardArgs;
  return run_on_substitute(cache, args, p, stream, specs, specs_for, {&A::q, &A::k, &A::v, &A::o, &A::dout},
                           {&A::dq, &A::dk, &A::dv}, [&](A a, const Problem& ps, const std::vector<KernelSpec>& sub) {
                             a.workspace = nullptr;  // the caller's was sized for its own head dim
                             a.workspace_bytes = 0;
                             gpu_backward(cache, a, ps, stream, sub);
                           });
}

}  // namespace flashgen
