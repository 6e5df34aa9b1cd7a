#include "tools/flashgen/bench_grid.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace flashgen::cli {

namespace {

[[noreturn]] void bad_flag(const std::string& message) { throw Error(Status::invalid_argument, message); }

DType parse_dtype(const std::string& text) {
  if (text == "bf16") return DType::bf16;
  if (text == "fp16") return DType::f16;
  bad_flag(fmt::format("--dtype: got '{}', expected bf16 or fp16", text));
}

std::vector<BenchPass> parse_passes(const std::vector<std::string>& names) {
  if (names.empty()) bad_flag("--passes: is empty, expected some of fwd, bwd, fwdbwd");
  std::vector<BenchPass> passes;
  for (const std::string& name : names) {
    if (name == "fwd") passes.push_back(BenchPass::forward);
    else if (name == "bwd") passes.push_back(BenchPass::backward);
    else if (name == "fwdbwd") passes.push_back(BenchPass::forward_backward);
    else bad_flag(fmt::format("--passes: got '{}', expected fwd, bwd or fwdbwd", name));
  }
  return passes;
}

// A count given on the command line, or the default the grid derives (at least 1).
std::int64_t given_or(std::int64_t given, std::int64_t derived, const char* flag) {
  if (given < 0) bad_flag(fmt::format("{}: got {}, expected a positive count (0: the default)", flag, given));
  return given > 0 ? given : std::max<std::int64_t>(derived, 1);
}

// --decode: the decode rows at each page size, forward only (a KV-cache forward has no backward).
BenchPlan decode_plan(const BenchOptions& o, BenchPlan plan) {
  if (o.page_sizes.empty()) bad_flag("--page-sizes: is empty, expected page sizes such as 0,16,256 (0: contiguous)");
  for (int page : o.page_sizes)
    if (page < 0) bad_flag(fmt::format("--page-sizes: got {}, expected a page size >= 1 or 0 (contiguous)", page));
  plan.passes = {BenchPass::forward};
  for (const DecodeRow& row : kDecodeRows)
    for (int page : o.page_sizes) {
      BenchShape s;
      s.head_dim = 128;
      s.batch = given_or(o.batch, row.batch, "--batch");
      s.seqlen_q = row.seqlen_q;
      s.seqlen = row.seqlen_k;
      s.heads = given_or(o.heads, 32, "--heads");
      s.heads_kv = given_or(o.heads_kv, 8, "--heads-kv");
      if (s.heads % s.heads_kv != 0)
        bad_flag(fmt::format("--heads-kv: got {}, expected a divisor of the {} query heads", s.heads_kv, s.heads));
      s.page_size = page;
      s.options.softcap = o.softcap;
      plan.shapes.push_back(s);
    }
  return plan;
}

}  // namespace

const char* to_string(BenchPass pass) {
  switch (pass) {
    case BenchPass::forward: return "fwd";
    case BenchPass::backward: return "bwd";
    case BenchPass::forward_backward: return "fwdbwd";
  }
  return "?";
}

std::vector<bool> parse_on_off_both(const std::string& text, const char* flag) {
  if (text == "off") return {false};
  if (text == "on") return {true};
  if (text == "both") return {false, true};
  bad_flag(fmt::format("{}: got '{}', expected on, off or both", flag, text));
}

std::vector<bool> parse_causal(const std::string& text) { return parse_on_off_both(text, "--causal"); }

std::int64_t parse_length(const std::string& text, const char* flag) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [rest, err] = std::from_chars(text.data(), end, value);
  std::int64_t scale = 1;
  if (err == std::errc() && rest + 1 == end && (*rest == 'k' || *rest == 'K')) scale = 1024, ++rest;
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  if (text.empty() || err != std::errc() || rest != end || value < 1 || value > kLimit / scale)
    bad_flag(fmt::format("{}: got '{}', expected a positive length such as 512, 4k or 16384", flag, text));
  return value * scale;
}

BenchPlan make_bench_plan(const BenchOptions& o) {
  BenchPlan plan;
  plan.dtype = parse_dtype(o.dtype);
  plan.passes = parse_passes(o.passes);
  if (o.head_dims.empty()) bad_flag("--head-dims: is empty, expected head dimensions such as 64,128");
  if (o.seqlens.empty()) bad_flag("--seqlens: is empty, expected lengths such as 1k,4k");
  if (o.layouts.empty()) bad_flag("--layouts: is empty, expected dense, varlen or both");
  for (const std::string& l : o.layouts)
    if (l != "dense" && l != "varlen") bad_flag(fmt::format("--layouts: got '{}', expected dense or varlen", l));
  if (!o.window.empty() && o.window.size() != 2)
    bad_flag(fmt::format("--window: got {} value(s) ({}), expected two: L,R", o.window.size(),
                         fmt::join(o.window, ",")));
  if (o.softcap < 0 || !std::isfinite(o.softcap))
    bad_flag(fmt::format("--softcap: got {}, expected a value > 0 (0: off)", o.softcap));
  if (o.warmup < 0) bad_flag(fmt::format("--warmup: got {}, expected a count >= 0", o.warmup));
  if (o.repeats < 1) bad_flag(fmt::format("--repeats: got {}, expected a count >= 1", o.repeats));

  if (o.decode) return decode_plan(o, plan);
  std::vector<std::int64_t> seqlens;
  for (const std::string& text : o.seqlens) seqlens.push_back(parse_length(text, "--seqlens"));
  for (int d : o.head_dims)
    if (d < 1) bad_flag(fmt::format("--head-dims: got {}, expected a positive head dimension", d));

  for (int d : o.head_dims) {
    for (bool causal : parse_causal(o.causal)) {
      for (std::int64_t n : seqlens) for (const std::string& layout : o.layouts) {
        BenchShape s;
        s.varlen = layout == "varlen";
        s.head_dim = d;
        s.seqlen = n;
        s.batch = given_or(o.batch, kTotalTokens / n, "--batch");
        s.heads = given_or(o.heads, kModelWidth / d, "--heads");
        s.heads_kv = given_or(o.heads_kv, s.heads, "--heads-kv");
        if (s.heads % s.heads_kv != 0)
          bad_flag(fmt::format("--heads-kv: got {}, expected a divisor of the {} query heads", s.heads_kv, s.heads));
        s.options.causal = causal;
        if (!o.window.empty()) s.options.window_left = o.window[0], s.options.window_right = o.window[1];
        s.options.softcap = o.softcap;
        s.options.deterministic = o.deterministic;
        plan.shapes.push_back(s);
      }
    }
  }
  return plan;
}

double kv_bytes(const BenchShape& s) {
  return 2.0 * static_cast<double>(s.batch) * static_cast<double>(s.seqlen) * static_cast<double>(s.heads_kv) *
         s.head_dim * 2.0;
}

double forward_flops(const BenchShape& s) {
  if (s.decode())  // every query sees every key
    return 4.0 * static_cast<double>(s.batch) * static_cast<double>(s.heads) * static_cast<double>(s.seqlen_q) *
           static_cast<double>(s.seqlen) * s.head_dim;
  const double n = static_cast<double>(s.seqlen);
  double pairs = s.options.causal ? n * n / 2 : n * n;
  const bool windowed = s.options.window_left >= 0 || s.options.window_right >= 0;
  if (windowed) {
    // Query i sees keys max(0, i - L) .. min(N - 1, i + R); causal caps R at 0.
    const std::int64_t left = s.options.window_left < 0 ? s.seqlen : s.options.window_left;
    std::int64_t right = s.options.window_right < 0 ? s.seqlen : s.options.window_right;
    if (s.options.causal) right = 0;
    pairs = 0;
    for (std::int64_t i = 0; i < s.seqlen; ++i) {
      const std::int64_t first = std::max<std::int64_t>(0, i - left);
      const std::int64_t last = std::min<std::int64_t>(s.seqlen - 1, i + right);
      pairs += static_cast<double>(std::max<std::int64_t>(0, last - first + 1));
    }
  }
  return 4.0 * static_cast<double>(s.batch) * static_cast<double>(s.heads) * pairs * s.head_dim;
}

double pass_flops(const BenchShape& s, BenchPass pass) {
  switch (pass) {
    case BenchPass::forward: return forward_flops(s);
    case BenchPass::backward: return 2.5 * forward_flops(s);
    case BenchPass::forward_backward: return 3.5 * forward_flops(s);
  }
  return 0;
}

}  // namespace flashgen::cli
