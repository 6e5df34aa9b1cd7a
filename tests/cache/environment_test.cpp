// The registry of FLASHGEN_* environment variables.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "runtime/environment.h"
#include "tests/cache/cache_test_support.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using testing_support::ScopedEnv;

TEST(Environment, RegistryDeclaresEveryKnobOnceWithItsEffect) {
  std::set<std::string> names;
  for (const EnvVar& v : environment_variables()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " twice";
    EXPECT_TRUE(std::string_view(v.name).starts_with("FLASHGEN_")) << v.name;
    EXPECT_GT(std::string_view(v.description).size(), 10u) << v.name;
    const bool invalidating = v.effect == EnvEffect::invalidates_cache;
    EXPECT_EQ(invalidating, std::string_view(v.name) == "FLASHGEN_NVRTC_FLAGS") << v.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"FLASHGEN_CACHE_DIR", "FLASHGEN_DUMP_DIR", "FLASHGEN_AUTOTUNE",
                                          "FLASHGEN_NVRTC", "FLASHGEN_NVRTC_PATHS", "FLASHGEN_NVRTC_FLAGS", "FLASHGEN_LOG_LEVEL",
                                          "FLASHGEN_DISABLE_DISK_CACHE", "FLASHGEN_LIBRARY",
                                          "FLASHGEN_CACHE_LOCK_TIMEOUT", "FLASHGEN_CACHE_READ_DIRS",
                                          "FLASHGEN_PACKAGED_KERNELS", "FLASHGEN_SUBSTITUTE_KERNELS"}));
}

TEST(Environment, ReadingAnUnregisteredNameIsAnInternalError) {
  try {
    env_value("FLASHGEN_NOT_IN_THE_REGISTRY");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::internal);
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_NOT_IN_THE_REGISTRY"));
  }
}

TEST(Environment, UnknownFlashgenVariablesAreFound) {
  ScopedEnv typo("FLASHGEN_CACHEDIR", "/tmp/x");
  ScopedEnv known("FLASHGEN_LOG_LEVEL", "info");
  ScopedEnv other("NOT_FLASHGEN_THING", "1");
  const auto unknown = unknown_flashgen_variables();
  EXPECT_THAT(unknown, ::testing::Contains("FLASHGEN_CACHEDIR"));
  EXPECT_THAT(unknown, ::testing::Not(::testing::Contains("FLASHGEN_LOG_LEVEL")));
  EXPECT_THAT(unknown, ::testing::Not(::testing::Contains("NOT_FLASHGEN_THING")));
}

TEST(Environment, OnlyInvalidatingVariablesEnterTheKeyPart) {
  ScopedEnv flags("FLASHGEN_NVRTC_FLAGS", "-lineinfo");
  ScopedEnv dir("FLASHGEN_CACHE_DIR", "/somewhere");
  EXPECT_EQ(cache_invalidating_environment(), "FLASHGEN_NVRTC_FLAGS=-lineinfo\n");
  ScopedEnv no_flags("FLASHGEN_NVRTC_FLAGS", std::nullopt);
  EXPECT_EQ(cache_invalidating_environment(), "");
}

TEST(Environment, CacheDirFollowsFlashgenThenXdgThenHome) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv dir("FLASHGEN_CACHE_DIR", std::nullopt);
    EXPECT_EQ(cache_dir_from_env(), std::filesystem::path("/home/someone/.cache/flashgen"));
  }
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    ScopedEnv dir("FLASHGEN_CACHE_DIR", std::nullopt);
    EXPECT_EQ(cache_dir_from_env(), std::filesystem::path("/xdg/flashgen"));
    ScopedEnv explicit_dir("FLASHGEN_CACHE_DIR", "/explicit");
    EXPECT_EQ(cache_dir_from_env(), std::filesystem::path("/explicit"));
  }
}

TEST(Environment, AutotunePolicyParsesOrNamesTheBadValue) {
  {
    ScopedEnv unset("FLASHGEN_AUTOTUNE", std::nullopt);
    EXPECT_EQ(autotune_policy_from_env(), std::nullopt);
  }
  {
    ScopedEnv full("FLASHGEN_AUTOTUNE", "full");
    EXPECT_EQ(autotune_policy_from_env(), AutotunePolicy::full);
  }
  ScopedEnv bad("FLASHGEN_AUTOTUNE", "sometimes");
  try {
    autotune_policy_from_env();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_AUTOTUNE: got 'sometimes'"));
  }
}

TEST(Environment, LogLevelAndDiskSwitch) {
  {
    ScopedEnv level("FLASHGEN_LOG_LEVEL", "debug");
    EXPECT_EQ(log_level_from_env(), LogLevel::debug);
  }
  {
    ScopedEnv level("FLASHGEN_LOG_LEVEL", std::nullopt);
    EXPECT_EQ(log_level_from_env(), LogLevel::warning);
  }
  {
    ScopedEnv level("FLASHGEN_LOG_LEVEL", "loud");
    EXPECT_THROW(log_level_from_env(), Error) << "a bad level must not be ignored";
  }
  for (const char* off : {"0", "false", "off", "no", "FALSE", "Off", "NO"}) {
    ScopedEnv disk("FLASHGEN_DISABLE_DISK_CACHE", off);
    EXPECT_FALSE(disk_cache_disabled_by_env()) << off;
  }
  for (const char* on : {"1", "true", "on", "yes", "TRUE", "On", "Yes"}) {
    ScopedEnv disk("FLASHGEN_DISABLE_DISK_CACHE", on);
    EXPECT_TRUE(disk_cache_disabled_by_env()) << on;
  }
}

TEST(Environment, BooleansParseStrictlyInOnePlace) {
  for (const char* bad : {"", "2", "y", "n", "enabled", "truee", " 1", "0x1", "-1"}) {
    EXPECT_EQ(parse_bool(bad), std::nullopt) << "'" << bad << "'";
  }
  ScopedEnv disk("FLASHGEN_DISABLE_DISK_CACHE", "maybe");
  try {
    disk_cache_disabled_by_env();
    FAIL() << "maybe accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_DISABLE_DISK_CACHE: got 'maybe', expected 1, 0, true, false, on, off, "
                                    "yes or no (any case)"));
  }
}

TEST(Environment, LockTimeoutIsSecondsWithASaneDefault) {
  {
    ScopedEnv unset("FLASHGEN_CACHE_LOCK_TIMEOUT", std::nullopt);
    EXPECT_EQ(cache_lock_timeout_from_env(), std::chrono::seconds(60));
  }
  {
    ScopedEnv small("FLASHGEN_CACHE_LOCK_TIMEOUT", "0.25");
    EXPECT_EQ(cache_lock_timeout_from_env(), std::chrono::milliseconds(250));
  }
  for (const char* bad : {"-1", "soon", "inf", "nan", "1e9", "5s"}) {
    ScopedEnv env("FLASHGEN_CACHE_LOCK_TIMEOUT", bad);
    EXPECT_THROW(cache_lock_timeout_from_env(), Error) << bad;
  }
}

TEST(Environment, EveryBadValueIsListedAndFailsValidation) {
  ScopedEnv level("FLASHGEN_LOG_LEVEL", "loud"), autotune("FLASHGEN_AUTOTUNE", "bogus"),
      disk("FLASHGEN_DISABLE_DISK_CACHE", "maybe"), substitute("FLASHGEN_SUBSTITUTE_KERNELS", "sometimes");
  EXPECT_EQ(environment_problems().size(), 4u);
  try {
    validate_environment();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_LOG_LEVEL: got 'loud'"));
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_AUTOTUNE: got 'bogus'"));
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_DISABLE_DISK_CACHE: got 'maybe'"));
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_SUBSTITUTE_KERNELS: got 'sometimes'"));
  }
}

TEST(Environment, UnknownVariablesAreWarnedAboutOncePerProcess) {
  ScopedEnv typo("FLASHGEN_DUMPDIR", "/tmp/x");
  std::vector<std::string> warnings;
  const LogSink sink = [&](LogLevel, const std::string& m) { warnings.push_back(m); };
  warn_unknown_environment_once(sink);
  warn_unknown_environment_once(sink);
  // Another test in this process may have triggered the one warning already.
  ASSERT_LE(warnings.size(), 1u);
  if (!warnings.empty()) {
    EXPECT_THAT(warnings[0], HasSubstr("FLASHGEN_DUMPDIR"));
  }
}

}  // namespace
}  // namespace flashgen
