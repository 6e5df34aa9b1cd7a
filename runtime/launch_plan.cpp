#include "runtime/launch_plan.h"

#include "compiler/kernel_pieces.h"
#include "compiler/kernel_selection.h"
#include "runtime/tensor_maps.h"

#include <algorithm>
#include <cmath>

namespace flashgen {
namespace {

constexpr std::int64_t kDqRowRounding = kFlashDqRowRounding;

std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

ProblemKey problem_key(const Problem& p) {
  const AttentionOptions& o = p.options;
  ProblemKey k;
  k.head_dim = static_cast<int>(p.head_dim);
  k.dtype = p.dtype;
  k.causal = o.causal;
  // Causal arrives folded into window_right = 0; any other bound needs the window kernels.
  k.window = o.window_left >= 0 || (o.window_right >= 0 && !(o.causal && o.window_right == 0));
  k.softcap = o.softcap > 0.0f;
  k.deterministic = o.deterministic;
  k.batch = p.batch;
  k.heads_q = p.heads_q;
  k.heads_kv = p.heads_kv;
  k.seqlen_q = p.seqlen_q;
  k.seqlen_k = p.seqlen_k;
  k.paged = p.paged;
  k.seqused_k = p.has_seqused_k;
  k.varlen = p.varlen;
  return k;
}

ProblemKey problem_key(const TuneShape& shape) {
  Problem p;
  p.head_dim = shape.head_dim;
  p.dtype = shape.dtype;
  p.seqlen_q = shape.seqlen_q;
  p.seqlen_k = shape.seqlen_k;
  p.batch = p.heads_q = p.heads_kv = 1;
  p.options = shape.options;
  if (p.options.causal) p.options.window_right = 0;  // as validate() folds it
  return problem_key(p);
}

namespace {

// A packed tensor (total, heads, head_dim) has no batch stride: the offsets add each
// sequence's start row.
FlashStrides strides(const Tensor& t) {
  if (t.rank == 3) return {0, t.stride[0], t.stride[1]};
  return {t.stride[0], t.stride[1], t.stride[2]};
}

// The fields every pass reads.
FlashAttentionParams base_params(const Problem& p, const PackedSequences& packed) {
  FlashAttentionParams f{};
  if (p.varlen) {
    f.cu_seqlens_q = static_cast<const int*>(packed.cu_seqlens_q.data);
    f.cu_seqlens_k = static_cast<const int*>(packed.cu_seqlens_k.data);
    f.total_q = static_cast<int>(p.total_q);
    f.total_k = static_cast<int>(p.total_k);
  }
  f.batch = static_cast<int>(p.batch);
  f.seqlen_q = static_cast<int>(p.seqlen_q);
  f.seqlen_k = static_cast<int>(p.seqlen_k);
  f.seqlen_q_rounded = static_cast<int>(round_up(p.seqlen_q, kDqRowRounding));
  f.heads_q = static_cast<int>(p.heads_q);
  f.heads_kv = static_cast<int>(p.heads_kv);
  f.heads_per_kv = static_cast<int>(p.heads_q / std::max<std::int64_t>(p.heads_kv, 1));
  f.head_dim = static_cast<int>(p.head_dim);
  const AttentionOptions& o = p.options;
  constexpr float kLog2e = 1.4426950408889634f;
  f.softmax_scale = o.softmax_scale;
  f.softcap = o.softcap;
  // With soft-capping the kernels apply the scale inside tanh; the softmax sees cap * tanh(.) unscaled.
  f.scale_log2 = o.softcap > 0.0f ? kLog2e : o.softmax_scale * kLog2e;
  f.window_left = o.window_left;
  f.window_right = o.window_right;
  return f;
}

unsigned blocks(std::int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

// The L2 bytes a section of (head, batch) slices may keep in use while its heaviest tiles run
// first: two thirds of the H100/H200's 50 MB, FlashAttention-3's budget for the same order.
constexpr std::int64_t kTileSectionL2Bytes = std::int64_t{32} << 20;
// Sections pay from this many blocks per slice on (below, a slice's few tiles already mix heavy
// and light ones in the grid's own order: sections measured 3 % slower at 8 blocks).
constexpr unsigned kTileSectionMinBlocks = 16;

// FlashAttentionParams::tile_section of the single-tile forward grid of `blocks` query tiles per
// (query head, batch) slice, each slice's CTAs sharing `slice_bytes` of K and V: under a causal
// mask or a window the tiles' work differs, and the longest first over L2-sized sections
// balances the SMs (the grid's own order ends with the last slice's longest tiles); the
// persistent forward's walk does not read it (scheduler/persistent.cuh says why). Measured
// on the H200 (docs/perf-notes.md, "L2 sections"): +3-10 % at 4k causal, within noise at 16k.
// The masked warp-specialised dK/dV kernel gets the same order from its grid's shape
// (dkdv_grid). Unmasked tiles are equal: 1.
int tile_section(const Problem& p, unsigned blocks, std::int64_t slice_bytes) {
  const ProblemKey k = problem_key(p);
  if ((!k.causal && !k.window) || blocks < kTileSectionMinBlocks) return 1;
  const std::int64_t slices = std::max<std::int64_t>(p.batch * p.heads_q, 1);
  const std::int64_t fit = kTileSectionL2Bytes / std::max<std::int64_t>(slice_bytes, 1);
  return static_cast<int>(std::clamp<std::int64_t>(fit, 1, slices));
}

// The dK/dV grid. Masked and warp-specialised (dkdv_section_grid): (slices per section, key
// blocks, sections), the order of scheduler/section_grid.cuh, sections sized like the
// forward's by the slices' Q, dO (16-bit) and dQ accumulator (fp32) rows, at most 65,535 of
// them (gridDim.z's limit). Else (key blocks, key/value heads, batch).
std::array<unsigned, 3> dkdv_grid(const Problem& p, const KernelSpec& s) {
  const unsigned key_blocks = blocks(p.seqlen_k, s.block_n);
  const unsigned heads_kv = static_cast<unsigned>(p.heads_kv), b = static_cast<unsigned>(p.batch);
  if (!dkdv_section_grid(s)) return {key_blocks, heads_kv, b};
  const std::int64_t slices = std::max<std::int64_t>(p.heads_kv * p.batch, 1);
  const std::int64_t slice_bytes = p.seqlen_q * (p.heads_q / std::max<std::int64_t>(p.heads_kv, 1)) *
                                   padded_head_dim(p.head_dim) * (2 + 2 + 4);
  std::int64_t section = std::min<std::int64_t>(tile_section(p, key_blocks, slice_bytes), slices);
  section = std::max(section, (slices + kMaxGridYZ - 1) / kMaxGridYZ);
  return {static_cast<unsigned>(section), key_blocks, static_cast<unsigned>((slices + section - 1) / section)};
}

// Rows of D and of the dQ accumulator: per (batch, head) seqlen_q rounded up; packed, per head
// the packed rows plus kDqRowRounding per sequence (attention/offsets.cuh, accum_row).
std::int64_t accum_rows(const Problem& p) {
  if (p.varlen) return p.heads_q * (p.total_q + kDqRowRounding * p.batch);
  return p.batch * p.heads_q * round_up(p.seqlen_q, kDqRowRounding);
}

std::size_t dq_accum_bytes(const Problem& p) {
  if (p.options.deterministic) return 0;
  return static_cast<std::size_t>(accum_rows(p) * padded_head_dim(p.head_dim)) * sizeof(float);
}

}  // namespace

std::size_t backward_workspace_bytes(const Problem& p) {
  return dq_accum_bytes(p) + static_cast<std::size_t>(accum_rows(p)) * sizeof(float);
}

std::vector<KernelLaunch> plan_forward(const ForwardArgs& args, const Problem& p, Arch arch, int num_splits,
                                       void* workspace) {
  return plan_forward(args, p, select_forward_kernels(problem_key(p), arch), num_splits, workspace);
}

namespace {

// The split-KV kernel of a decode plan, or null.
const KernelSpec* splitkv_of(const std::vector<KernelSpec>& specs) {
  for (const KernelSpec& s : specs)
    if (s.pass == Pass::fwd_splitkv) return &s;
  return nullptr;
}

// GQA-packed query tiles per (batch, KV head).
unsigned splitkv_m_blocks(const Problem& p, const KernelSpec& s) {
  return blocks(p.seqlen_q * (p.heads_q / p.heads_kv), s.block_m);
}

// Rows of the split parts and of the combine, in lse's order: (batch, heads_q, seqlen_q), or
// packed queries over a KV cache (heads_q, total_q) (kv_cache/kv_cache_offsets.cuh).
std::int64_t splitkv_rows(const Problem& p) { return p.heads_q * (p.varlen ? p.total_q : p.batch * p.seqlen_q); }

}  // namespace

// No split while the unsplit grid fills 80 % of the CTA slots (SMs x CTAs per SM). Otherwise
// the split count that spreads the work most evenly over the SMs: decode is bound by each
// SM's share of the K/V reads, and the last SM to finish ends the kernel, so the cost of n
// splits is the CTAs of the fullest SM, ceil(ctas * n / SMs), times the work of one, 1 / n.
// A larger n wins only by more than 5 % (fewer parts to combine; 3 % more balance measured
// nothing: 16 and 33 splits ran alike at B = 1), at most one split per two key tiles and at
// most kFlashMaxSplits. Measured on the H200 (docs/perf-notes.md, "Split-KV decode"):
// FlashAttention-2's rule (the fewest splits whose waves are 85 % full) left SMs with one CTA
// beside SMs with two, 7 % slower at B = 1; a wave model over all resident CTA slots was 2-4 %
// slower at B = 8. Paged caches balance the same way: since each row's page is looked up a
// tile ahead, one CTA per SM hides the lookups (H100, docs/perf-notes.md, "page order": B = 1,
// 256k keys, 16 splits ran as fast as 33, and B = 8, 64k keys, page 256 ran 1.4 % faster on
// 2 splits than on the 4 that balancing over the CTA slots gave).
// A count the caller asked for (ForwardArgs::num_splits) replaces the search.
int split_count(const Problem& p, const std::vector<KernelSpec>& specs, int sm_count) {
  static_assert(kMaxNumSplits == kFlashMaxSplits, "the API's bound is the kernels' bound");
  const KernelSpec* s = splitkv_of(specs);
  if (s == nullptr) return 1;
  const int tiles = static_cast<int>(blocks(p.seqlen_k, s->block_n));
  const auto filled = [tiles](int n) {  // the kernel gives each split ceil(tiles / n) tiles
    const int per_split = (tiles + n - 1) / n;
    return std::max(1, (tiles + per_split - 1) / per_split);
  };
  if (p.num_splits > 0) return filled(std::min(p.num_splits, static_cast<int>(kFlashMaxSplits)));
  const std::int64_t ctas = static_cast<std::int64_t>(splitkv_m_blocks(p, *s)) * p.heads_kv * p.batch;
  const std::int64_t sms = std::max(sm_count, 1);
  const int per_sm = std::clamp((max_shared_memory(s->arch) + 1024) / (s->shared_memory_bytes() + 1024), 1,
                                2048 / s->threads());
  if (10 * ctas >= 8 * sms * per_sm) return 1;  // before splitting: 80 % of the slots
  const int max_splits = std::clamp(tiles / 2, 1, static_cast<int>(kFlashMaxSplits));
  int best_n = 1;
  double best = static_cast<double>((ctas + sms - 1) / sms);
  for (int n = 2; n <= max_splits; ++n) {
    const double cost = static_cast<double>((ctas * n + sms - 1) / sms) / n;
    if (cost < 0.95 * best) best = cost, best_n = n;
  }
  return filled(best_n);
}

std::size_t forward_workspace_bytes(const Problem& p, int num_splits) {
  if (num_splits <= 1) return 0;
  return static_cast<std::size_t>(num_splits * splitkv_rows(p)) * (padded_head_dim(p.head_dim) + 1) * sizeof(float);
}

std::vector<KernelLaunch> plan_backward(const BackwardArgs& args, const Problem& p, Arch arch, void* workspace) {
  return plan_backward(args, p, select_backward_kernels(problem_key(p), arch), workspace);
}

std::vector<KernelLaunch> plan_forward(const ForwardArgs& args, const Problem& p, const std::vector<KernelSpec>& specs,
                                       int num_splits, void* workspace, int sm_count) {
  const KernelSpec fwd = specs.at(0);
  KernelLaunch l{fwd, {blocks(p.seqlen_q, fwd.block_m), static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch)},
                 base_params(p, args.varlen)};
  const unsigned query_blocks = l.grid[0];
  if (fwd.persistent) {  // the tiles in one dimension (scheduler/persistent.cuh walks them)
    const std::uint64_t tiles = std::uint64_t{l.grid[0]} * l.grid[1] * l.grid[2];  // 0: nothing to launch
    const std::uint64_t most = sm_count > 0 ? static_cast<std::uint64_t>(sm_count) : 0x7fffffffu;  // grid.x limit
    const std::uint64_t ctas = std::min(tiles, most);
    l.grid = {static_cast<unsigned>(ctas), 1, 1};
  }
  FlashAttentionParams& f = l.params;
  f.q = args.q.data;
  f.k = args.k.data;
  f.v = args.v.data;
  f.o = args.o.data;
  f.lse = p.has_lse ? static_cast<float*>(args.lse.data) : nullptr;
  f.q_stride = strides(args.q);
  f.k_stride = strides(args.k);
  f.v_stride = strides(args.v);
  f.o_stride = strides(args.o);
  f.num_splits = 1;
  if (fwd.pass != Pass::fwd_splitkv) {
    // A (query head, batch) slice's CTAs share its K and V: the single-tile grid's sections, of
    // the query tiles per slice (a persistent grid's x is its CTA count). (The split-KV kernels
    // below have a scheduler of their own.)
    f.tile_section = tile_section(p, query_blocks, 2 * p.seqlen_k * padded_head_dim(p.head_dim) * 2);
    return {l};
  }

  // Decode: grid (query tiles x splits, KV heads, batch); with splits, the parts in the
  // workspace (o_partial, then lse_partial) and the combine over the rows.
  const int splits = std::max(num_splits, 1);
  const unsigned m_blocks = splitkv_m_blocks(p, fwd);
  l.grid = {m_blocks * static_cast<unsigned>(splits), static_cast<unsigned>(p.heads_kv), static_cast<unsigned>(p.batch)};
  f.num_splits = splits;
  // The KV cache: key counts and the block table are read on the device (graph-safe).
  f.seqused_k = p.has_seqused_k ? static_cast<const int*>(args.seqused_k.data) : nullptr;
  if (p.paged) {
    f.block_table = static_cast<const int*>(args.block_table.data);
    f.block_table_stride = args.block_table.stride[0];
    f.page_size = static_cast<int>(p.page_size);
    f.num_pages = static_cast<int>(p.num_pages);
  }
  if (splits > 1) {
    f.o_partial = static_cast<float*>(workspace);
    f.lse_partial = f.o_partial + splits * splitkv_rows(p) * padded_head_dim(p.head_dim);
  }
  const KernelSpec& combine = specs.at(1);
  const unsigned combine_blocks = splits > 1 ? blocks(splitkv_rows(p), combine.block_m) : 0;
  KernelLaunch merge{combine, {combine_blocks, 1, 1}, f};
  // On Hopper the combine is scheduled while the split kernel drains (it waits for it first).
  merge.programmatic_dependent_launch = compute_capability(combine.arch) >= 90;
  return {l, merge};
}

std::vector<KernelLaunch> plan_backward(const BackwardArgs& args, const Problem& p,
                                        const std::vector<KernelSpec>& specs, void* workspace) {
  FlashAttentionParams f = base_params(p, args.varlen);
  f.q = args.q.data;
  f.k = args.k.data;
  f.v = args.v.data;
  f.o = args.o.data;
  f.lse = static_cast<float*>(args.lse.data);
  f.dout = args.dout.data;
  f.dq = args.dq.data;
  f.dk = args.dk.data;
  f.dv = args.dv.data;
  f.q_stride = strides(args.q);
  f.k_stride = strides(args.k);
  f.v_stride = strides(args.v);
  f.o_stride = strides(args.o);
  f.dout_stride = strides(args.dout);
  f.dq_stride = strides(args.dq);
  f.dk_stride = strides(args.dk);
  f.dv_stride = strides(args.dv);
  const std::size_t accum = dq_accum_bytes(p);
  f.dq_accum = accum ? static_cast<float*>(workspace) : nullptr;
  f.dq_accum_rows = accum ? accum_rows(p) : 0;
  f.dsum = reinterpret_cast<float*>(static_cast<char*>(workspace) + accum);
  // The accumulator's column order is its writer's: the dK/dV kernel that reduces it by TMA.
  f.dq_accum_fragment_order = std::any_of(specs.begin(), specs.end(), [](const KernelSpec& s) {
    return s.pass == Pass::bwd_dkdv && needs_dq_accum_map(s);
  });

  const unsigned hq = static_cast<unsigned>(p.heads_q), b = static_cast<unsigned>(p.batch);
  const std::int64_t rows = round_up(p.seqlen_q, kDqRowRounding);
  std::vector<KernelLaunch> out;
  for (const KernelSpec& s : specs) {
    switch (s.pass) {
      case Pass::bwd_preprocess:
      case Pass::bwd_dq_convert: out.push_back({s, {blocks(rows, s.block_m), hq, b}, f}); break;
      case Pass::bwd_dkdv:
        out.push_back({s, dkdv_grid(p, s), f});
        break;
      case Pass::bwd_dq: out.push_back({s, {blocks(p.seqlen_q, s.block_m), hq, b}, f}); break;
      case Pass::fwd:
      case Pass::fwd_splitkv:
      case Pass::fwd_combine:
      case Pass::kv_append: break;
    }
  }
  return out;
}

KernelLaunch plan_kv_append(const KvAppendArgs& args, const KvAppendProblem& a, Arch arch) {
  const Problem& p = a.cache;
  const KernelSpec spec = select_kv_append_kernel(static_cast<int>(p.head_dim), p.dtype, p.paged, a.packed, arch);
  FlashAttentionParams f{};
  f.batch = static_cast<int>(p.batch);
  f.seqlen_k = static_cast<int>(p.seqlen_k);
  f.heads_kv = static_cast<int>(p.heads_kv);
  f.head_dim = static_cast<int>(p.head_dim);
  f.k_new = args.k.data;
  f.v_new = args.v.data;
  f.k_new_stride = strides(args.k);
  f.v_new_stride = strides(args.v);
  f.k_cache = args.k_cache.data;
  f.v_cache = args.v_cache.data;
  f.k_stride = strides(args.k_cache);
  f.v_stride = strides(args.v_cache);
  f.cache_seqlens = static_cast<const int*>(args.cache_seqlens.data);
  f.seqlen_new = static_cast<int>(a.seqlen_new);
  if (a.packed) {  // the new rows' offsets, as a packed forward's keys have them
    f.cu_seqlens_k = static_cast<const int*>(args.cu_seqlens.data);
    f.total_k = static_cast<int>(a.seqlen_new);
  }
  if (p.paged) {
    f.block_table = static_cast<const int*>(args.block_table.data);
    f.block_table_stride = args.block_table.stride[0];
    f.page_size = static_cast<int>(p.page_size);
    f.num_pages = static_cast<int>(p.num_pages);
  }
  if (a.rotary_dim > 0) {
    f.rotary_dim = static_cast<int>(a.rotary_dim);
    f.rotary_rows = static_cast<int>(a.rotary_rows);
    f.rotary_stride = args.rotary.cos.stride[0];
    f.rotary_cos = args.rotary.cos.data;
    f.rotary_sin = args.rotary.sin.data;
    f.rotary_interleaved = args.rotary.interleaved;
  }
  if (a.rotate_q) {
    f.q = args.q.data;
    f.o = args.q_rotated.data;
    f.q_stride = strides(args.q);
    f.o_stride = strides(args.q_rotated);
    f.seqlen_q = static_cast<int>(p.seqlen_q);
    f.heads_q = static_cast<int>(p.heads_q);
    f.rotary_q_consecutive = args.q_at_consecutive_positions;
  }
  const std::int64_t rows = 2 * a.new_rows() * p.heads_kv + (a.rotate_q ? a.query_rows() * p.heads_q : 0);
  return {spec, {blocks(rows, spec.block_m), 1, 1}, f};
}

}  // namespace flashgen
