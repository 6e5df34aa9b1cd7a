// The outputs of `flashgen bench`: JSON read back field by field, CSV with one row per
// result (a failure's message quoted), the table row of a failure on one line.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "tools/flashgen/bench_report.h"
#include "tests/test_seed.h"

namespace flashgen::cli {
namespace {

struct Sample {
  BenchSetup setup;
  std::vector<BenchResult> results;
};

Sample make_sample(std::mt19937& rng) {
  Sample s;
  s.setup.device = "Test GPU (1 SMs, device 0)";
  s.setup.dtype = DType::f16;
  s.setup.timing = TimingOptions{.warmup = 1, .repeats = 5, .flush_l2 = true};
  BenchResult ok;
  ok.shape.batch = std::uniform_int_distribution(1, 9)(rng);
  ok.shape.heads = 8, ok.shape.heads_kv = 2, ok.shape.head_dim = 64;
  ok.shape.seqlen = std::uniform_int_distribution(1, 5000)(rng);
  ok.shape.options.causal = true;
  ok.pass = BenchPass::forward_backward;
  const double median = std::uniform_real_distribution(0.01, 10.0)(rng);
  ok.timing = Timing{median, median * 0.9, median * 1.2};
  ok.tflops = pass_flops(ok.shape, ok.pass) / (median * 1e-3) / 1e12;
  ok.peak_extra_bytes = rng();
  ok.workspace_bytes = rng();
  ok.io_bytes = rng();
  BenchResult failed = ok;
  failed.pass = BenchPass::backward;
  failed.timing.reset();
  failed.error = "compile error: kernel \"bwd, d64\" failed\nline 2 of the log";
  s.results = {ok, failed};
  return s;
}

TEST(BenchReport, JsonHasEveryResult) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const Sample s = make_sample(rng);
  const nlohmann::json doc = nlohmann::json::parse(bench_json(s.setup, s.results));
  EXPECT_EQ(doc["device"], s.setup.device);
  EXPECT_EQ(doc["dtype"], "fp16");
  EXPECT_EQ(doc["timing"]["repeats"], 5);
  ASSERT_EQ(doc["results"].size(), 2u);
  const nlohmann::json& ok = doc["results"][0];
  const BenchResult& want = s.results[0];
  EXPECT_EQ(ok["pass"], "fwdbwd");
  EXPECT_EQ(ok["seqlen"], want.shape.seqlen);
  EXPECT_EQ(ok["batch"], want.shape.batch);
  EXPECT_EQ(ok["heads_kv"], 2);
  EXPECT_EQ(ok["causal"], true);
  EXPECT_DOUBLE_EQ(ok["median_ms"].get<double>(), want.timing->median_ms);
  EXPECT_DOUBLE_EQ(ok["max_ms"].get<double>(), want.timing->max_ms);
  EXPECT_DOUBLE_EQ(ok["tflops"].get<double>(), want.tflops);
  EXPECT_DOUBLE_EQ(ok["flops"].get<double>(), 3.5 * 4.0 * want.shape.batch * 8 * 64 *
                                                  double(want.shape.seqlen) * double(want.shape.seqlen) / 2);
  EXPECT_EQ(ok["peak_extra_bytes"], want.peak_extra_bytes);
  EXPECT_EQ(ok["workspace_bytes"], want.workspace_bytes);
  EXPECT_FALSE(ok.contains("error"));
  const nlohmann::json& failed = doc["results"][1];
  EXPECT_EQ(failed["error"], s.results[1].error);
  EXPECT_FALSE(failed.contains("median_ms"));
}

TEST(BenchReport, CsvHasAHeaderAndOneRowPerResult) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const Sample s = make_sample(rng);
  const std::string csv = bench_csv(s.setup, s.results);
  std::istringstream in(csv);
  std::string header, ok, failed;
  std::getline(in, header);
  std::getline(in, ok);
  // Separators outside quoted fields (the device name has a comma).
  const auto separators = [](const std::string& line) {
    int n = 0;
    bool quoted = false;
    for (char c : line) quoted ^= c == '"', n += c == ',' && !quoted;
    return n;
  };
  EXPECT_EQ(separators(ok), separators(header)) << ok;
  EXPECT_THAT(ok, ::testing::StartsWith("\"Test GPU (1 SMs, device 0)\",fp16,64,1,"));
  EXPECT_THAT(ok, ::testing::HasSubstr(fmt::format(",fwdbwd,{},", s.results[0].timing->median_ms)));
  // The failure's message has a comma, quotes and a newline: quoted, quotes doubled.
  EXPECT_THAT(csv, ::testing::HasSubstr("\"compile error: kernel \"\"bwd, d64\"\" failed\nline 2 of the log\"\n"));
}

TEST(BenchReport, TableRowOfAFailureIsOneLine) {
  std::mt19937 rng(std::random_device{}());
  const Sample s = make_sample(rng);
  std::ostringstream out;
  print_row(out, s.results[1]);
  const std::string row = out.str();
  EXPECT_THAT(row, ::testing::HasSubstr("failed: compile error: kernel \"bwd, d64\" failed"));
  EXPECT_EQ(std::count(row.begin(), row.end(), '\n'), 1) << row;
  out.str("");
  print_row(out, s.results[0]);
  EXPECT_THAT(out.str(), ::testing::HasSubstr(fmt::format("{:.3f}", s.results[0].timing->median_ms)));
}

}  // namespace
}  // namespace flashgen::cli
