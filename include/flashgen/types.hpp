// The value types every flashgen library shares: status codes, the error they travel
// in, element types and the version. The compiler library (KernelSpec -> source) needs
// these and nothing else of the runtime's API; flashgen.hpp includes this header.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace flashgen {

// Status codes; the numeric values are the C ABI's (flashgen.h).
enum class Status : int {
  ok = 0,
  invalid_argument = 1,
  unsupported = 2,
  compile_error = 3,
  cuda_error = 4,
  out_of_memory = 5,
  no_device = 6,
  internal = 7,
};
const char* to_string(Status s);

// Every failure inside flashgen is an Error carrying a status and a message that
// names the argument, the value and what was expected.
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const { return status_; }

 private:
  Status status_;
};

// Element types. i32 is for index tensors only (a paged cache's block_table, seqused_k).
enum class DType : int { f32 = 0, f16 = 1, bf16 = 2, i32 = 3 };
const char* to_string(DType t);
std::size_t size_of(DType t);

// "MAJOR.MINOR.PATCH"
const char* version();

}  // namespace flashgen
