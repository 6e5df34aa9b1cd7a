// The kernel parameter block shared by host (runtime/) and device (templates/).
// Plain C types only: this header is compiled by g++ and by NVRTC alike, and its
// layout is the ABI between the launcher and every generated kernel.
#ifndef FLASHGEN_ATTENTION_PARAMS_H
#define FLASHGEN_ATTENTION_PARAMS_H

// Strides are in elements. Row = one sequence position.
struct FlashStrides {
  long long batch;
  long long row;
  long long head;
};

// A TMA descriptor: the driver's CUtensorMap (128 bytes, 64-byte aligned), encoded on the
// host (runtime/tensor_maps.cpp) for the kernels that load and store through TMA, opaque
// here. In the __grid_constant__ parameter block its address is what the copies name.
struct FlashTensorMap {
  alignas(64) unsigned long long opaque[16];
};

// The most parts a split-KV decode cuts a key range into (fwd_combine keeps their weights
// in shared memory).
enum { kFlashMaxSplits = 128 };

// The dQ accumulator's and D's rows per sequence are a multiple of this (every pass that
// indexes them without a TMA map's clipping has a block_m dividing it).
enum { kFlashDqRowRounding = 128 };

// The warp-specialised dK/dV kernels stage dQ for the accumulator's TMA reductions in boxes of
// this many fp32 columns (128 bytes: 128-byte swizzled, no bank conflicts on the fragment
// stores) x flash_dq_box_rows(block_m) query rows; the accumulator's map has that box.
enum { kFlashDqBoxCols = 32 };

// The query rows of a dQ box: one warpgroup's dQ part, 64 rows of a 64- or 128-query tile, or
// all 80 of FA3's 80 x 128 tile (whose dQ is split by head-dim columns).
constexpr int flash_dq_box_rows(int block_m) { return block_m == 128 ? 64 : block_m; }

// Where column `col` of a row of the TMA-reduced dQ accumulator (tma_dq_accum) is stored: in
// fragment order, each group of 8 columns holding its even columns first (0 2 4 6 1 3 5 7).
// That is the order stmatrix writes an mma C fragment's fp32 pairs in (bwd/dq_staging.cuh):
// one instruction per 16 x 8 fragment, no bank conflict, no lane exchange. bwd_dq_convert
// reads it back (dq_accum_fragment_order); the atomic dQ paths keep the natural order.
constexpr int flash_dq_accum_position(int col) { return (col & ~7) | ((col & 1) << 2) | ((col & 7) >> 1); }

struct FlashAttentionParams {
  // Forward inputs/outputs (also read by backward).
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // (batch, heads_q, seqlen_q), contiguous
  FlashStrides q_stride, k_stride, v_stride, o_stride;

  // Backward.
  const void* dout;
  void* dq;
  void* dk;
  void* dv;
  FlashStrides dout_stride, dq_stride, dk_stride, dv_stride;
  float* dq_accum;  // fp32 (batch, heads_q, seqlen_q_rounded, head_dim_padded)
  float* dsum;      // D = rowsum(dO * O), fp32 (batch, heads_q, seqlen_q_rounded)

  int batch;
  int seqlen_q;
  int seqlen_k;
  int seqlen_q_rounded;  // seqlen_q rounded up to the dq tile
  int heads_q;
  int heads_kv;
  int head_dim;  // the real head dim; kernels are compiled for a padded one

  float softmax_scale;
  float scale_log2;  // softmax_scale * log2(e), or log2(e) when softcap is on
  float softcap;     // cap value; 0 when off
  int window_left;   // -1: unbounded
  int window_right;  // -1: unbounded (causal sets it to 0)

  // Split-KV decode (fwd_splitkv, then fwd_combine): each (batch, KV head) key range is cut
  // in num_splits parts. With more than one, each part's output, normalised by its own row
  // sum, goes to o_partial (num_splits, batch, heads_q, seqlen_q, head_dim padded to 16) and
  // its lse to lse_partial (num_splits, batch, heads_q, seqlen_q), both fp32; fwd_combine
  // merges them into o and lse. With one, fwd_splitkv writes o and lse itself.
  int num_splits;  // 1..kFlashMaxSplits
  float* o_partial;
  float* lse_partial;

  // TMA descriptors of q, k, v, o, dout as (head_dim, seqlen, heads, batch) boxes of 64
  // columns; filled only for the warp-specialised kernels (KernelSpec::warp_specialized):
  // the forward's q, k, v, o, the dK/dV kernel's q, k, v, dout.
  FlashTensorMap tma_q, tma_k, tma_v, tma_o, tma_do;

  // KV cache (the split-KV forward; kv_cache/kv_cache_offsets.cuh). With per-sequence key
  // counts (seqused_k non-null) sequence b has min(max(seqused_k[b], 0), seqlen_k) keys. A
  // paged cache (kernels with kPaged): k and v are num_pages pages of page_size rows,
  // k_stride.batch (v_stride.batch) apart, and key j of sequence b is row j % page_size of
  // page block_table[b * block_table_stride + j / page_size]. seqlen_k is then the table's
  // width times page_size. (Appended: the fields above keep their offsets in every kernel.)
  const int* seqused_k;
  const int* block_table;
  long long block_table_stride;
  int page_size;
  int num_pages;

  // Packed variable-length sequences (kernels with kVarlen; attention/offsets.cuh,
  // VarlenOffsets). Sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q, o, dout and
  // dq and rows [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k, v, dk and dv, clamped to the
  // total_q (total_k) packed rows and to seqlen_q (seqlen_k) rows, which hold max_seqlen_q
  // (max_seqlen_k). The strides' batch members are 0; lse is (heads_q, total_q); the dQ
  // accumulator and D hold total_q + kFlashDqRowRounding * batch rows per head, sequence b's
  // from cu_seqlens_q[b] + kFlashDqRowRounding * b. (Appended, as the KV cache's fields.)
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  int total_q;
  int total_k;

  // KV append (kv_append; kv_cache/kv_append_kernel.cuh). Row i of sequence b of k_new and
  // v_new (batch, seqlen_new, heads_kv, head_dim) goes to position cache_seqlens[b] + i of the
  // caches k_cache and v_cache: (batch, seqlen_k, heads_kv, head_dim) with k_stride and
  // v_stride or, kPaged, pages as the KV cache's above (block_table, page_size, num_pages).
  // Positions outside [0, seqlen_k) and page entries outside [0, num_pages) are not written.
  // With rotary_dim > 0 (a multiple of 16) the first rotary_dim columns of each new key are
  // rotated by the angles of its position: row t of rotary_cos and rotary_sin (rotary_rows
  // rows of rotary_dim / 2, rotary_stride apart), pairs (2j, 2j + 1) when rotary_interleaved,
  // else (j, j + rotary_dim / 2); and q (batch, seqlen_q, heads_q, head_dim), when not null, is
  // rotated into o (which may be q itself) at positions cache_seqlens[b] + i
  // (rotary_q_consecutive) or cache_seqlens[b]; a query position outside [0, rotary_rows)
  // gives NaN. kVarlen: the new rows are packed, total_k of them, sequence b's being rows
  // [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k_new, v_new and q (whose strides' batch members
  // are 0); rows outside every sequence are not written. (Appended, as the fields above.)
  const void* k_new;
  const void* v_new;
  FlashStrides k_new_stride, v_new_stride;
  void* k_cache;
  void* v_cache;
  const int* cache_seqlens;
  int seqlen_new;
  int rotary_dim;
  int rotary_interleaved;
  int rotary_q_consecutive;
  int rotary_rows;
  long long rotary_stride;
  const void* rotary_cos;
  const void* rotary_sin;

  // The dQ accumulator as a TMA destination (the warp-specialised dK/dV kernel, unless
  // deterministic): dq_accum_rows rows of head_dim_padded floats (the rows accum_row in
  // attention/offsets.cuh indexes) in planes (accum_tma_coords there), reduced into in
  // 128-byte swizzled boxes of kFlashDqBoxCols x flash_dq_box_rows(block_m), whose columns
  // past the row and rows past the plane are clipped. (Appended.)
  FlashTensorMap tma_dq_accum;
  long long dq_accum_rows;

  // The order of a single-tile grid's CTAs (scheduler/single_tile.cuh): with tile_section > 1
  // the (head, batch) slices go in sections of that many, and within a section every slice's
  // first block precedes any slice's second, so the heaviest tiles of a causal mask all start
  // first while a section's shared inputs fit in L2; 0 or 1: the grid's own order, blocks
  // fastest. Set by the launch plan (runtime/launch_plan.cpp). (Appended.)
  int tile_section;

  // 1: the dQ accumulator is in fragment order (flash_dq_accum_position), as the warp-specialised
  // dK/dV kernels reduce it through tma_dq_accum; 0: natural order. Read by bwd_dq_convert; set
  // by the launch plan from the backward's dK/dV kernel. (Appended.)
  int dq_accum_fragment_order;

  // Query heads per KV head (heads_q / heads_kv: GQA's group), divided once on the host. A
  // parameter ptxas reloads where it needs it: as a division's result, a register held from
  // the prologue into the warp-specialised roles, the sm_90a d96 causal dK/dV kernel spilled
  // it. (Appended.)
  int heads_per_kv;
};

#endif
