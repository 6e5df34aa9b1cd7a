// A decode step of an inference engine: two sequences whose keys live in a paged cache
// (pages of 3 rows, in an order the engine chose), each attending with one new query to its
// own number of keys (seqused_k). The same ForwardArgs on CUDA buffers runs the split-KV
// kernels, which read the block table and the counts on the GPU. Checked here against the
// dense forward over each sequence's keys.
#include "kv_cache_step.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr std::int64_t kSeqs = 2, kHeadsQ = 4, kHeadsKv = 2, kDim = 16, kPage = 3, kPagesPerSeq = 4;

std::vector<float> normal_values(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& e : x) e = normal(rng);
  return x;
}

}  // namespace

bool paged_decode_step(flashgen::Runtime& rt, unsigned seed) {
  using flashgen::DType;
  using flashgen::Tensor;
  std::mt19937 rng(seed);
  const std::int64_t row = kHeadsKv * kDim, pages = kSeqs * kPagesPerSeq;
  std::vector<float> q = normal_values(kSeqs * kHeadsQ * kDim, rng);
  std::vector<float> k_pages = normal_values(pages * kPage * row, rng), v_pages = normal_values(k_pages.size(), rng);
  // Sequence 0 owns pages 7, 2, 5, 0; sequence 1 owns 1, 6, 3, 4. Keys: 10 and 4.
  std::vector<std::int32_t> block_table{7, 2, 5, 0, 1, 6, 3, 4};
  std::vector<std::int32_t> seqused_k{10, 4};
  std::vector<float> o(q.size()), lse(kSeqs * kHeadsQ);

  flashgen::ForwardArgs a;
  a.q = Tensor::contiguous(q.data(), DType::f32, {kSeqs, 1, kHeadsQ, kDim});
  a.k = Tensor::contiguous(k_pages.data(), DType::f32, {pages, kPage, kHeadsKv, kDim});
  a.v = Tensor::contiguous(v_pages.data(), DType::f32, {pages, kPage, kHeadsKv, kDim});
  a.o = Tensor::contiguous(o.data(), DType::f32, {kSeqs, 1, kHeadsQ, kDim});
  a.lse = Tensor::contiguous3(lse.data(), DType::f32, {kSeqs, kHeadsQ, 1});
  a.block_table = Tensor::contiguous(block_table.data(), DType::i32, {kSeqs, kPagesPerSeq, 1, 1});
  a.block_table.rank = 2;
  a.seqused_k = Tensor::contiguous(seqused_k.data(), DType::i32, {kSeqs, 1, 1, 1});
  a.seqused_k.rank = 1;
  rt.forward(a);

  // The same attention per sequence on its keys copied out of the pages.
  double worst = 0;
  for (std::int64_t s = 0; s < kSeqs; ++s) {
    const std::int64_t keys = seqused_k[s];
    std::vector<float> k(keys * row), v(keys * row), o_dense(kHeadsQ * kDim);
    for (std::int64_t j = 0; j < keys; ++j) {
      const std::int64_t at = (block_table[s * kPagesPerSeq + j / kPage] * kPage + j % kPage) * row;
      for (std::int64_t e = 0; e < row; ++e) k[j * row + e] = k_pages[at + e], v[j * row + e] = v_pages[at + e];
    }
    flashgen::ForwardArgs dense;
    dense.q = Tensor::contiguous(q.data() + s * kHeadsQ * kDim, DType::f32, {1, 1, kHeadsQ, kDim});
    dense.k = Tensor::contiguous(k.data(), DType::f32, {1, keys, kHeadsKv, kDim});
    dense.v = Tensor::contiguous(v.data(), DType::f32, {1, keys, kHeadsKv, kDim});
    dense.o = Tensor::contiguous(o_dense.data(), DType::f32, {1, 1, kHeadsQ, kDim});
    rt.forward(dense);
    for (std::int64_t i = 0; i < kHeadsQ * kDim; ++i)
      worst = std::max(worst, static_cast<double>(std::abs(o[s * kHeadsQ * kDim + i] - o_dense[i])));
  }
  std::printf("paged decode (pages of %d rows, 10 and 4 keys): max |paged - dense| %.2e\n", static_cast<int>(kPage),
              worst);
  return worst < 1e-5;
}
