// The `flash` dialect: its ops and the link to flashgen's KernelSpec.
#pragma once

#include "compiler/kernel_spec.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "flashgen/Dialect/Flash/IR/FlashOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "flashgen/Dialect/Flash/IR/FlashOps.h.inc"

namespace mlir::flash {

// flashgen's dtype of an element type: f16, bf16, else f32.
flashgen::DType toDType(Type elementType);

}  // namespace mlir::flash
