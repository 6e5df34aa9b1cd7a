// The value types every library shares (flashgen/types.hpp).
#include "flashgen/types.hpp"

namespace flashgen {

const char* to_string(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::unsupported: return "unsupported";
    case Status::compile_error: return "compile error";
    case Status::cuda_error: return "CUDA error";
    case Status::out_of_memory: return "out of memory";
    case Status::no_device: return "no device";
    case Status::internal: return "internal error";
  }
  return "unknown status";
}

const char* to_string(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::i32: return "int32";
  }
  return "unknown dtype";
}

std::size_t size_of(DType t) { return t == DType::f32 || t == DType::i32 ? 4 : 2; }

const char* version() { return FLASHGEN_VERSION_STRING; }

}  // namespace flashgen
