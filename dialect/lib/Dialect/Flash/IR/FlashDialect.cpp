// Registration of the `flash` dialect and the TableGen'd definitions.
#include "flashgen/Dialect/Flash/IR/Dialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"

#include "flashgen/Dialect/Flash/IR/FlashOpsDialect.cpp.inc"

#define GET_OP_CLASSES
#include "flashgen/Dialect/Flash/IR/FlashOps.cpp.inc"

namespace mlir::flash {

void FlashDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "flashgen/Dialect/Flash/IR/FlashOps.cpp.inc"
      >();
}

}  // namespace mlir::flash
