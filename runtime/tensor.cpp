// Tensor views of the public API (flashgen.hpp).
#include "flashgen/flashgen.hpp"

namespace flashgen {

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

}  // namespace flashgen
