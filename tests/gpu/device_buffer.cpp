#include "device_buffer.h"

#include <utility>

#include "runtime/cuda_driver.h"

namespace flashgen::test {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  check_cuda(cuda_driver().cuMemAlloc(&ptr_, bytes ? bytes : 1), "cuMemAlloc (test buffer)");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cuda_driver().cuMemFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  check_cuda(cuda_driver().cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD (test buffer)");
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  check_cuda(cuda_driver().cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH (test buffer)");
}

void DeviceBuffer::fill_nan() {
  const std::vector<unsigned char> poison(bytes_, 0xff);
  upload(poison.data(), bytes_);
}

}  // namespace flashgen::test
