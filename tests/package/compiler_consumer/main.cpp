// Generates the CUDA source of one forward kernel through the installed flashgen::compiler
// and checks that it defines the kernel the spec names. Prints the name and the size.
#include <compiler/codegen.h>
#include <compiler/kernel_spec.h>

#include <cstdio>
#include <string>

int main() {
  flashgen::KernelSpec spec;
  spec.pass = flashgen::Pass::fwd;
  spec.head_dim = 64;
  spec.dtype = flashgen::DType::bf16;
  spec.causal = true;
  spec.arch = flashgen::Arch::sm_90;
  try {
    const flashgen::GeneratedSource generated = flashgen::generate_source(spec);
    if (generated.kernel_name != spec.uri()) {
      std::fprintf(stderr, "kernel_name is '%s', expected the spec's URI '%s'\n", generated.kernel_name.c_str(),
                   spec.uri().c_str());
      return 1;
    }
    // The entry point: `__global__ void ... <name>(`.
    if (generated.source.find("__global__") == std::string::npos ||
        generated.source.find(generated.kernel_name + "(") == std::string::npos) {
      std::fprintf(stderr, "the generated source (%zu bytes) does not define the kernel '%s'\n",
                   generated.source.size(), generated.kernel_name.c_str());
      return 1;
    }
    std::printf("%s: %zu bytes of CUDA source\n", generated.kernel_name.c_str(), generated.source.size());
  } catch (const flashgen::Error& e) {
    std::fprintf(stderr, "flashgen error: %s\n", e.what());
    return 1;
  }
  return 0;
}
