#include "runtime/kernel_dump.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

#include "compiler/embedded_files.h"
#include "runtime/kernel_json.h"
#include "runtime/nvrtc_library.h"

namespace flashgen {

namespace {

void write_text(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw Error(Status::internal, fmt::format("kernel dump: writing {} failed: {}", path.string(), std::strerror(errno)));
}

void make_directories(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(Status::internal, fmt::format("kernel dump: cannot create {}: {}", dir.string(), ec.message()));
}

bool has_text(const std::filesystem::path& path, std::string_view text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::string existing((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return existing == text;
}

}  // namespace

void write_device_headers(const std::filesystem::path& root) {
  for (const EmbeddedFile& f : embedded_files()) {
    const std::filesystem::path path = root / std::filesystem::path(f.name);
    if (has_text(path, f.text)) continue;
    make_directories(path.parent_path());
    write_text(path, f.text);
  }
}

std::string device_headers_dir_name() { return "templates-" + embedded_files_digest().substr(0, 16); }

std::filesystem::path write_kernel_dump(const std::filesystem::path& dump_dir, const std::string& entry_name,
                                        const CompiledKernel& kernel, const std::vector<std::string>& nvrtc_flags) {
  const std::filesystem::path dir = dump_dir / entry_name;
  make_directories(dir);
  // The headers once per process and directory, not once per kernel.
  static std::mutex mutex;
  static std::set<std::filesystem::path> written;
  {
    const std::filesystem::path headers = dump_dir / device_headers_dir_name();
    std::lock_guard lock(mutex);
    if (!written.count(headers)) {
      write_device_headers(headers);
      written.insert(headers);
    }
  }

  write_text(dir / "kernel.cu", kernel.source);
  write_text(dir / "kernel.ptx", kernel.ptx);
  write_text(dir / "kernel.cubin", kernel.cubin);
  write_text(dir / "compile.log", kernel.log);
  const nlohmann::json resources = {
      {"kernel_name", kernel.kernel_name},
      {"spec", spec_to_json(kernel.spec)},
      {"resources", resources_to_json(kernel.resources)},
      {"nvrtc_version", nvrtc_version()},
      {"nvrtc_library", nvrtc_library().path},
      {"nvrtc_options", nvrtc_flags},
      {"compile_ms", kernel.compile_ms},
      {"cubin_bytes", kernel.cubin.size()},
      {"device_headers", (std::filesystem::path("..") / device_headers_dir_name()).string()},
  };
  write_text(dir / "resources.json", resources.dump(2) + "\n");
  return dir;
}

}  // namespace flashgen
