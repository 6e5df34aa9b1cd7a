// `flashgen dump`: shows each stage of the pipeline for one kernel (or every kernel
// of a forward+backward variant): spec -> CUDA source -> PTX -> cubin/SASS -> resources,
// and the variant's tile schedule as an SVG picture.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "compiler/codegen.h"
#include "compiler/mlir_text.h"
#include "compiler/schedule_svg.h"
#include "compiler/spec_fields.h"
#include "compiler/tile_schedule.h"
#include "runtime/autotune_selection.h"
#include "runtime/environment.h"
#include "runtime/kernel_dump.h"
#include "runtime/kernel_json.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_library.h"
#include "tools/flashgen/commands.h"
#include "tools/flashgen/spec_options.h"

namespace flashgen::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStages = R"(Stages (what --emit selects):
  spec       the KernelSpec built from the options below; its URI names every file
  source     the CUDA C++ flashgen generates for the spec: the includes of the kernel's
             device pieces and one instantiation of them with the spec's constants (with
             --out, the headers go to <out>/templates/: nvcc -I<out>/templates compiles it)
  ptx        the PTX NVRTC produces from the source for --arch (virtual ISA)
  sass       the machine code of the cubin ptxas produced, disassembled with nvdisasm or
             cuobjdump (CUDA toolkit; looked up on PATH and in /usr/local/cuda/bin)
  resources  ptxas's report for the cubin: registers, spills, stack, static shared and
             constant memory, barriers; plus the dynamic shared memory the spec needs
  mlir       the kernels as MLIR `flash.kernel` ops (the dialect's text form; what
             flashgen-opt prints), one module for all the kernels dumped
  all        every stage above
  schedule   an SVG of the tile schedule for --seqlen-q N (--seqlen-k M, default N):
             which CTA computes which (Q tile, K/V tile) in which order, which tiles are
             masked or skipped, where lse and D are written and read. Every kernel of
             the variant unless --pass names one; --out FILE.svg, --out DIR or stdout.
             Not part of `all`.

--pass all dumps every kernel of the forward+backward variant: fwd (fwd_splitkv and
fwd_combine for a decode, --seqlen-q <= 16, or a paged cache, --paged, which has no
backward; --paged --varlen: queries packed over it), bwd_preprocess, bwd_dkdv and bwd_dq_convert (bwd_dq with --deterministic),
with the tiles the runtime
picks: the heuristic table or, with --tuning-dir DIR (the runtime's cache directory),
the autotune winners DIR/autotune.json holds for --device (default: its sole device
with winners for --arch). The MLIR pass --flash-select-kernels picks by the same code.
The runtime can dump every kernel it compiles too: set FLASHGEN_DUMP_DIR=dir
(see docs/dump.md). FLASHGEN_NVRTC_FLAGS adds NVRTC options to every compile.

flashgen dump FILE.mlir --out DIR [--arch A] [--emit all] compiles the kernels of an MLIR
file (flash.attention / flash.attention_grad / flash.kernel ops; docs/dialect.md) through
flashgen-opt: the runtime's kernel selection, then <uri>.cu (and .cubin/.ptx) per kernel.)";

struct DumpOptions {
  SpecOptions spec;  // --pass, --head-dim, --block-m, ..., --arch (compiler/spec_fields.h)
  long long seqlen = 4096;
  std::string tuning_dir, device;  // --pass all: the persisted winners of a device (TunedSelection)
  std::vector<std::string> emit = {"source"};
  std::string out_dir;
  std::string mlir_file;  // dump FILE.mlir: the kernels of an MLIR file
  // --emit schedule: the problem the tiles cover.
  std::optional<int> seqlen_q, seqlen_k;
  int heads_q = 1, heads_kv = 1;
  int sms = 132;  // a persistent kernel's CTAs (one per SM): the H100/H200 SXM's

  // Every kernel of the variant: --pass all (the schedule also when --pass is not given).
  bool pass_all(bool schedule = false) const {
    return spec.value("pass") == "all" || (schedule && !spec.given("pass"));
  }
};

// What `flashgen dump` shows without options: the spec's defaults, for the H100/H200.
KernelSpec dump_defaults() {
  KernelSpec s;
  s.arch = Arch::sm_90a;
  return s;
}

// --window L,R; {-1, -1} without --window.
std::pair<int, int> parse_window(const std::string& window) {
  if (window.empty()) return {-1, -1};
  int left = 0, right = 0;
  char comma = 0, rest = 0;
  std::istringstream in(window);
  if (!(in >> left >> comma >> right) || comma != ',' || (in >> rest) || left < -1 || right < -1)
    throw Error(Status::invalid_argument,
                fmt::format("--window: got '{}', expected L,R with integers >= -1 (-1: unbounded)", window));
  return {left, right};
}

// The code-changing options shared by every kernel of the variant. The sizes of the window
// and the cap are launch parameters: the kernel only knows that they exist.
KernelSpec base_spec(const DumpOptions& o, bool all) {
  parse_window(o.spec.value("window"));
  if (o.seqlen < 1 || o.seqlen > std::numeric_limits<int>::max())
    throw Error(Status::invalid_argument, fmt::format("--seqlen: got {}, expected 1..2^31-1", o.seqlen));
  if (o.spec.given("softcap")) {
    const std::string& cap = o.spec.value("softcap");
    char* end = nullptr;
    const float value = std::strtof(cap.c_str(), &end);
    if (end == cap.c_str() || *end != '\0' || !(value > 0.0f) || !std::isfinite(value))
      throw Error(Status::invalid_argument, fmt::format("--softcap: got '{}', expected a finite value > 0", cap));
  }
  if (!all && !parse_pass(o.spec.value("pass")))
    throw Error(Status::invalid_argument,
                fmt::format("--pass: got '{}', expected {}, or all", o.spec.value("pass"), enum_values<Pass>()));
  return o.spec.spec(dump_defaults(), all ? "pass" : "");  // every pass: set per kernel
}

std::vector<KernelSpec> specs_to_dump(const DumpOptions& o, bool schedule = false) {
  const bool all = o.pass_all(schedule);
  const KernelSpec base = base_spec(o, all);
  if (!all) return {base};
  if (!o.spec.tiles_given()) {
    // The runtime's own choice for this problem (with --tuning-dir, its persisted winners).
    ProblemKey p;
    static_cast<ProblemOptions&>(p) = base;
    p.seqlen_q = o.seqlen_q ? *o.seqlen_q : o.seqlen;
    p.seqlen_k = o.seqlen_k ? *o.seqlen_k : p.seqlen_q;
    p.heads_q = o.heads_q;
    p.heads_kv = o.heads_kv;
    TunedSelection::Options t;
    t.dir = o.tuning_dir;
    t.device = o.device;
    t.arch = base.arch;
    t.dir_option = "--tuning-dir";
    t.device_option = "--device";
    t.log = default_log_sink();
    const TunedSelection selection(std::move(t));
    std::vector<KernelSpec> specs = selection.select(p, TunedPass::forward);
    if (!has_backward(p)) return specs;
    for (const KernelSpec& s : selection.select(p, TunedPass::backward)) specs.push_back(s);
    return specs;
  }
  std::vector<KernelSpec> specs;
  for (Pass pass : {Pass::fwd, Pass::bwd_preprocess, Pass::bwd_dkdv,
                    base.deterministic ? Pass::bwd_dq : Pass::bwd_dq_convert}) {
    KernelSpec s = base;
    s.pass = pass;
    specs.push_back(s);
  }
  return specs;
}

std::string sass_text(const CompiledKernel& k) {
  if (auto text = disassemble(k)) return *text;
  return "// SASS unavailable: neither nvdisasm nor cuobjdump was found on PATH or in /usr/local/cuda/bin.\n"
         "// Install the CUDA toolkit's binary utilities (or `pip install nvidia-cuda-nvdisasm` and put its\n"
         "// bin directory on PATH), or use --emit ptx / --out DIR and disassemble the .cubin elsewhere.\n";
}

std::string resources_text(const CompiledKernel& k, const std::vector<std::string>& flags) {
  const nlohmann::json j = {
      {"kernel_name", k.kernel_name},
      {"spec", spec_to_json(k.spec)},
      {"resources", resources_to_json(k.resources)},
      {"cubin_bytes", k.cubin.size()},
      {"compile_ms", k.compile_ms},
      {"nvrtc_version", nvrtc_version()},
      {"nvrtc_library", nvrtc_library().path},
      {"nvrtc_options", flags},
  };
  return j.dump(2) + "\n";
}

// One stage's text, to stdout under a header or to <out>/<uri>.<extension>.
void emit(const DumpOptions& o, const std::string& uri, const char* stage, const char* extension,
          const std::string& text) {
  if (o.out_dir.empty()) {
    std::cout << fmt::format("// ===== {}: {} =====\n", uri, stage) << text;
    if (!text.empty() && text.back() != '\n') std::cout << "\n";
    return;
  }
  const fs::path path = fs::path(o.out_dir) / (uri + extension);
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(Status::invalid_argument, fmt::format("--out: cannot write {}", path.string()));
  std::cerr << "wrote " << path.string() << "\n";
}

// flashgen-opt beside this executable (build tree: ../flashgen-opt/; installed: same
// directory), else on PATH.
std::optional<fs::path> find_flashgen_opt() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  std::vector<fs::path> dirs = {self, self / "flashgen-opt"};
  for (const fs::path& d : tool_search_path()) dirs.push_back(d);
  for (const fs::path& d : dirs)
    if (fs::is_regular_file(d / "flashgen-opt", ec) && ::access((d / "flashgen-opt").c_str(), X_OK) == 0)
      return d / "flashgen-opt";
  return std::nullopt;
}

// `flashgen dump FILE.mlir`: lower the file's attention ops to kernels (the runtime's
// selection) and write each kernel's source (and cubin/PTX with --emit all) into --out.
[[noreturn]] void dump_mlir_file(const DumpOptions& o) {
  if (o.out_dir.empty())
    throw Error(Status::invalid_argument, fmt::format("--out: needed with an MLIR file ({}): the kernels are written "
                                                      "there as <uri>.cu (.cubin, .ptx with --emit all)",
                                                      o.mlir_file));
  const auto opt = find_flashgen_opt();
  if (!opt)
    throw Error(Status::unsupported,
                fmt::format("{}: compiling an MLIR file needs flashgen-opt (built with -DFLASHGEN_WITH_MLIR=ON), "
                            "which was found neither beside flashgen nor on PATH",
                            o.mlir_file));
  const bool binaries = std::count(o.emit.begin(), o.emit.end(), "all") || std::count(o.emit.begin(), o.emit.end(), "ptx");
  std::string select = fmt::format("--flash-select-kernels=arch={}", o.spec.value("arch"));
  // In braces: a GPU name may hold spaces (MLIR keeps empty braces, so those are left out).
  for (const auto& [option, value] : {std::pair{"tuning-dir", &o.tuning_dir}, std::pair{"device", &o.device}})
    if (!value->empty()) select += fmt::format(" {}={{{}}}", option, *value);
  std::vector<std::string> args = {opt->string(), o.mlir_file, "--canonicalize", select,
                                   fmt::format("--flash-emit-cuda=dir={}{}", o.out_dir,
                                               binaries ? " cubin=true ptx=true" : ""),
                                   "-o", "/dev/null"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  throw Error(Status::internal, fmt::format("cannot run {}: {}", args[0], std::strerror(errno)));
}

// --out FILE.svg: the schedule's file rather than a directory of stage files.
bool out_is_svg_file(const DumpOptions& o) { return o.out_dir.size() > 4 && o.out_dir.ends_with(".svg"); }

// The problem --emit schedule draws, from --seqlen-q/-k, --window and --heads-q/-kv.
ScheduleShape schedule_shape(const DumpOptions& o) {
  if (!o.seqlen_q)
    throw Error(Status::invalid_argument,
                "--seqlen-q: missing, expected the number of queries N >= 1 (--emit schedule draws an N x M problem)");
  auto at_least_one = [](const char* option, int value, const char* what) {
    if (value < 1)
      throw Error(Status::invalid_argument, fmt::format("{}: got {}, expected {} >= 1", option, value, what));
  };
  ScheduleShape shape;
  shape.seqlen_q = *o.seqlen_q;
  shape.seqlen_k = o.seqlen_k ? *o.seqlen_k : *o.seqlen_q;
  at_least_one("--seqlen-q", shape.seqlen_q, "the number of queries");
  at_least_one("--seqlen-k", shape.seqlen_k, "the number of keys");
  at_least_one("--heads-q", o.heads_q, "the number of query heads");
  at_least_one("--heads-kv", o.heads_kv, "the number of K/V heads");
  if (o.heads_q % o.heads_kv != 0)
    throw Error(Status::invalid_argument, fmt::format("--heads-kv: got {}, expected a divisor of --heads-q {}",
                                                      o.heads_kv, o.heads_q));
  std::tie(shape.window_left, shape.window_right) = parse_window(o.spec.value("window"));
  shape.group = o.heads_q / o.heads_kv;
  at_least_one("--sms", o.sms, "the number of SMs");
  shape.slices = o.heads_q;  // one batch
  shape.ctas = o.sms;
  return shape;
}

// --emit schedule: the SVG of every kernel of the variant (or of --pass), to --out or stdout.
void write_schedule(const DumpOptions& o) {
  const ScheduleShape shape = schedule_shape(o);
  std::vector<PassSchedule> passes;
  for (const KernelSpec& spec : specs_to_dump(o, /*schedule=*/true)) {
    spec.validate();
    passes.push_back(schedule_pass(spec, shape));
  }
  const std::string svg = schedule_svg(passes, shape);
  if (o.out_dir.empty()) {
    std::cout << svg;
    return;
  }
  const fs::path path = out_is_svg_file(o) ? fs::path(o.out_dir)
                                           : fs::path(o.out_dir) / fmt::format("{}-schedule-q{}-k{}.svg",
                                                                               passes.front().spec.uri(),
                                                                               shape.seqlen_q, shape.seqlen_k);
  std::ofstream out(path, std::ios::binary);
  out << svg;
  if (!out) throw Error(Status::invalid_argument, fmt::format("--out: cannot write {}", path.string()));
  std::cerr << "wrote " << path.string() << "\n";
}

void run_dump(const DumpOptions& o) {
  if (!o.mlir_file.empty()) dump_mlir_file(o);
  std::set<std::string> stages(o.emit.begin(), o.emit.end());
  const bool schedule = stages.erase("schedule") > 0;
  if (stages.count("all")) stages = {"source", "ptx", "sass", "resources", "mlir"};
  if (out_is_svg_file(o) && (!schedule || !stages.empty()))
    throw Error(Status::invalid_argument,
                fmt::format("--out: got '{}', a .svg file, which only --emit schedule alone writes; give a "
                            "directory for several stages",
                            o.out_dir));
  if (!o.out_dir.empty() && !out_is_svg_file(o)) {
    std::error_code ec;
    fs::create_directories(o.out_dir, ec);
    if (ec) throw Error(Status::invalid_argument, fmt::format("--out: cannot create {}: {}", o.out_dir, ec.message()));
  }
  if (schedule) write_schedule(o);
  if (stages.empty()) return;
  const bool compile = stages.count("ptx") || stages.count("sass") || stages.count("resources");
  const CompileOptions options = CompileOptions::from_environment(/*keep_ptx=*/stages.count("ptx") > 0);

  const std::vector<KernelSpec> specs = specs_to_dump(o);
  if (stages.count("mlir")) {
    for (const KernelSpec& spec : specs) spec.validate();
    // One module: exactly what flashgen-opt prints for these kernels (no per-kernel headers).
    if (o.out_dir.empty())
      std::cout << mlir_module(specs);
    else
      emit(o, specs.size() == 1 ? specs[0].uri() : "kernels", "mlir", ".mlir", mlir_module(specs));
  }
  stages.erase("mlir");
  for (const KernelSpec& spec : specs) {
    if (stages.empty()) break;
    const GeneratedSource source = generate_source(spec);  // validates the spec
    const std::string uri = spec.uri();
    if (stages.count("source")) {
      emit(o, uri, "source", ".cu", source.source);
      // The headers it includes, so that `nvcc -I<out>/templates` compiles it as NVRTC did.
      if (!o.out_dir.empty()) write_device_headers(fs::path(o.out_dir) / "templates");
    }
    if (!compile) continue;
    const CompiledKernel k = compile_kernel(spec, source, options);
    if (stages.count("ptx")) emit(o, uri, "ptx", ".ptx", k.ptx);
    if (stages.count("sass")) emit(o, uri, "sass", ".sass", sass_text(k));
    if (stages.count("resources")) {
      emit(o, uri, "resources", ".json", resources_text(k, nvrtc_options(spec.arch, options)));
      if (!o.out_dir.empty()) emit(o, uri, "compile log", ".log", k.log);
    }
    if (!o.out_dir.empty() && (stages.count("sass") || stages.count("resources")))
      emit(o, uri, "cubin", ".cubin", k.cubin);
  }
}

}  // namespace

void register_dump(CLI::App& app) {
  auto options = std::make_shared<DumpOptions>();
  auto* cmd = app.add_subcommand(
      "dump", "show what flashgen generates for a kernel: source, PTX, SASS, resources, tile schedule");
  cmd->footer(kStages);
  options->spec.add_to(*cmd, dump_defaults());
  options->spec.option("pass")->description(
      fmt::format("which kernel: {}, or all (every kernel of the forward+backward variant)", enum_values<Pass>()));
  cmd->add_option("--seqlen", options->seqlen, "sequence length steering the tile selection of --pass all")
      ->capture_default_str();
  cmd->add_option("--tuning-dir", options->tuning_dir,
                  "--pass all and FILE.mlir: use the autotune winners of DIR/autotune.json (the runtime's cache "
                  "directory; default: the heuristic table)");
  cmd->add_option("--device", options->device,
                  "with --tuning-dir: the device whose winners to use, its GPU name or key (default: the sole "
                  "device with winners for --arch)");
  cmd->add_option("--emit", options->emit,
                  "stages to print: source, ptx, sass, resources, mlir, all, schedule (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"source", "ptx", "sass", "resources", "mlir", "all", "schedule"}))
      ->capture_default_str();
  cmd->add_option("--seqlen-q", options->seqlen_q,
                  "number of queries N (needed by --emit schedule; also steers --pass all: N <= 16 is a decode, "
                  "fwd_splitkv + fwd_combine)");
  cmd->add_option("--seqlen-k", options->seqlen_k, "number of keys M (default: N)");
  cmd->add_option("--heads-q", options->heads_q, "--emit schedule: query heads (with --heads-kv: the GQA group)")
      ->capture_default_str();
  cmd->add_option("--heads-kv", options->heads_kv, "--emit schedule: K/V heads")->capture_default_str();
  cmd->add_option("--sms", options->sms,
                  "--emit schedule: the SMs a persistent kernel's CTAs fill, one each (they walk the tiles of "
                  "every query head; the schedule draws head 1's)")
      ->capture_default_str();
  cmd->add_option("file", options->mlir_file,
                  "an MLIR file (.mlir): compile the kernels of its flash ops into --out (through flashgen-opt)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", options->out_dir,
                  "write <uri>.cu/.ptx/.sass/.json/.log/.cubin here instead of stdout (--emit schedule: FILE.svg "
                  "or a directory)");
  cmd->callback([options] { run_dump(*options); });
}

}  // namespace flashgen::cli
