// Prints MLIR text from compiler/mlir_text.h, for lit tests that feed it to
// flashgen-opt and expect the very same text back.
//   flashgen-mlir-text-sample grid     every valid spec of a grid of passes, archs,
//                                      dtypes, head dims and flags
//   flashgen-mlir-text-sample variant  the kernels of a forward+backward variant
//                                      (what `flashgen dump --emit mlir --pass all` shows)
#include <cstdio>
#include <string_view>

#include "compiler/kernel_selection.h"
#include "compiler/mlir_text.h"

namespace {

std::vector<flashgen::KernelSpec> grid() {
  std::vector<flashgen::KernelSpec> specs;
  for (flashgen::Pass pass : flashgen::kAllPasses)
    for (flashgen::Arch arch : flashgen::kAllArchs)
      for (flashgen::DType dtype : {flashgen::DType::f16, flashgen::DType::bf16})
        for (int head_dim : {40, 128, 256})
          for (int flags = 0; flags < 16; ++flags) {
            flashgen::KernelSpec s;
            s.pass = pass;
            s.arch = arch;
            s.dtype = dtype;
            s.head_dim = head_dim;
            s.block_m = 64;
            s.block_n = 64;
            s.warps = 4;
            s.stages = 1;
            s.causal = flags & 1;
            s.window = flags & 2;
            s.softcap = flags & 4;
            s.deterministic = flags & 8;
            if (s.problems().empty()) specs.push_back(s);
          }
  return specs;
}

std::vector<flashgen::KernelSpec> variant() {
  flashgen::ProblemKey key;
  key.head_dim = 128;
  key.causal = true;
  std::vector<flashgen::KernelSpec> specs = flashgen::select_forward_kernels(key, flashgen::Arch::sm_80);
  for (const flashgen::KernelSpec& s : flashgen::select_backward_kernels(key, flashgen::Arch::sm_80))
    specs.push_back(s);
  return specs;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view mode = argc > 1 ? argv[1] : "";
  if (mode != "grid" && mode != "variant") {
    std::fprintf(stderr, "usage: %s grid|variant\n", argv[0]);
    return 2;
  }
  std::fputs(flashgen::mlir_module(mode == "grid" ? grid() : variant()).c_str(), stdout);
  return 0;
}
