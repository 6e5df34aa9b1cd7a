#include "tools/flashgen/problem_set.h"

#include <fmt/format.h>

#include "compiler/kernel_spec.h"
#include "runtime/validate.h"
#include "tools/flashgen/bench_grid.h"

namespace flashgen::cli {

CLI::Validator not_empty(const char* expected) {
  return CLI::Validator(
      [expected](const std::string& value) {
        return value.empty() ? fmt::format("is empty, expected {}", expected) : std::string();
      },
      "");
}

void ProblemSetOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--head-dims", head_dims, "head dimensions (comma-separated)")
      ->delimiter(',')
      ->check(not_empty("head dimensions such as 64,128"))
      ->capture_default_str();
  cmd.add_option("--dtypes", dtypes, "bf16, fp16 (comma-separated)")
      ->delimiter(',')
      ->check(not_empty("some of bf16, fp16"))
      ->capture_default_str();
  cmd.add_option("--causal", causal, "on, off or both")->check(CLI::IsMember({"on", "off", "both"}))->capture_default_str();
  cmd.add_option("--seqlens", seqlens, "sequence lengths, e.g. 1k,4k,16k (each stands for its bucket)")
      ->delimiter(',')
      ->check(not_empty("lengths such as 1k,4k"))
      ->capture_default_str();
  cmd.add_option("--passes", passes, "fwd, bwd (comma-separated)")
      ->delimiter(',')
      ->check(not_empty("some of fwd, bwd"))
      ->check(CLI::IsMember({"fwd", "bwd"}))
      ->capture_default_str();
}

namespace {

[[noreturn]] void bad_option(const std::string& message) { throw Error(Status::invalid_argument, message); }

template <class T>
void require_some(const std::vector<T>& values, const char* option, const char* expected) {
  if (values.empty()) bad_option(fmt::format("{}: is empty, expected {}", option, expected));
}

bool has(const std::vector<std::string>& names, const char* name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::vector<TuneShape> problem_shapes(const ProblemSetOptions& o) {
  require_some(o.head_dims, "--head-dims", "head dimensions such as 64,128");
  require_some(o.dtypes, "--dtypes", "some of bf16, fp16");
  require_some(o.seqlens, "--seqlens", "lengths such as 1k,4k");
  require_some(o.passes, "--passes", "some of fwd, bwd");
  for (int d : o.head_dims)
    if (d < kGpuMinHeadDim || d > kGpuMaxHeadDim)
      bad_option(fmt::format("--head-dims: got {}, expected {}..{} (the GPU kernels' head dims)", d, kGpuMinHeadDim,
                             kGpuMaxHeadDim));
  std::vector<DType> dtypes;
  for (const std::string& t : o.dtypes) {
    const auto dtype = parse_dtype(t);
    if (!dtype || *dtype == DType::f32) bad_option(fmt::format("--dtypes: got '{}', expected bf16 or fp16", t));
    dtypes.push_back(*dtype);
  }
  std::vector<std::int64_t> seqlens;
  for (const std::string& n : o.seqlens) seqlens.push_back(parse_length(n, "--seqlens"));

  std::vector<TuneShape> out;
  for (int d : o.head_dims)
    for (DType dtype : dtypes)
      for (bool causal : parse_causal(o.causal))
        for (bool window : o.window)
          for (bool softcap : o.softcap)
            for (bool deterministic : o.deterministic)
              for (std::int64_t n : seqlens) {
                TuneShape s;
                s.head_dim = d;
                s.dtype = dtype;
                s.seqlen_q = s.seqlen_k = n;
                s.options.causal = causal;
                if (window) s.options.window_left = static_cast<int>(n / 8);
                if (softcap) s.options.softcap = 30.0f;
                s.options.deterministic = deterministic;
                s.forward = has(o.passes, "fwd");
                s.backward = has(o.passes, "bwd");
                s.device = o.device;
                out.push_back(s);
              }
  return out;
}

}  // namespace flashgen::cli
