// The passes of the `flash` dialect (declarations generated from Passes.td).
#pragma once

#include "mlir/Pass/Pass.h"

namespace mlir::flash {

#define GEN_PASS_DECL
#include "flashgen/Dialect/Flash/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flashgen/Dialect/Flash/Transforms/Passes.h.inc"

}  // namespace mlir::flash
