// The public value types shared by every library (flashgen.hpp).
#include <cstdio>

#include "flashgen/flashgen.hpp"

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
  }
  return "unknown dtype";
}

std::size_t size_of(DType t) { return t == DType::f32 ? 4 : 2; }

Tensor Tensor::contiguous(void* data, DType dtype, std::array<std::int64_t, 4> shape, int device) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.rank = 4;
  t.shape = shape;
  t.stride = {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
  return t;
}

Tensor Tensor::contiguous3(void* data, DType dtype, std::array<std::int64_t, 3> shape, int device) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.rank = 3;
  t.shape = {shape[0], shape[1], shape[2], 1};
  t.stride = {shape[1] * shape[2], shape[2], 1, 1};
  return t;
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

const char* version() { return FLASHGEN_VERSION_STRING; }

}  // namespace flashgen
