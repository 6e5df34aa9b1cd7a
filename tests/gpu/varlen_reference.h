// The oracle of packed variable-length sequences for the kernel tests (GPU and emulator): each
// sequence through the dense fp64 oracle (cpu::standard_forward_f64 / standard_backward_f64)
// and through standard attention in the input precision (FlashAttention's "pt"), scattered
// back into the packed layout. Nothing here shares code with the backends' offsets.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "input_precision_reference.h"
#include "runtime/cpu/cpu_attention.h"
#include "runtime/validate.h"

namespace flashgen::test {

// Packed (rows, heads, head_dim) results over the rows [0, cu.back()) the sequences cover;
// lse (heads_q, covered query rows). Sequences without queries or keys hold o = dq = dk = dv
// = 0 and lse = -inf.
struct PackedReference {
  std::vector<double> o, lse, dq, dk, dv;
  std::vector<float> pt_o, pt_dq, pt_dk, pt_dv;
};

// `one` carries the heads, head_dim, dtype and resolved options (softmax_scale set; causal
// folded into window_right); q, dout (total_q rows) and k, v (total_k rows) hold values
// representable in its dtype.
inline PackedReference packed_reference(Problem one, const std::vector<int>& cu_q, const std::vector<int>& cu_k,
                                        const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, const std::vector<float>& dout, int threads) {
  const std::int64_t qrow = one.heads_q * one.head_dim, krow = one.heads_kv * one.head_dim;
  const std::int64_t used_q = cu_q.back(), used_k = cu_k.back();
  PackedReference r;
  r.o.assign(used_q * qrow, 0.0), r.dq.assign(used_q * qrow, 0.0);
  r.dk.assign(used_k * krow, 0.0), r.dv.assign(used_k * krow, 0.0);
  r.lse.assign(one.heads_q * used_q, -INFINITY);
  r.pt_o.assign(r.o.size(), 0.0f), r.pt_dq.assign(r.dq.size(), 0.0f);
  r.pt_dk.assign(r.dk.size(), 0.0f), r.pt_dv.assign(r.dv.size(), 0.0f);
  one.batch = 1;
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const int lq = cu_q[b + 1] - cu_q[b], lk = cu_k[b + 1] - cu_k[b];
    if (lq == 0 || lk == 0) continue;
    one.seqlen_q = lq;
    one.seqlen_k = lk;
    const auto rows = [](const std::vector<float>& x, std::int64_t from, std::int64_t n) {
      return std::vector<float>(x.begin() + from, x.begin() + from + n);
    };
    const std::vector<float> qs = rows(q, cu_q[b] * qrow, lq * qrow), dos = rows(dout, cu_q[b] * qrow, lq * qrow);
    const std::vector<float> ks = rows(k, cu_k[b] * krow, lk * krow), vs = rows(v, cu_k[b] * krow, lk * krow);
    const std::vector<double> q64(qs.begin(), qs.end()), k64(ks.begin(), ks.end()), v64(vs.begin(), vs.end()),
        do64(dos.begin(), dos.end());
    const cpu::Fp64Outputs f = cpu::standard_forward_f64(one, q64, k64, v64, threads);
    const cpu::Fp64Gradients g = cpu::standard_backward_f64(one, q64, k64, v64, do64, threads);
    const PtResult pt = input_precision_attention(one, qs, ks, vs, dos, threads);
    std::copy(f.o.begin(), f.o.end(), r.o.begin() + cu_q[b] * qrow);
    std::copy(g.dq.begin(), g.dq.end(), r.dq.begin() + cu_q[b] * qrow);
    std::copy(g.dk.begin(), g.dk.end(), r.dk.begin() + cu_k[b] * krow);
    std::copy(g.dv.begin(), g.dv.end(), r.dv.begin() + cu_k[b] * krow);
    std::copy(pt.o.begin(), pt.o.end(), r.pt_o.begin() + cu_q[b] * qrow);
    std::copy(pt.dq.begin(), pt.dq.end(), r.pt_dq.begin() + cu_q[b] * qrow);
    std::copy(pt.dk.begin(), pt.dk.end(), r.pt_dk.begin() + cu_k[b] * krow);
    std::copy(pt.dv.begin(), pt.dv.end(), r.pt_dv.begin() + cu_k[b] * krow);
    for (std::int64_t h = 0; h < one.heads_q; ++h)
      for (int i = 0; i < lq; ++i) r.lse[h * used_q + cu_q[b] + i] = f.lse[h * lq + i];
  }
  return r;
}

}  // namespace flashgen::test
