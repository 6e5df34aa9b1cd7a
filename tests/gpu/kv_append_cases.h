// The KV-append cases of the kernel tests (emulator and GPU): the emulator's build emits
// exactly the kernels these select (emit_emulated_kernels), so both sides share this list.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "flashgen/flashgen.hpp"

namespace flashgen::test {

struct KvAppendCase {
  int head_dim;
  DType dtype;
  int batch, seqlen_new, heads_kv, capacity;
  int page_size;   // 0: a dense cache
  int rotary_dim;  // 0: none
  bool interleaved;
  int heads_q, seqlen_q;  // 0: q not rotated
  bool q_in_place;
  bool consecutive;   // q rows at consecutive positions
  bool out_of_range;  // some positions past the cache and (paged) a page entry outside it: not written
  // Packed new rows (KvAppendArgs::cu_seqlens): sequence b has packed_length(seqlen_new, b) of
  // them (one sequence none), two spare rows after the last; q packed the same way.
  bool packed = false;
};

inline int packed_length(int bound, int b) { return b == 1 ? 0 : bound - (bound * b) / 5; }

inline std::vector<KvAppendCase> kv_append_cases() {
  return {
      {128, DType::bf16, 3, 1, 2, 40, 0, 0, false, 0, 0, false, false, false},
      {128, DType::f16, 2, 5, 2, 64, 16, 64, false, 4, 5, true, true, false},
      {64, DType::bf16, 3, 3, 1, 37, 1, 32, true, 2, 3, false, true, true},
      {59, DType::f16, 2, 4, 2, 50, 0, 48, false, 4, 1, true, false, true},
      {256, DType::bf16, 2, 2, 1, 300, 256, 256, true, 2, 2, false, true, false},
      {80, DType::f16, 4, 7, 1, 33, 7, 16, false, 3, 7, false, true, true},
      {64, DType::bf16, 4, 9, 2, 48, 16, 32, false, 4, 0, false, true, true, true},
      {72, DType::f16, 3, 20, 1, 64, 0, 16, true, 2, 0, true, false, false, true},
      {128, DType::bf16, 5, 6, 2, 30, 0, 0, false, 0, 0, false, false, false, true},
  };
}

// Positions per sequence: `capacity`, or with pages the whole pages that hold it.
inline int capacity_of(const KvAppendCase& c) {
  return c.page_size ? (c.capacity + c.page_size - 1) / c.page_size * c.page_size : c.capacity;
}

inline std::string name_of(const KvAppendCase& c);
inline void PrintTo(const KvAppendCase& c, std::ostream* os) { *os << name_of(c); }

inline std::string name_of(const KvAppendCase& c) {
  return "d" + std::to_string(c.head_dim) + (c.dtype == DType::bf16 ? "_bf16" : "_fp16") + "_b" +
         std::to_string(c.batch) + "_new" + std::to_string(c.seqlen_new) + "_cap" + std::to_string(c.capacity) +
         (c.page_size ? "_page" + std::to_string(c.page_size) : "") +
         (c.rotary_dim ? "_rot" + std::to_string(c.rotary_dim) + (c.interleaved ? "i" : "h") : "") +
         (c.heads_q ? std::string("_q") + (c.q_in_place ? "inplace" : "") + (c.consecutive ? "" : "_same") : "") +
         (c.out_of_range ? "_outside" : "") + (c.packed ? "_packed" : "");
}

}  // namespace flashgen::test
