// Placeholder until its owner lands the implementation.
#include "compiler/codegen.h"
namespace flashgen {
GeneratedSource generate_source(const KernelSpec& spec) { spec.validate(); throw Error(Status::unsupported, "codegen: not yet available for " + spec.uri()); }
}  // namespace flashgen
