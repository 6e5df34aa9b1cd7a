// Shared memory each pass's kernel allocates, bytes. Must match the layout the
// templates use (templates/*_kernel.cuh); validate() compares it with the arch limit.
#include "compiler/kernel_spec.h"

namespace flashgen {

int KernelSpec::shared_memory_bytes() const {
  const int d = padded_head_dim();
  const int elt = 2;  // fp16/bf16
  switch (pass) {
    case Pass::fwd:  // Q tile + `stages` K and V tiles
      return block_m * d * elt + stages * 2 * block_n * d * elt;
    case Pass::bwd_dkdv:  // K, V tiles + `stages` Q and dO tiles + lse/D rows + P and dS tiles
      return 2 * block_n * d * elt + stages * (2 * block_m * d * elt + 2 * block_m * 4) + 2 * block_m * block_n * elt;
    case Pass::bwd_dq:  // Q, dO tiles + `stages` K and V tiles + dS tile
      return 2 * block_m * d * elt + stages * 2 * block_n * d * elt + block_m * block_n * elt;
    case Pass::bwd_preprocess:
    case Pass::bwd_dq_convert:
      return 0;
  }
  return 0;
}

}  // namespace flashgen
