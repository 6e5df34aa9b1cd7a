// Checks of the values that do not change a kernel's code (window sizes, the
// softcap value, the softmax scale), shared by the problem ops and flash.launch.
#pragma once

#include <optional>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/APFloat.h"
#include "mlir/IR/Operation.h"

namespace mlir::flash {

LogicalResult verifyLaunchParameters(Operation* op, std::optional<llvm::ArrayRef<int64_t>> window,
                                     std::optional<llvm::APFloat> softcap, std::optional<llvm::APFloat> softmaxScale);

}  // namespace mlir::flash
