// Placeholder until its owner lands the implementation.
#include "runtime/validate.h"
namespace flashgen {
Problem validate_forward(const ForwardArgs&) { throw Error(Status::unsupported, "validate_forward: not yet available"); }
Problem validate_backward(const BackwardArgs&) { throw Error(Status::unsupported, "validate_backward: not yet available"); }
}  // namespace flashgen
