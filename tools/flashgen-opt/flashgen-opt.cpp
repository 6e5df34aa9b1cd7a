// flashgen-opt: mlir-opt for the `flash` dialect (MlirOptMain + a registry).
//   flashgen-opt attention.mlir --canonicalize --flash-select-kernels=arch=sm_90a
//   flashgen-opt kernels.mlir --flash-emit-cuda=dir=out/
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "flashgen/Dialect/Flash/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::flash::FlashDialect, mlir::func::FuncDialect>();
  mlir::flash::registerFlashPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "flashgen-opt: the flash attention dialect and its passes\n", registry));
}
