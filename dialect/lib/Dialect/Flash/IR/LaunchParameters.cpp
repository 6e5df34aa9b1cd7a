#include "LaunchParameters.h"

#include <fmt/format.h>

#include <cmath>

namespace mlir::flash {

static LogicalResult verifyPositive(Operation* op, const char* name, std::optional<llvm::APFloat> value,
                                    const char* whenAbsent) {
  if (!value) return success();
  const double v = value->convertToDouble();
  if (v > 0 && std::isfinite(v)) return success();
  return op->emitOpError() << name << " must be a positive finite number (absent: " << whenAbsent << "), got "
                           << fmt::format("{}", v);
}

LogicalResult verifyLaunchParameters(Operation* op, std::optional<llvm::ArrayRef<int64_t>> window,
                                     std::optional<llvm::APFloat> softcap, std::optional<llvm::APFloat> softmaxScale) {
  if (window) {
    if (window->size() != 2)
      return op->emitOpError() << "window must be [left, right], got " << window->size()
                               << (window->size() == 1 ? " value" : " values");
    const char* sides[] = {"left", "right"};
    for (int i = 0; i < 2; ++i)
      if ((*window)[i] < -1)
        return op->emitOpError() << "window " << sides[i] << " must be >= 0, or -1 for unbounded, got " << (*window)[i];
  }
  if (failed(verifyPositive(op, "softcap", softcap, "no soft-capping"))) return failure();
  return verifyPositive(op, "softmax_scale", softmaxScale, "1/sqrt(head_dim)");
}

}  // namespace mlir::flash
