#include "tools/flashgen/bench_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <ostream>

namespace flashgen::cli {

namespace {

constexpr const char* kFlops =
    "forward 4*B*H*N^2*D, halved when causal (with a window: N^2 -> visible query-key pairs); "
    "backward 2.5x forward; forward+backward 3.5x forward";
constexpr const char* kMemory =
    "peak extra: device memory flashgen allocates beyond inputs and outputs during the pass "
    "(high watermark of the device's stream-ordered memory pool, where the runtime puts its backward workspace)";

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string window_text(const AttentionOptions& o) {
  if (o.window_left < 0 && o.window_right < 0) return "";
  return fmt::format(" w{},{}", o.window_left, o.window_right);
}

// A CSV field; quoted (with doubled quotes) when it contains a separator or a quote.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

void print_header(std::ostream& out, const BenchSetup& setup) {
  out << fmt::format("flashgen bench on {}: {}, median of {} runs after {} warm-up{}\n", setup.device,
                     to_string(setup.dtype), setup.timing.repeats, setup.timing.warmup,
                     setup.timing.flush_l2 ? ", L2 flushed before each run" : "");
  out << fmt::format("FLOPs: {}\n", kFlops);
  out << fmt::format("Memory: {}\n\n", kMemory);
  out << fmt::format("{:>4} {:>6} {:>5} {:>4} {:>4} {:>6} {:>7} {:>10} {:>8} {:>14}\n", "D", "causal", "B", "H",
                     "Hkv", "N", "pass", "ms", "TFLOP/s", "peak extra MiB");
  out.flush();
}

void print_row(std::ostream& out, const BenchResult& r) {
  const BenchShape& s = r.shape;
  out << fmt::format("{:>4} {:>6} {:>5} {:>4} {:>4} {:>6} {:>7} ", s.head_dim, s.options.causal ? "on" : "off",
                     s.batch, s.heads, s.heads_kv, s.seqlen, to_string(r.pass));
  if (r.timing)
    out << fmt::format("{:>10.3f} {:>8.1f} {:>14.1f}", r.timing->median_ms, r.tflops, mib(r.peak_extra_bytes));
  else
    out << "failed: " << r.error.substr(0, r.error.find('\n'));  // compile logs go to the JSON
  out << window_text(s.options) << (s.options.softcap > 0 ? fmt::format(" softcap {}", s.options.softcap) : "")
      << (s.options.deterministic ? " deterministic" : "") << (s.varlen ? " varlen" : "");
  if (s.decode()) {
    out << fmt::format(" decode q{} {}", s.seqlen_q, s.page_size > 0 ? fmt::format("page {}", s.page_size) : "contiguous");
    if (r.timing) out << fmt::format(" {:.2f} TB/s", kv_bytes(s) / (r.timing->median_ms * 1e-3) / 1e12);
  }
  out << "\n";
  out.flush();
}

std::string bench_json(const BenchSetup& setup, const std::vector<BenchResult>& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BenchResult& r : results) {
    const BenchShape& s = r.shape;
    nlohmann::json row = {
        {"head_dim", s.head_dim},
        {"causal", s.options.causal},
        {"batch", s.batch},
        {"heads", s.heads},
        {"heads_kv", s.heads_kv},
        {"seqlen", s.seqlen},
        {"window_left", s.options.window_left},
        {"window_right", s.options.window_right},
        {"softcap", s.options.softcap},
        {"deterministic", s.options.deterministic},
        {"varlen", s.varlen},
        {"decode_seqlen_q", s.seqlen_q},
        {"page_size", s.page_size},
        {"kv_bytes", kv_bytes(s)},
        {"pass", to_string(r.pass)},
        {"flops", pass_flops(s, r.pass)},
        {"workspace_bytes", r.workspace_bytes},
        {"io_bytes", r.io_bytes},
    };
    if (r.timing) {
      row["median_ms"] = r.timing->median_ms;
      row["min_ms"] = r.timing->min_ms;
      row["max_ms"] = r.timing->max_ms;
      row["tflops"] = r.tflops;
      if (s.decode()) row["kv_tbps"] = kv_bytes(s) / (r.timing->median_ms * 1e-3) / 1e12;
      row["peak_extra_bytes"] = r.peak_extra_bytes;
    } else {
      row["error"] = r.error;
    }
    rows.push_back(row);
  }
  const nlohmann::json doc = {
      {"tool", "flashgen bench"},
      {"flashgen_version", version()},
      {"device", setup.device},
      {"dtype", to_string(setup.dtype)},
      {"timing", {{"warmup", setup.timing.warmup}, {"repeats", setup.timing.repeats},
                  {"flush_l2", setup.timing.flush_l2}, {"statistic", "median of CUDA-event times"}}},
      {"flops", kFlops},
      {"memory", kMemory},
      {"results", rows},
  };
  return doc.dump(2) + "\n";
}

std::string bench_csv(const BenchSetup& setup, const std::vector<BenchResult>& results) {
  std::string csv =
      "device,dtype,head_dim,causal,batch,heads,heads_kv,seqlen,window_left,window_right,softcap,deterministic,"
      "pass,median_ms,min_ms,max_ms,tflops,peak_extra_bytes,workspace_bytes,io_bytes,error\n";
  for (const BenchResult& r : results) {
    const BenchShape& s = r.shape;
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},", csv_field(setup.device), to_string(setup.dtype),
                       s.head_dim, s.options.causal ? 1 : 0, s.batch, s.heads, s.heads_kv, s.seqlen,
                       s.options.window_left, s.options.window_right, s.options.softcap,
                       s.options.deterministic ? 1 : 0, to_string(r.pass));
    if (r.timing)
      csv += fmt::format("{},{},{},{},{},", r.timing->median_ms, r.timing->min_ms, r.timing->max_ms, r.tflops,
                         r.peak_extra_bytes);
    else
      csv += ",,,,,";
    csv += fmt::format("{},{},{}\n", r.workspace_bytes, r.io_bytes, csv_field(r.error));
  }
  return csv;
}

}  // namespace flashgen::cli
