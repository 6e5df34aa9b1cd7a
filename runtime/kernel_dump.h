// FLASHGEN_DUMP_DIR: every kernel the runtime compiles is also written, stage by
// stage, to <dump dir>/<uri>-<key16>/ (like Triton's kernel dump):
//   kernel.cu        the generated source (stage 1)
//   kernel.ptx       the PTX NVRTC produced (stage 2)
//   kernel.cubin     the machine code (stage 3; disassemble with nvdisasm/cuobjdump)
//   compile.log      NVRTC's log with the ptxas -v report
//   resources.json   spec, parsed resources, NVRTC options and version, compile ms
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/nvrtc_compiler.h"

namespace flashgen {

// Writes the dump of one compiled kernel; returns its directory.
// Throws Error(internal) naming the path when it cannot be written.
std::filesystem::path write_kernel_dump(const std::filesystem::path& dump_dir, const std::string& entry_name,
                                        const CompiledKernel& kernel, const std::vector<std::string>& nvrtc_flags);

}  // namespace flashgen
