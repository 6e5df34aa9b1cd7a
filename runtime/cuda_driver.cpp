// Placeholder until its owner lands the implementation.
#include "runtime/cuda_driver.h"
#include "flashgen/flashgen.hpp"
namespace flashgen {
const CudaDriver& cuda_driver() { throw Error(Status::no_device, "no CUDA driver: not yet available"); }
bool cuda_available() { return false; }
void check_cuda(CUresult r, const char* what, const std::string&) { if (r != CUDA_SUCCESS) throw Error(Status::cuda_error, what); }
CUcontext ensure_context(int) { cuda_driver(); return nullptr; }
}  // namespace flashgen
