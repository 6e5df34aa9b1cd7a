// tests/test_seed.h: FLASHGEN_TEST_SEED replays the seed a failing test printed; without it
// every run draws a fresh one; a value that is not an unsigned integer is refused by name.
#include "tests/test_seed.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

namespace flashgen::test {
namespace {

// Sets FLASHGEN_TEST_SEED for the scope, restoring what was there.
class SeedVariable {
 public:
  explicit SeedVariable(const char* value) {
    if (const char* old = std::getenv("FLASHGEN_TEST_SEED")) old_ = old;
    if (value) setenv("FLASHGEN_TEST_SEED", value, 1);
    else unsetenv("FLASHGEN_TEST_SEED");
  }
  ~SeedVariable() {
    if (old_) setenv("FLASHGEN_TEST_SEED", old_->c_str(), 1);
    else unsetenv("FLASHGEN_TEST_SEED");
  }

 private:
  std::optional<std::string> old_;
};

TEST(TestSeed, TheVariableReplaysASeed) {
  SeedVariable v("998459932");
  EXPECT_EQ(test_seed(), 998459932u);
  EXPECT_EQ(test_seed(), 998459932u);
  SeedVariable big("18446744073709551615");
  EXPECT_EQ(test_seed(), 18446744073709551615ull);
}

TEST(TestSeed, WithoutItEveryCallDrawsAFreshSeed) {
  SeedVariable v(nullptr);
  std::set<std::uint64_t> seeds;
  for (int i = 0; i < 8; ++i) seeds.insert(test_seed());
  EXPECT_GT(seeds.size(), 1u);
  SeedVariable empty("");
  seeds.clear();
  for (int i = 0; i < 8; ++i) seeds.insert(test_seed());
  EXPECT_GT(seeds.size(), 1u);
}

TEST(TestSeed, RefusesWhatIsNotAnUnsignedInteger) {
  for (const char* bad : {"abc", "12x", "-5", "18446744073709551616", "1.5"}) {
    SeedVariable v(bad);
    try {
      test_seed();
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("FLASHGEN_TEST_SEED"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace flashgen::test
