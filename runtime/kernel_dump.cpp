#include "runtime/kernel_dump.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>

#include "compiler/embedded_files.h"
#include "runtime/environment.h"
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

std::optional<Disassembler> find_disassembler() {
  const std::vector<std::filesystem::path> dirs = tool_search_path();
  for (const auto& [tool, args] : {std::pair{"nvdisasm", "--print-code"}, std::pair{"cuobjdump", "-sass"}})
    for (const std::filesystem::path& d : dirs)
      if (::access((d / tool).c_str(), X_OK) == 0) return Disassembler{d / tool, args};
  return std::nullopt;
}

std::optional<std::string> disassemble(const CompiledKernel& k) {
  const auto tool = find_disassembler();
  if (!tool) return std::nullopt;
  const std::filesystem::path cubin =
      std::filesystem::temp_directory_path() / fmt::format("flashgen-dump-{}-{}.cubin", ::getpid(), k.spec.uri());
  std::ofstream(cubin, std::ios::binary).write(k.cubin.data(), static_cast<std::streamsize>(k.cubin.size()));
  const std::string command = fmt::format("'{}' {} '{}' 2>&1", tool->tool.string(), tool->args, cubin.string());
  std::string text;
  int status = -1;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
    status = ::pclose(pipe);
  }
  std::error_code ec;
  std::filesystem::remove(cubin, ec);
  if (status != 0)
    throw Error(Status::internal, fmt::format("{} failed (status {}) on the cubin of {}:\n{}", tool->tool.string(),
                                              status, k.spec.uri(), text));
  return text;
}

}  // namespace flashgen
