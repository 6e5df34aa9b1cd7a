// --flash-emit-cuda=dir=DIR: the generated CUDA source of every flash.kernel,
// byte for byte what the runtime compiles for the same KernelSpec; with
// cubin=true also the cubin (and PTX) NVRTC makes of it, as the runtime would.
#include "compiler/codegen.h"
#include "flashgen/Dialect/Flash/IR/Dialect.h"
#include "flashgen/Dialect/Flash/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/nvrtc_compiler.h"

namespace mlir::flash {

#define GEN_PASS_DEF_FLASHEMITCUDA
#include "flashgen/Dialect/Flash/Transforms/Passes.h.inc"

namespace {

class EmitCuda : public impl::FlashEmitCudaBase<EmitCuda> {
 public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dir.empty()) {
      module.emitError() << "--flash-emit-cuda needs dir=<directory>";
      return signalPassFailure();
    }
    if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
      module.emitError() << "--flash-emit-cuda: cannot create directory '" << dir << "': " << ec.message();
      return signalPassFailure();
    }
    module.walk([&](KernelOp kernel) {
      if (failed(emit(kernel))) signalPassFailure();
    });
  }

 private:
  LogicalResult emit(KernelOp kernel) {
    const flashgen::KernelSpec spec = kernel.getSpec();
    flashgen::GeneratedSource generated;
    try {
      generated = flashgen::generate_source(spec);
    } catch (const flashgen::Error& e) {
      return kernel.emitOpError() << "generating CUDA source failed: " << e.what();
    }
    if (failed(write(kernel, spec.uri() + ".cu", generated.source))) return failure();
    if (!cubin) return success();

    flashgen::CompiledKernel compiled;
    try {
      compiled = flashgen::compile_kernel(spec, generated, flashgen::CompileOptions::from_environment(ptx));
    } catch (const flashgen::Error& e) {
      return kernel.emitOpError() << e.what();
    }
    if (failed(write(kernel, spec.uri() + ".cubin", compiled.cubin))) return failure();
    if (ptx && failed(write(kernel, spec.uri() + ".ptx", compiled.ptx))) return failure();
    return success();
  }

  LogicalResult write(KernelOp kernel, const std::string& name, const std::string& bytes) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream file(path, ec);
    if (!ec) {
      file << bytes;
      file.close();
    }
    if (ec || file.has_error())
      return kernel.emitOpError() << "cannot write '" << path << "': " << (ec ? ec : file.error()).message();
    return success();
  }
};

}  // namespace
}  // namespace mlir::flash
