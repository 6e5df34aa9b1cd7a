// The decode mainloop (split-KV forward): one tile of GQA-packed query rows (position x
// head of one KV head, attention/packed_rows.cuh) against one split of the keys. Decode is
// a read of K and V at memory bandwidth, so the CTA keeps a deep cp.async ring of K/V tiles
// and its warps do not share rows: each warp owns every row of the tile and a kBlockN /
// kWarps slice of each key tile, with its own softmax ledger; the epilogue merges the warps.
// That needs no barrier but the ring's one per tile, and each K/V byte is read once. Tiles of
// more rows (speculative decoding: 16 positions x the group) split them in row groups too:
// the warps are kRowGroups x kKeySlices, each owning kWarpRows rows and one key slice
// (KernelSpec::decode_warp_rows() is the host's side of the split).
#pragma once

#include "kv_cache/kv_cache_offsets.cuh"
#include "attention/packed_rows.cuh"
#include "attention/softcap.cuh"
#include "attention/softmax.cuh"
#include "attention/visibility.cuh"
#include "params/kernel_traits.cuh"
#include "pipeline/cp_async_pipeline.cuh"
#include "tile/copy.cuh"
#include "tile/warp_mma.cuh"

namespace flash {

template <class Cfg>
struct FwdSplitKvMainloop {
  using Offsets = KvCacheOffsets<Cfg::kPaged, Cfg::kVarlen>;
  static_assert(!Cfg::kWgmma, "mma.sync: each warp multiplies all rows of the tile by its slice of keys");
  static constexpr int kKeySlices = Cfg::kDecodeKeySlices;  // the host's split (KernelSpec::decode_key_slices)
  static constexpr int kRowGroups = Cfg::kWarps / kKeySlices;
  static constexpr int kWarpRows = Cfg::kBlockM / kRowGroups;
  static constexpr int kWarpKeys = Cfg::kBlockN / kKeySlices;  // keys of a K/V tile per warp
  static constexpr int kRT = kWarpRows / 16;
  static constexpr int kNT = kWarpKeys / 8;
  static constexpr int kDT = Cfg::kHeadDimPadded / 8;
  static_assert(kRowGroups * kKeySlices == Cfg::kWarps && kWarpRows * kRowGroups == Cfg::kBlockM &&
                    kWarpRows % 16 == 0 && kWarpKeys % 16 == 0,
                "warps = row groups x key slices; whole 16-row slices and 16-key mma k-steps per warp");

  // The rows (within the tile) and the keys (within a K/V tile) of a warp.
  // (With one row group the rows are a constant 0: ptxas then keeps Q's fragment addresses
  // warp-independent, 16 registers fewer at d128.)
  static __device__ __forceinline__ int warp_row0(int warp) {
    return kRowGroups == 1 ? 0 : warp / kKeySlices * kWarpRows;
  }
  static __device__ __forceinline__ int warp_key0(int warp) {
    return (kRowGroups == 1 ? warp : warp % kKeySlices) * kWarpKeys;
  }

  // Shared memory: the Q tile, then kStages x (K tile, V tile); after the loop the same bytes
  // hold each warp's O (fp32, rows padded by 8 floats against bank conflicts) and lse rows
  // for the merge (FwdSplitKvEpilogue).
  struct Layout {
    static constexpr int kKeySlices = FwdSplitKvMainloop::kKeySlices;
    static constexpr int kWarpRows = FwdSplitKvMainloop::kWarpRows;
    using Q = typename Cfg::template Tile<Cfg::kBlockM, Cfg::kHeadDimCols>;
    using KV = typename Cfg::template Tile<Cfg::kBlockN, Cfg::kHeadDimCols>;
    static constexpr int kStageBytes = 2 * KV::kBytes;  // K then V
    static constexpr int kRingBytes = Q::kBytes + Cfg::kStages * kStageBytes;
    static constexpr int kMergeRowFloats = Cfg::kHeadDimPadded + 8;
    static constexpr int kMergeOBytes = Cfg::kWarps * kWarpRows * kMergeRowFloats * 4;
    static constexpr int kMergeBytes = kMergeOBytes + Cfg::kWarps * kWarpRows * 4;
    static constexpr int kBytes = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;

    // Row `row` (of the warp's kWarpRows) of a warp's O, and its lse.
    static __device__ __forceinline__ u32 merge_o(u32 smem, int warp, int row, int col) {
      return smem + 4 * ((warp * kWarpRows + row) * kMergeRowFloats + col);
    }
    static __device__ __forceinline__ u32 merge_lse(u32 smem, int warp, int row) {
      return smem + kMergeOBytes + 4 * (warp * kWarpRows + row);
    }
  };
  using Pipeline = CpAsyncPipeline<Cfg::kStages, false>;
  using Accumulator = float[kRT][kDT][4];

  // Paged caches whose tile rows the warps' lanes can name (WarpRowOrder): each lane looks up
  // its row's page one K/V tile ahead, so the block table's latency hides under a tile's
  // math instead of sitting between the ring's barrier and the tile's cp.async.
  using KvRowOrder = WarpRowOrder<typename Layout::KV, Cfg::kThreads>;
  static constexpr bool kPagesAhead = Cfg::kPaged && Cfg::kVecLoad && KvRowOrder::kApplies;

  u32 s_q, s_kv;
  const u16 *k, *v;  // dense caches: row 0 of the KV head
  int h_kv;
  int pos[kRT][2];  // query positions of this thread's C-fragment rows (the mask's rows)
  PagePosition ahead{0, 0};  // paged: this lane's row of K/V tile ahead_tile (pages of whole tiles: its first row)
  int ahead_tile = -1;
#ifdef FLASHGEN_PAGED_WHOLE_TILES
  int ahead_slot = 0;  // pages of whole tiles: the block-table slot of `ahead`
#endif

  __device__ __forceinline__ FwdSplitKvMainloop(const Offsets& off, u32 smem, const PackedRows& packed, int h_kv,
                                                int r0, int warp, int lane)
      : s_q(smem), s_kv(smem + Layout::Q::kBytes), k(off.k(h_kv, 0)), v(off.v(h_kv, 0)), h_kv(h_kv) {
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) pos[mt][h] = packed.position(r0 + warp_row0(warp) + 16 * mt + (lane >> 2) + 8 * h);
  }

  // Producer: the tile's rows r0.. (rows_q of them), gathered from their heads and positions.
  __device__ __forceinline__ void load_q(const FlashAttentionParams& p, const Offsets& off,
                                         const PackedRows& packed, int r0, int rows_q, int tid) const {
    load_rows<typename Layout::Q, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(
        s_q, [&](int r) { return off.q(packed.head(r0 + r), packed.position(r0 + r)); }, rows_q, tid);
    cp_async_commit();
  }

  // Paged: the place of row `row` of K/V tile n_block, looked up a tile ahead by the previous
  // call (the tiles come in order), and the same row of the next tile looked up for the next.
  __device__ __forceinline__ PagePosition row_page_ahead(const Offsets& off, int n_block, int row) {
    const int n0 = n_block * Cfg::kBlockN;
    const PagePosition at = ahead_tile == n_block ? ahead : off.key_page(n0 + row);
    ahead = off.key_page(n0 + Cfg::kBlockN + row);
    ahead_tile = n_block + 1;
    return at;
  }

  // Producer: K/V tile n_block into `stage` (all threads). A paged cache gathers the tile's
  // rows from their pages; rows past the keys are zero-filled and name no page.
  // The tiles are loaded in order (n_block, n_block + 1, ...), so the lookup ahead is the next one's.
  __device__ __forceinline__ void load_kv(const FlashAttentionParams& p, const Offsets& off, int n_block,
                                          int stage, int tid) {
    const int n0 = n_block * Cfg::kBlockN;
    const int rows_valid = off.seqlen_k() - n0;
    const u32 s_k = s_kv + stage * Layout::kStageBytes;
#ifdef FLASHGEN_PAGED_WHOLE_TILES  // timed (+4-5 % at page 256), not yet through the GPU tests: docs/perf-notes.md, "Session 26"
    if constexpr (Cfg::kPaged) {
      // Pages of whole tiles (page_size a multiple of kBlockN, the same for every CTA): the
      // tile is kBlockN consecutive rows of one page, copied as a dense tile from there. One
      // block-table lookup per tile (every thread the same entry, a tile ahead) instead of
      // the rows' gather, whose per-row addresses and shuffles dense caches do without. The
      // 8 x 16 decode at page 256 on an H100: 210-214 against 218-223 us on 64-key tiles, 201
      // against 202-204 on 128-key tiles (docs/perf-notes.md, "Session 26").
      if (p.page_size % Cfg::kBlockN == 0) {
        // The first tile divides; each next one is the next kBlockN rows of the page or row 0
        // of the next slot's page, looked up only when it holds keys.
        if (ahead_tile != n_block) {  // n0 < seqlen_k: a loaded tile holds keys
          ahead_slot = n0 / p.page_size;
          ahead = {off.slot_page(ahead_slot), n0 - ahead_slot * p.page_size};
        }
        const PagePosition at = ahead;
        if (at.row + Cfg::kBlockN < p.page_size) {
          ahead.row += Cfg::kBlockN;
        } else if (n0 + Cfg::kBlockN < off.seqlen_k()) {
          ahead = {off.slot_page(++ahead_slot), 0};
        }
        ahead_tile = n_block + 1;
        const auto rows = off.kv_rows_at(h_kv, at);
        load_kv_tiles<typename Layout::KV, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(
            s_k, rows.k, p.k_stride.row, rows.v, p.v_stride.row, 0, rows_valid, tid);
        return;
      }
    }
#endif
    if constexpr (kPagesAhead) {
      const PagePosition at = row_page_ahead(off, n_block, KvRowOrder::row(tid >> 5, tid & 31));
      using KV = typename Layout::KV;
      load_kv_rows_by_lane<KV, Cfg::kThreads, Cfg::kHeadDim>(
          s_k, s_k + KV::kBytes, at, [&](PagePosition a) { return off.kv_rows_at(h_kv, a); }, rows_valid, tid);
    } else if constexpr (Cfg::kPaged) {
      using KV = typename Layout::KV;
      load_kv_row_pairs<KV, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(
          s_k, s_k + KV::kBytes, [&](int r) { return off.kv_rows(h_kv, n0 + r); }, rows_valid, tid);
    } else {
      load_kv_tiles<typename Layout::KV, Cfg::kThreads, Cfg::kHeadDim, Cfg::kVecLoad>(
          s_k, k, p.k_stride.row, v, p.v_stride.row, n0, rows_valid, tid);
    }
  }

  // Consumer: the warp's slice of K/V tile n_block (in `stage`) folded into its O and ledger.
  // Queries [q_lo, q_hi) are the positions the tile's rows hold.
  template <class Vis>
  __device__ __forceinline__ void consume(const FlashAttentionParams& p, const Vis& vis, int stage, int n_block,
                                          int q_lo, int q_hi, int warp, int lane, float softcap_pre,
                                          Accumulator& acc_o, SoftmaxLedger<kRT>& ledger) const {
    using L = Layout;
    const u32 s_k = s_kv + stage * L::kStageBytes;
    const u32 s_v = s_k + L::KV::kBytes;
    const int key0 = warp_key0(warp);  // within the tile
    const int n0 = n_block * Cfg::kBlockN + key0;

    float s[kRT][kNT][4];
    zero(s);
    mma_rows_nk<Cfg::kIsBf16, kRT, kNT, Cfg::kHeadDimPadded, typename L::Q, typename L::KV>(s, s_q, warp_row0(warp), s_k,
                                                                                        key0, lane);
    if constexpr (Cfg::kSoftcap) softcap_scores(s, softcap_pre, p.softcap);
    if (!vis.tile_visible(q_lo, q_hi, n0, n0 + kWarpKeys)) mask_scores_at<true>(s, vis, pos, n0, lane);
    ledger.update(s, acc_o, p.scale_log2);

    u32 a[kRT][kNT / 2][4];
#pragma unroll
    for (int mt = 0; mt < kRT; ++mt)
#pragma unroll
      for (int kk = 0; kk < kNT / 2; ++kk) c_to_a<Cfg::kIsBf16, kNT>(a[mt][kk], s[mt], kk);
    mma_frags_kn<Cfg::kIsBf16, kRT, kNT / 2, kDT, typename L::KV>(acc_o, a, s_v, key0, 0, lane);
  }
};

}  // namespace flash
