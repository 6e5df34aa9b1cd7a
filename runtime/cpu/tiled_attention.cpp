// Placeholder until its owner lands the implementation.
#include "runtime/cpu/cpu_attention.h"
namespace flashgen::cpu {
void standard_forward(const ForwardArgs&, const Problem&) { throw Error(Status::unsupported, "cpu backend: not yet available"); }
void standard_backward(const BackwardArgs&, const Problem&) { throw Error(Status::unsupported, "cpu backend: not yet available"); }
void tiled_forward(const ForwardArgs&, const Problem&, int, TileConfig) { throw Error(Status::unsupported, "cpu backend: not yet available"); }
void tiled_backward(const BackwardArgs&, const Problem&, int, TileConfig) { throw Error(Status::unsupported, "cpu backend: not yet available"); }
}  // namespace flashgen::cpu
