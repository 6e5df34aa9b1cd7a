// FLASHGEN_DUMP_DIR: every kernel the runtime compiles is also written, stage by
// stage, to <dump dir>/<uri>-<key16>/ (like Triton's kernel dump):
//   kernel.cu        the generated source (stage 1)
//   kernel.ptx       the PTX NVRTC produced (stage 2)
//   kernel.cubin     the machine code (stage 3; disassemble with nvdisasm/cuobjdump)
//   compile.log      NVRTC's log with the ptxas -v report
//   resources.json   spec, parsed resources, NVRTC options and version, compile ms
// and, once per version of the device library, <dump dir>/templates-<digest16>/ with the
// headers kernel.cu includes (nvcc -I<that dir> compiles it as NVRTC did).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/nvrtc_compiler.h"

namespace flashgen {

// Writes the embedded device headers (templates/) under `root`, by the names the generated
// sources include; files already there with the same text are left alone. Throws like below.
void write_device_headers(const std::filesystem::path& root);

// The directory of write_kernel_dump's headers: templates-<first 16 of embedded_files_digest>.
std::string device_headers_dir_name();

// Writes the dump of one compiled kernel; returns its directory.
// Throws Error(internal) naming the path when it cannot be written.
std::filesystem::path write_kernel_dump(const std::filesystem::path& dump_dir, const std::string& entry_name,
                                        const CompiledKernel& kernel, const std::vector<std::string>& nvrtc_flags);

// A disassembler of cubins and its arguments: nvdisasm (--print-code) or cuobjdump (-sass),
// the first found on PATH or in the toolkit's bin directory (pip's nvidia-cuda-nvdisasm once
// its bin directory is on PATH); nullopt where there is none.
struct Disassembler {
  std::filesystem::path tool;
  std::string args;
};
std::optional<Disassembler> find_disassembler();

// The SASS of `kernel`'s cubin (`flashgen dump --emit sass`, the SASS tests); nullopt where no
// disassembler is found. Throws Error(internal) with its output when the tool fails.
std::optional<std::string> disassemble(const CompiledKernel& kernel);

}  // namespace flashgen
