// `flashgen dump --emit schedule` run as a process: it writes the SVG the model
// predicts for the runtime's kernels, and fails with a message naming the option on
// bad input.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/kernel_selection.h"
#include "compiler/tile_schedule.h"
#include "svg_rects.h"
#include "tests/test_seed.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status = -1;
  std::string out, err;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ScheduleCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("flashgen-schedule-cli-{}-{}", ::getpid(), std::random_device{}());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // flashgen dump ARGS, stdout and stderr captured in files.
  CliRun dump(const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string command =
        fmt::format("'{}' dump {} >'{}' 2>'{}'", FLASHGEN_CLI, args, out.string(), err.string());
    CliRun r;
    const int raw = std::system(command.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
  }

  void expect_rejected(const std::string& args, const std::vector<std::string>& mentions) {
    const CliRun r = dump(args);
    EXPECT_NE(r.status, 0) << args;
    for (const std::string& m : mentions) EXPECT_NE(r.err.find(m), std::string::npos) << args << "\n" << r.err;
  }

  fs::path dir_;
};

TEST_F(ScheduleCli, WritesTheScheduleOfTheSelectedKernels) {
  const unsigned seed = flashgen::test::test_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  ScheduleShape shape;
  shape.seqlen_q = 2 * std::uniform_int_distribution<int>(0, 600)(rng) + 1;
  shape.seqlen_k = 2 * std::uniform_int_distribution<int>(0, 600)(rng) + 1;
  SCOPED_TRACE(fmt::format("N={} M={}", shape.seqlen_q, shape.seqlen_k));
  const fs::path svg_path = dir_ / "causal.svg";
  const CliRun r = dump(fmt::format("--emit schedule --head-dim 128 --causal --seqlen-q {} --seqlen-k {} --out '{}'",
                                    shape.seqlen_q, shape.seqlen_k, svg_path.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(fs::exists(svg_path));
  const std::string svg = read_file(svg_path);
  EXPECT_EQ(test::unbalanced_tag(svg), std::nullopt);

  ProblemKey key;
  key.head_dim = 128;
  key.causal = true;
  key.seqlen_q = shape.seqlen_q;
  key.seqlen_k = shape.seqlen_k;
  std::vector<KernelSpec> specs = select_forward_kernels(key, Arch::sm_90a);
  for (const KernelSpec& s : select_backward_kernels(key, Arch::sm_90a)) specs.push_back(s);
  const auto drawn = test::count_by_pass(test::svg_rects(svg), "tile ");
  int passes_with_tiles = 0;
  for (const KernelSpec& spec : specs) {
    const PassSchedule s = schedule_pass(spec, shape);
    EXPECT_NE(svg.find(spec.uri()), std::string::npos) << spec.uri();
    if (!s.has_tile_loop()) continue;
    ++passes_with_tiles;
    for (TileState state : {TileState::computed, TileState::masked, TileState::skipped}) {
      const auto it = drawn.find({to_string(spec.pass), to_string(state)});
      EXPECT_EQ(it == drawn.end() ? 0 : it->second, s.count(state)) << spec.uri() << " " << to_string(state);
    }
  }
  EXPECT_EQ(passes_with_tiles, 2);  // fwd and bwd_dkdv (dQ by atomics)
}

TEST_F(ScheduleCli, PassOptionDrawsOneKernelAndStdoutWorks) {
  const CliRun r = dump("--emit schedule --pass bwd_dq --deterministic --seqlen-q 257 --seqlen-k 129");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.out.rfind("<?xml", 0), 0u) << r.out.substr(0, 200);
  const auto drawn = test::count_by_pass(test::svg_rects(r.out), "tile ");
  ASSERT_FALSE(drawn.empty());
  for (const auto& [key, n] : drawn) EXPECT_EQ(key.first, "bwd_dq") << key.second << " " << n;
}

TEST_F(ScheduleCli, WritesIntoADirectory) {
  const CliRun r = dump(fmt::format("--emit schedule --seqlen-q 99 --out '{}'", dir_.string()));
  ASSERT_EQ(r.status, 0) << r.err;
  int svgs = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) svgs += entry.path().extension() == ".svg";
  EXPECT_EQ(svgs, 1);
}

TEST_F(ScheduleCli, FailsClearlyOnBadOptions) {
  expect_rejected("--emit schedule --head-dim 64", {"--seqlen-q", "missing"});
  expect_rejected("--emit schedule --seqlen-q=-5", {"--seqlen-q", "-5", ">= 1"});
  expect_rejected("--emit schedule --seqlen-q 100 --seqlen-k 0", {"--seqlen-k", "got 0"});
  expect_rejected("--emit schedule --seqlen-q 100 --heads-q 6 --heads-kv 4", {"--heads-kv", "divisor"});
  expect_rejected("--emit schedule --seqlen-q 100 --sms 0", {"--sms", "got 0", ">= 1"});
  expect_rejected("--emit schedule --seqlen-q 100 --window 5", {"--window", "'5'"});
  expect_rejected(fmt::format("--emit schedule,source --seqlen-q 100 --out '{}/x.svg'", dir_.string()),
                  {"--out", ".svg"});
  expect_rejected("--emit schedule --seqlen-q 100 --block-m 100 --pass fwd", {"block_m"});
  // Refused before anything is allocated (this once grew to 23.6 GB).
  expect_rejected("--emit schedule --seqlen-q 100000000", {"tiles", "expected at most 40000"});
  expect_rejected("--emit source --pass all --seqlen 0", {"--seqlen", "got 0"});
  expect_rejected("--emit source --pass all --seqlen=-1", {"--seqlen", "got -1"});
  expect_rejected("--emit source --pass fwd --softcap inf", {"--softcap", "'inf'"});
  EXPECT_FALSE(fs::exists(dir_ / "x.svg"));
}

}  // namespace
}  // namespace flashgen
