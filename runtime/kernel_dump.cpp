#include "runtime/kernel_dump.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "runtime/kernel_json.h"

namespace flashgen {

namespace {

void write_text(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw Error(Status::internal, fmt::format("kernel dump: writing {} failed: {}", path.string(), std::strerror(errno)));
}

}  // namespace

std::filesystem::path write_kernel_dump(const std::filesystem::path& dump_dir, const std::string& entry_name,
                                        const CompiledKernel& kernel, const std::vector<std::string>& nvrtc_flags) {
  const std::filesystem::path dir = dump_dir / entry_name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(Status::internal, fmt::format("kernel dump: cannot create {}: {}", dir.string(), ec.message()));

  write_text(dir / "kernel.cu", kernel.source);
  write_text(dir / "kernel.ptx", kernel.ptx);
  write_text(dir / "kernel.cubin", kernel.cubin);
  write_text(dir / "compile.log", kernel.log);
  const nlohmann::json resources = {
      {"kernel_name", kernel.kernel_name},
      {"spec", spec_to_json(kernel.spec)},
      {"resources", resources_to_json(kernel.resources)},
      {"nvrtc_version", nvrtc_version()},
      {"nvrtc_options", nvrtc_flags},
      {"compile_ms", kernel.compile_ms},
      {"cubin_bytes", kernel.cubin.size()},
  };
  write_text(dir / "resources.json", resources.dump(2) + "\n");
  return dir;
}

}  // namespace flashgen
