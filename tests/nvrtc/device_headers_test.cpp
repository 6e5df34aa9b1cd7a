// Every device header (templates/, embedded) compiles on its own: a program that includes
// that header first and instantiates its main template in a kernel, compiled by NVRTC for
// sm_90a. A header that leans on something it does not include fails here. A case may
// include more headers after it, for types of its own (a test mainloop, a tile to copy
// into): those come after the header under test, so they cannot hide what it lacks. Every
// embedded header must have a case, so a new piece cannot skip the test.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <set>
#include <string>

#include "compiler/codegen.h"
#include "compiler/embedded_files.h"
#include "runtime/nvrtc_compiler.h"

namespace flashgen {
namespace {

KernelSpec spec(Pass pass, int d, int bm, int bn, int warps, bool causal = true) {
  KernelSpec s;
  s.pass = pass;
  s.head_dim = d;
  s.block_m = bm;
  s.block_n = bn;
  s.warps = warps;
  s.stages = 2;
  s.causal = causal;
  s.arch = Arch::sm_90a;
  return s;
}

// The traits the kernel-level cases instantiate: `Spec` (the generated struct) and `Traits`.
std::string traits(const KernelSpec& s) {
  return "#include \"params/kernel_traits.cuh\"\n" + spec_struct(s) + "using Traits = flash::KernelTraits<Spec>;\n";
}

// A kernel t over dK/dV mainloop M on default arguments: the dense offsets, a causal
// visibility and M's layout (off, vis, l), then `roles`, then the consumer: M::Split of warp
// `split_warp`, zeroed accumulators dk and dv, `consume` and a store of dk and dv.
std::string dkdv_mainloop_kernel(const char* mainloop, const KernelSpec& s, const char* roles,
                                 const char* split_warp, const char* consume) {
  return traits(s) + fmt::format(R"(
using M = flash::{}<Traits>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {{
  const flash::DenseOffsets off(p, 0);
  const flash::Visibility<true> vis(p.seqlen_q, p.seqlen_k, -1, 0);
  const M::Layout l(0);
{}
  const M::Split split({});
  M::Split::Accumulator dk, dv;
  flash::zero(dk);
  flash::zero(dv);
  {}
  p.dq_accum[threadIdx.x] = dk[0][0][0] + dv[0][0][0];
}}
)",
                                 mainloop, roles, split_warp, consume);
}

// One Q tile of an all-threads dK/dV mainloop (its consume).
std::string dkdv_mainloop_case(const char* mainloop, const KernelSpec& s) {
  return dkdv_mainloop_kernel(
      mainloop, s, "", "threadIdx.x / 32",
      "M::consume(p, off, vis, l, split, 0, 0, 0, 0, threadIdx.x, threadIdx.x / 32, threadIdx.x % 32, 0.0f, dk, dv);");
}

// A warp-specialised dK/dV mainloop's roles: its producer (init, load), write_dq and mma.
std::string dkdv_ws_mainloop_case(const char* mainloop, const KernelSpec& s) {
  return dkdv_mainloop_kernel(mainloop, s, R"(  const flash::DkdvWorkItems<Traits> items(vis, 0, 2, 0, Traits::kBlockN);
  if (threadIdx.x < 32) {
    M::Producer::init(l);
    M::Producer::load(p, off, l, 0, 0, items);
    return;
  }
  if (threadIdx.x < 64) {
    M::write_dq(p, off, l, items);
    return;
  })",
                              "threadIdx.x / 32 - 4", "M::mma(p, vis, l, 0, items, threadIdx.x / 128 - 1, split, dk, dv);");
}

const KernelSpec kFwd = spec(Pass::fwd, 128, 128, 128, 8);
const KernelSpec kDkdv90 = spec(Pass::bwd_dkdv, 128, 64, 128, 8);
const KernelSpec kDkdv256 = spec(Pass::bwd_dkdv, 256, 64, 64, 8, false);
const KernelSpec kDkdv80 = [] {
  KernelSpec s = spec(Pass::bwd_dkdv, 64, 64, 64, 4);
  s.arch = Arch::sm_80;
  return s;
}();
const KernelSpec kDq = spec(Pass::bwd_dq, 64, 64, 32, 4);
const KernelSpec kFwdWs = spec(Pass::fwd, 128, 128, 128, 12);     // warp-specialised
const KernelSpec kDkdvWs = spec(Pass::bwd_dkdv, 128, 64, 128, 12);  // warp-specialised
const KernelSpec kDkdvWs256 = spec(Pass::bwd_dkdv, 256, 64, 64, 12, false);
const KernelSpec kRowwise = spec(Pass::bwd_preprocess, 96, 64, 64, 4);
const KernelSpec kSplitKv = spec(Pass::fwd_splitkv, 128, 16, 64, 4);
const KernelSpec kCombine = spec(Pass::fwd_combine, 72, 2, 64, 4, false);
const KernelSpec kAppend = [] {  // paged, a head dim of element-wise loads
  KernelSpec s = spec(Pass::kv_append, 59, 16, 16, 4, false);
  s.paged = true;
  return s;
}();

// Header -> what follows its #include.
std::map<std::string, std::string> cases() {
  return {
      {"arch/types.cuh", R"(
static_assert(sizeof(flash::Select<true, flash::u32, flash::u16>::type) == 4, "Select");
extern "C" __global__ void t(flash::i64* out) { out[0] = sizeof(flash::u16); }
)"},
      {"arch/ptx.cuh", R"(
extern "C" __global__ void t(float* out) {
  const flash::u32 s = flash::smem_u32(flash::dynamic_smem());
  flash::st_shared_f32(s, flash::exp2_fast(out[0]) + flash::log2_fast(out[1]));
  out[2] = flash::ld_shared_f32(s) + flash::f16_to_f32(flash::f32_to_bf16(out[3])) + flash::neg_inf();
  flash::st_shared_u32(s + 4, flash::f32x2_to_f16x2(out[4], out[5]));
}
)"},
      {"arch/cp_async.cuh", R"(
extern "C" __global__ void t(const int4* in) {
  __shared__ int4 buf[32];
  flash::cp_async16(static_cast<flash::u32>(__cvta_generic_to_shared(buf + threadIdx.x)), in + threadIdx.x, true);
  flash::cp_async_commit();
  flash::cp_async_wait<0>();
}
)"},
      {"arch/mma_sm80.cuh", R"(
extern "C" __global__ void t(float* out) {
  flash::u32 a[4];
  flash::ldmatrix_x4(a, threadIdx.x * 16);
  float c[4] = {0, 0, 0, 0};
  flash::mma_16816<true>(c, a, a[0], a[1]);
  out[threadIdx.x] = c[0];
}
)"},
      {"arch/wgmma_sm90.cuh", R"(
extern "C" __global__ void t(float* out) {
  float d[8][4] = {};
  flash::wgmma_fence();
  flash::Wgmma<64, true>::ss<false, false>(d, flash::wgmma_desc(0, 16, 1024), flash::wgmma_desc(1024, 16, 1024), 0);
  flash::wgmma_commit();
  flash::wgmma_wait<0>();
  out[threadIdx.x] = d[0][0];
}
)"},
      {"arch/wgmma_desc.cuh", R"(
struct Tile {
  static constexpr int kBlockBytes = 64 * 128;
};
extern "C" __global__ void t(unsigned long long* out) {
  out[threadIdx.x] = flash::desc_k_major<Tile>(threadIdx.x * 1024, 8, 16) + flash::desc_mn_major<Tile>(0, 16);
}
)"},
      {"arch/fence.cuh", R"(
extern "C" __global__ void t() { flash::fence_async_shared(); }
)"},
      {"arch/atomics.cuh", R"(
extern "C" __global__ void t(float4* out) { flash::red_add_v4(&out[threadIdx.x].x, 1.f, 2.f, 3.f, 4.f); }
)"},
      {"arch/numeric.cuh", R"(
extern "C" __global__ void t(unsigned* out) {
  out[0] = flash::Element16<true>::pack2(1.0f, 2.0f) + flash::Element16<false>::from_float(flash::kLog2e);
}
)"},
      {"arch/mbarrier.cuh", R"(
extern "C" __global__ void t() {
  __shared__ unsigned long long bar;
  const flash::u32 b = static_cast<flash::u32>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) flash::mbarrier_init(b, blockDim.x);
  flash::fence_mbarrier_init();
  __syncthreads();
  flash::mbarrier_arrive(b);
  flash::mbarrier_wait(b, 0);
  if (threadIdx.x == 0) flash::mbarrier_arrive_expect_tx(b, 0);
}
)"},
      {"arch/tma.cuh", R"(
struct Map { alignas(64) unsigned char bytes[128]; };
extern "C" __global__ void t(const __grid_constant__ Map map) {
  flash::tma_prefetch_descriptor(&map);
  flash::tma_load_2d(0, &map, 1024, 0, 0);
  flash::tma_load_3d(0, &map, 1024, 0, 0, 0);
  flash::tma_load_4d(0, &map, 1024, 0, 0, 0, 0);
  flash::tma_store_4d(&map, 0, 0, 0, 0, 0);
  flash::tma_reduce_add_4d(&map, 0, 0, 0, 0, 0);
  flash::tma_store_commit();
  flash::tma_store_wait_read<0>();
}
)"},
      {"arch/named_barrier.cuh", R"(
extern "C" __global__ void t() {
  if (threadIdx.x < 128) flash::named_barrier_arrive(flash::kNamedBarrierFirstFree, 256);
  else flash::named_barrier_sync(flash::kNamedBarrierFirstFree, 256);
}
)"},
      {"arch/warpgroup.cuh", R"(
extern "C" __global__ void __launch_bounds__(384, 1) t(int* out) {
  if (flash::warpgroup_index() == 0) flash::setmaxnreg_dec<40>();
  else flash::setmaxnreg_inc<232>();
  out[threadIdx.x] = flash::warpgroup_index();
}
)"},
      {"tile/smem_tile.cuh", R"(
static_assert(flash::KernelTile<true, 64, 128>::kBytes == 16384, "wgmma tile");
static_assert(flash::SmemTile<64, 96>::kRowElems == 104, "padded tile");
extern "C" __global__ void t(unsigned* out) { out[threadIdx.x] = flash::WgmmaTile<64, 128>::elem(threadIdx.x, 8); }
)"},
      {"tile/copy.cuh", R"(
#include "arch/numeric.cuh"
#include "tile/smem_tile.cuh"
using T = flash::SmemTile<64, 64>;
extern "C" __global__ void t(const flash::u16* in, flash::u16* out) {
  flash::load_tile<T, 128, 59, false>(0, in, 64, 50, threadIdx.x);
  flash::load_tile<T, 128, 64, true>(T::kBytes, in, 64, 50, threadIdx.x);
  struct Rows {
    const flash::u16 *k, *v;
  };
  flash::load_kv_row_pairs<T, 128, 61, false>(0, T::kBytes, [&](int r) { return Rows{in + 64 * r, in + 96 * r}; }, 40,
                                              threadIdx.x);
  float acc[1][8][4] = {};
  flash::store_fragments<flash::Element16<true>, T, true>(0, acc, 0, 0, 0.5f, threadIdx.x % 32);
  flash::store_tile<T, 128, 64, true>(out, 64, 0, 50, threadIdx.x);
  float x[8];
  flash::load_row_chunk<flash::Element16<false>, 59, false>(in, threadIdx.x % 8, x);
  flash::load_row_chunk<flash::Element16<true>, 64, true>(in, threadIdx.x % 8, x);
  flash::copy_row_chunk<59, false>(out, in, threadIdx.x % 8);
  flash::copy_row_chunk<64, true>(out + 64, in, threadIdx.x % 8);
  out[threadIdx.x] = static_cast<flash::u16>(x[0]);
}
)"},
      {"tile/warp_mma.cuh", R"(
#include "tile/smem_tile.cuh"
using T = flash::SmemTile<64, 64>;
extern "C" __global__ void t(float* out) {
  float s[1][8][4];
  flash::zero(s);
  flash::mma_rows_nk<true, 1, 8, 64, T, T>(s, 0, 0, T::kBytes, 0, threadIdx.x % 32);
  float o[1][8][4];
  flash::zero(o);
  flash::mma_regs_kn<false, 1, 8, 8, T>(o, s, 0, 0, threadIdx.x % 32);
  out[threadIdx.x] = o[0][0][0];
}
)"},
      {"tile/warpgroup_mma.cuh", R"(
#include "tile/smem_tile.cuh"
extern "C" __global__ void t(float* out) {
  float d[12][4] = {};
  const flash::u32 a[4] = {1, 2, 3, 4};
  flash::wgmma_fence();
  flash::wgmma_rs_mn_major<true, flash::WgmmaTile<64, 128>, 12>(d, a, 0, 0);  // 96 columns: 64 + 32
  flash::wgmma_commit();
  flash::wgmma_wait<0>();
  out[threadIdx.x] = d[11][3];
}
)"},
      {"params/attention_params.h", R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) { p.lse[0] = p.softmax_scale; }
)"},
      {"params/kernel_traits.cuh", traits(kFwd) + R"(
static_assert(Traits::kThreads == 256 && Traits::kLocal && Traits::kHeadDimCols == 128, "traits");
extern "C" __global__ void t(float* out) { out[0] = Traits::Element::to_float(0x3f80); }
)"},
      {"attention/visibility.cuh", R"(
extern "C" __global__ void t(float* out, int n) {
  const flash::Visibility<true> vis(n, n + 3, 16, 0);
  int lo, hi, b, e;
  vis.key_range(0, 64, lo, hi);
  flash::tile_span<64>(lo, hi, b, e);
  float s[1][8][4] = {};
  if (!vis.tile_visible(0, 64, 0, 64)) flash::mask_scores<true>(s, vis, 0, 0, threadIdx.x % 32);
  flash::mask_query_rows(s, vis, 0, 64, threadIdx.x % 32);
  out[threadIdx.x] = s[0][0][0] + b + e;
}
)"},
      {"attention/softcap.cuh", R"(
extern "C" __global__ void t(float* out) {
  float s[1][4][4] = {}, slope[1][4][4];
  flash::softcap_scores(s, 0.1f, 30.0f);
  flash::softcap_scores_and_slope(s, slope, 0.1f, 30.0f);
  out[threadIdx.x] = s[0][0][0] + slope[0][3][3];
}
)"},
      {"attention/softmax.cuh", R"(
extern "C" __global__ void t(float* out) {
  flash::SoftmaxLedger<1> ledger;
  ledger.init();
  float s[1][8][4] = {}, o[1][16][4] = {}, lse[1][2];
  ledger.update(s, o, 1.4f);
  ledger.finish(o, 1.4f, lse);
  out[threadIdx.x] = lse[0][0] + o[0][0][0];
}
)"},
      {"attention/offsets.cuh", R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, blockIdx.z);
  off.o(blockIdx.y, threadIdx.x)[0] = off.q(blockIdx.y, 0)[off.seqlen_q() + off.seqlen_k()];
  p.lse[off.lse_row(blockIdx.y) + off.accum_row(0)] = 0.0f;
  const flash::SeqOffsets<true> packed(p, blockIdx.z);
  if (!packed.past_queries(0) && !packed.past_accum_rows(0))
    packed.dq(blockIdx.y, threadIdx.x)[0] = packed.k(0, packed.tma_k_row(0))[packed.lse_row(0) + packed.accum_row(1)];
}
)"},
      {"kv_cache/kv_cache_offsets.cuh", R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::KvCacheOffsets<true> paged(p, blockIdx.z);
  const flash::KvCacheOffsets<false> dense(p, blockIdx.z);
  const auto a = paged.kv_rows(blockIdx.y, threadIdx.x);
  const auto b = dense.kv_rows(blockIdx.y, threadIdx.x);
  paged.o(blockIdx.y, 0)[threadIdx.x] = a.k[paged.seqlen_k()] + a.v[0] + b.k[dense.seqlen_k()] + b.v[0];
}
)"},
      {"pipeline/cp_async_pipeline.cuh", R"(
using P = flash::CpAsyncPipeline<3, true>;
extern "C" __global__ void t(const int4* in, int n) {
  __shared__ int4 stages[3][128];
  auto load = [&](int item, int stage) {
    flash::cp_async16(static_cast<flash::u32>(__cvta_generic_to_shared(&stages[stage][threadIdx.x])),
                      in + item * 128 + threadIdx.x, true);
  };
  P::prologue(2, n, load);
  for (int item = 2; item < n; ++item) {
    P::acquire(item, 2, n, load);
    P::release();
  }
  P::drain();
}
)"},
      {"scheduler/single_tile.cuh", R"(
extern "C" __global__ void t(int* out) {
  for (flash::WorkTile w = flash::SingleTileScheduler<true>::first(); w.valid;
       w = flash::SingleTileScheduler<true>::next(w))
    out[w.block + w.head + w.batch] = 1;
}
)"},
      {"fwd/fwd_mainloop_sm90.cuh", traits(kFwdWs) + R"(
using M = flash::FwdMainloopSm90<Traits>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const M m(0);
  if (threadIdx.x == 0) {
    m.init();
    M::RoleState st = m.producer_start(p);
    m.load(p, Traits::Offsets(p, 0), 0, 0, 0, 0, 4, st);
  }
  const flash::Visibility<true> vis(p.seqlen_q, p.seqlen_k, -1, 0);
  M::Accumulator o;
  flash::zero(o);
  M::Ledger ledger;
  ledger.init();
  M::RoleState st = M::consumer_start();
  m.mma(p, vis, 0, 128, 0, 4, 0, o, ledger, st);
  p.lse[threadIdx.x] = o[0][0][0];
}
)"},
      {"fwd/fwd_epilogue_sm90.cuh", traits(kFwdWs) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  const float o[1][16][4] = {};
  const float lse[1][2] = {};
  flash::FwdEpilogueSm90<Traits>::store<Traits::Tile<128, 128>>(p, off, 0, 0, 0, 100, o, lse, 0, 1);
}
)"},
      {"fwd/fwd_kernel_sm90.cuh", traits(kFwdWs) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) { flash::FwdKernelSm90<Traits>::run(p); }
)"},
      {"pipeline/tma_pipeline.cuh", R"(
extern "C" __global__ void t(int* out) {
  const flash::TmaPipeline<2, 2> pipe(0);
  if (threadIdx.x == 0) pipe.init();
  flash::PipelineState st = pipe.producer_start();
  const flash::u32 bar = pipe.producer_acquire(st, 128);
  pipe.consumer_wait(st);
  pipe.consumer_release(st, threadIdx.x == 0);
  st.advance(2);
  const flash::TmaPipeline<2, 2, 32> lanes(64);
  lanes.producer_wait(st);
  lanes.producer_expect(st, 256);
  lanes.producer_arrive(st);
  out[threadIdx.x] = st.index + static_cast<int>(bar);
}
)"},
      // Runtime descriptors: NVRTC 13.0 crashes on a wgmma whose descriptors are constants.
      {"arch/wgmma_sm90_shapes.cuh", R"(
extern "C" __global__ void t(float* out, flash::u64 desc) {
  float d[10][4];
  flash::Wgmma<80, true>::ss<false, false>(d, desc, desc + 2, 0);
  float e[2][4] = {};
  const flash::u32 a[4] = {threadIdx.x, 1, 2, 3};
  flash::Wgmma<16, false>::rs<true>(e, a, desc, 1);
  out[threadIdx.x] = d[0][0] + e[0][0];
}
)"},
      {"fwd/fwd_mainloop.cuh", traits(kFwd) + R"(
using M = flash::FwdMainloop<Traits>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  const M m(off, 0, 0, 100);
  m.load_q(p, off, 0, 0, threadIdx.x);
  m.load_kv(p, off, 0, 0, threadIdx.x);
  const flash::Visibility<true> vis(p.seqlen_q, p.seqlen_k, -1, 0);
  M::Accumulator o;
  flash::zero(o);
  flash::SoftmaxLedger<M::kRT> ledger;
  ledger.init();
  m.consume(p, vis, 0, 0, 0, 0, threadIdx.x % 32, 0.0f, o, ledger);
  p.lse[threadIdx.x] = o[0][0][0];
}
)"},
      {"fwd/fwd_epilogue.cuh", traits(kFwd) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  float o[1][16][4] = {}, lse[1][2] = {};
  flash::FwdEpilogue<Traits>::store<flash::WgmmaTile<128, 128>>(p, off, 0, 0, 0, 100, o, lse, 0, threadIdx.x,
                                                                 threadIdx.x % 32);
}
)"},
      {"arch/grid_dependency.cuh", R"(
extern "C" __global__ void t(float* out) {
  flash::grid_dependency_wait();
  flash::launch_dependents();
  out[threadIdx.x] = 0.0f;
}
)"},
      {"attention/packed_rows.cuh", R"(
extern "C" __global__ void t(int* out) {
  const flash::PackedRows rows{4, 8};
  out[rows.head(threadIdx.x)] = rows.position(threadIdx.x);
}
)"},
      {"attention/lse_merge.cuh", R"(
extern "C" __global__ void t(const float* lse, float* out, int n) {
  flash::LseMerge m;
  for (int i = 0; i < n; ++i) m.add(lse[i]);
  out[threadIdx.x] = flash::LseMerge::weight(lse[threadIdx.x], m.lse());
}
)"},
      {"scheduler/split_kv.cuh", R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p, int* out) {
  for (flash::SplitKvTile w = flash::SplitKvScheduler::first(p); w.valid; w = flash::SplitKvScheduler::next(w))
    out[w.m_block + w.split + w.head_kv + w.batch] = 1;
}
)"},
      {"scheduler/section_grid.cuh", R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p, int* out) {
  const flash::WorkTile w = flash::SectionGridScheduler::first(p);
  if (w.valid) out[w.block + w.head + w.batch] = 1;
}
)"},
      {"scheduler/persistent.cuh", R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p, int* out) {
  using S = flash::StaticPersistentScheduler<128>;
  for (flash::WorkTile w = S::first(p); w.valid; w = S::next(p, w)) out[w.linear] = w.block + w.head + w.batch;
  using Masked = flash::StaticPersistentScheduler<128, true>;
  for (flash::WorkTile w = Masked::first(p); w.valid; w = Masked::next(p, w)) out[w.linear] += w.block;
}
)"},
      {"fwd/splitkv_mainloop.cuh", traits(kSplitKv) + R"(
using M = flash::FwdSplitKvMainloop<Traits>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const M::Offsets off(p, 0);
  const flash::PackedRows rows{4, 0};
  M m(off, 0, rows, 0, 0, threadIdx.x / 32, threadIdx.x % 32);  // load_kv keeps the page lookup ahead
  m.load_q(p, off, rows, 0, 12, threadIdx.x);
  m.load_kv(p, off, 0, 0, threadIdx.x);
  const flash::Visibility<true> vis(p.seqlen_q, p.seqlen_k, -1, 0);
  M::Accumulator o;
  flash::zero(o);
  flash::SoftmaxLedger<M::kRT> ledger;
  ledger.init();
  m.consume(p, vis, 0, 0, 0, 3, threadIdx.x / 32, threadIdx.x % 32, 0.0f, o, ledger);
  p.lse[threadIdx.x] = o[0][0][0];
}
)"},
      {"fwd/splitkv_epilogue.cuh", traits(kSplitKv) + R"(
#include "fwd/splitkv_mainloop.cuh"
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  float o[1][16][4] = {}, lse[1][2] = {};
  flash::FwdSplitKvEpilogue<Traits>::store<flash::FwdSplitKvMainloop<Traits>::Layout>(
      p, off, flash::PackedRows{4, 0}, 0, 0, 12, 1, o, lse, threadIdx.x / 32, threadIdx.x % 32, threadIdx.x);
}
)"},
      {"fwd/fwd_splitkv_kernel.cuh", traits(kSplitKv) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) { flash::FwdSplitKvKernel<Traits>::run(p); }
)"},
      {"attention/rotary.cuh", R"(
#include "arch/numeric.cuh"
using R = flash::Rotary<flash::Element16<true>>;
extern "C" __global__ void t(const flash::u16* cs, const flash::u16* sn, float* out) {
  float x[8], y[8];
  for (int i = 0; i < 8; ++i) x[i] = y[i] = out[i];
  R::rotate_pairs(x, cs, sn, threadIdx.x);
  R::rotate_halves(x, y, cs, sn, threadIdx.x);
  out[threadIdx.x] = x[0] + y[7];
}
)"},
      {"kv_cache/kv_append_kernel.cuh", traits(kAppend) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) { flash::KvAppendKernel<Traits>::run(p); }
)"},
      {"fwd/fwd_combine_kernel.cuh", traits(kCombine) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) { flash::FwdCombineKernel<Traits>::run(p); }
)"},
      {"fwd/fwd_kernel.cuh", traits(kFwd) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) { flash::FwdKernel<Traits>::run(p); }
)"},
      {"bwd/bwd_preprocess_kernel.cuh", traits(kRowwise) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  flash::BwdPreprocessKernel<Traits>::run(p);
}
)"},
      {"bwd/bwd_dq_convert_kernel.cuh", traits(kRowwise) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  flash::BwdDqConvertKernel<Traits>::run(p);
}
)"},
      {"bwd/bwd_dq_mainloop.cuh", traits(kDq) + R"(
using M = flash::BwdDqMainloop<Traits>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  const M m(off, 0, 0, 64);
  m.load_q_do(p, off, 0, 0, threadIdx.x);
  m.load_kv(p, off, 0, 0, threadIdx.x);
  const flash::Visibility<true> vis(p.seqlen_q, p.seqlen_k, -1, 0);
  const float lse[M::kRT][2] = {}, dsum[M::kRT][2] = {};
  M::Accumulator dq;
  flash::zero(dq);
  m.consume(p, vis, 0, 0, 0, 0, threadIdx.x % 32, 0.0f, lse, dsum, dq);
  p.lse[threadIdx.x] = dq[0][0][0];
}
)"},
      {"bwd/bwd_dq_kernel.cuh", traits(kDq) + R"(
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) { flash::BwdDqKernel<Traits>::run(p); }
)"},
      {"bwd/dkdv_layout.cuh", traits(kDkdv90) + R"(
using L = flash::DkdvLayout<Traits, false>;
static_assert(L::kBytes == 2 * 32768 + 2 * 33792 + 16384, "d128 64x128 layout");
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  const L l(0);
  flash::DkdvProducer<Traits, L>::load_kv(p, off, l, 0, 0, 128, threadIdx.x);
  flash::DkdvProducer<Traits, L>::load_stage(p, off, l, 0, 0, 1, threadIdx.x);
  p.lse[threadIdx.x] = flash::DkdvWarpSplit<Traits>(threadIdx.x / 32).warp_row0;
}
)"},
      {"bwd/dkdv_scores.cuh", traits(kDkdv90) + R"(
#include "bwd/dkdv_layout.cuh"
using L = flash::DkdvLayout<Traits, false>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::Visibility<true> vis(p.seqlen_q, p.seqlen_k, -1, 0);
  float s[1][8][4] = {}, dp[1][8][4] = {}, dtanh[1][8][4];
  flash::wgmma_fence();
  flash::wgmma_scores_t<Traits, L>(s[0], 0, 0, 65536);
  flash::wgmma_commit();
  flash::wgmma_wait<0>();
  flash::probs_t<Traits>(s, dtanh, p, vis, 0.0f, 0, 0, 0, 0, threadIdx.x % 32);
  flash::dscores_t<Traits>(dp, s, dtanh, 0, threadIdx.x % 32);
  flash::u32 a[4][4] = {};
  flash::store_t<L::DS, 8>(0, a, 0, threadIdx.x % 32);
  float acc[16][4] = {};
  flash::wgmma_regs_t<Traits, L, 8>(acc, a, 0, 0);
  flash::wgmma_smem_t<Traits, L>(acc, 0, 0, 0);
  p.lse[threadIdx.x] = dp[0][0][0] + acc[0][0];
}
)"},
      {"bwd/dq_accum.cuh", traits(kDkdv90) + R"(
#include "bwd/dkdv_layout.cuh"
using L = flash::DkdvLayout<Traits, false>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const L l(0);
  flash::DqAccumSm90<Traits, L>::accumulate(p.dq_accum, l, threadIdx.x / 32, threadIdx.x % 32);
  flash::DqAccumSm80<Traits, L>::accumulate(p.dq_accum, l, threadIdx.x / 32, threadIdx.x % 32);
}
)"},
      {"bwd/dq_staging.cuh", R"(
#include "bwd/dq_staging.cuh"
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  float dq[8][4];
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) dq[i][j] = p.softmax_scale * (i + j);
  flash::stage_dq_fragments<64>([](int j) { return flash::u32(j * flash::dq_box_bytes(64)); }, dq, 16, threadIdx.x % 32);
  float dqt[10][4];
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 4; ++j) dqt[i][j] = p.softmax_scale * (i - j);
  flash::stage_dq_fragments_t<80>([](int j) { return flash::u32(j * flash::dq_box_bytes(80)); }, dqt, 16,
                                  threadIdx.x % 32);
}
)"},
      {"bwd/dkdv_mainloop_sm90_ws.cuh", dkdv_ws_mainloop_case("DkdvMainloopSm90Ws", kDkdvWs)},
      {"bwd/dkdv_mainloop_sm90_ws_shared_scores.cuh",
       dkdv_ws_mainloop_case("DkdvMainloopSm90WsSharedScores", kDkdvWs256)},
      {"bwd/dkdv_producer_sm90.cuh", traits(kDkdvWs) + R"(
#include "pipeline/tma_pipeline.cuh"
using Pipeline = flash::TmaPipeline<2, 256, 32>;
using Layout = flash::DkdvTmaLayout<flash::DkdvLayout<Traits, false>, Pipeline>;
using Producer = flash::DkdvTmaProducer<Traits, Layout, Pipeline>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  const flash::Visibility<true> vis(p.seqlen_q, p.seqlen_k, -1, 0);
  const flash::DkdvWorkItems<Traits> items(vis, 0, 2, 0, 128);
  const Layout l(0);
  if (threadIdx.x == 0) Producer::init(l);
  Producer::load(p, off, l, 0, 0, items);
}
)"},
      // The kernel with the mainloop its generated source names (the kernel has no default).
      {"bwd/bwd_dkdv_kernel_sm90.cuh", traits(kDkdvWs) + R"(
#include "bwd/dkdv_mainloop_sm90_ws.cuh"
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  flash::BwdDkdvKernelSm90<Traits, flash::DkdvMainloopSm90Ws<Traits>>::run(p);
}
)"},
      {"bwd/dkdv_mainloop_sm80.cuh", dkdv_mainloop_case("DkdvMainloopSm80", kDkdv80)},
      {"bwd/dkdv_mainloop_sm90.cuh", dkdv_mainloop_case("DkdvMainloopSm90", kDkdv90)},
      {"bwd/dkdv_mainloop_sm90_shared_scores.cuh", dkdv_mainloop_case("DkdvMainloopSm90SharedScores", kDkdv256)},
      {"bwd/dkdv_epilogue.cuh", traits(kDkdv90) + R"(
#include "bwd/dkdv_layout.cuh"
using L = flash::DkdvLayout<Traits, false>;
using S = flash::DkdvWarpSplit<Traits>;
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  const flash::DenseOffsets off(p, 0);
  S::Accumulator dk = {}, dv = {};
  flash::DkdvEpilogue<Traits>::store(p, off, L(0), S(threadIdx.x / 32), 0, 0, 100, dk, dv, threadIdx.x,
                                     threadIdx.x % 32);
}
)"},
      // The kernel with a mainloop of the test's own: the kernel asks only for the mainloop's
      // Layout, Split, Pipeline and consume().
      {"bwd/bwd_dkdv_kernel.cuh", traits(kDkdv90) + R"(
#include "pipeline/cp_async_pipeline.cuh"
struct CountingMainloop {
  using Layout = flash::DkdvLayout<Traits, false>;
  using Split = flash::DkdvWarpSplit<Traits>;
  using Pipeline = flash::CpAsyncPipeline<Traits::kStages, true>;
  template <class Vis>
  static __device__ void consume(const FlashAttentionParams&, const flash::DenseOffsets&, const Vis&, const Layout&,
                                 const Split&, int, int, int, int, int, int, int, float, Split::Accumulator& dk,
                                 Split::Accumulator& dv) {
    dk[0][0][0] += 1.0f;
    dv[0][0][0] += 1.0f;
  }
};
extern "C" __global__ void t(const __grid_constant__ FlashAttentionParams p) {
  flash::BwdDkdvKernel<Traits, CountingMainloop>::run(p);
}
)"},
  };
}

TEST(DeviceHeaders, EveryEmbeddedHeaderHasACase) {
  const auto all = cases();
  std::set<std::string> embedded;
  for (const EmbeddedFile& f : embedded_files()) {
    embedded.insert(std::string(f.name));
    EXPECT_TRUE(all.count(std::string(f.name))) << f.name << ": add a case that includes it alone";
  }
  for (const auto& [name, body] : all) EXPECT_TRUE(embedded.count(name)) << name << " is not embedded";
}

TEST(DeviceHeaders, EachCompilesOnItsOwn) {
  for (const auto& [name, body] : cases()) {
    SCOPED_TRACE(name);
    const std::string source = fmt::format("#include \"{}\"\n{}", name, body);
    try {
      const CompileOutput out = compile_source("header_" + std::to_string(std::hash<std::string>{}(name)), source,
                                               Arch::sm_90a, {}, "t");
      EXPECT_FALSE(out.cubin.empty());
    } catch (const Error& e) {
      ADD_FAILURE() << e.what() << "\n--- source ---\n" << source;
    }
  }
}

// The runtime's headers do not leak into a single compile: a program that includes nothing
// cannot use the device library.
TEST(DeviceHeaders, NothingIsIncludedImplicitly) {
  EXPECT_THROW(compile_source("no_include", "extern \"C\" __global__ void t(float* o) { o[0] = flash::neg_inf(); }",
                              Arch::sm_90a),
               Error);
}

}  // namespace
}  // namespace flashgen
