// The cache directory as an adversary or a careless neighbour leaves it: files flashgen
// never wrote, symbolic links, other users' entries, FIFOs, huge files, wrongly typed
// JSON. flashgen must delete only its own files, follow no link, trust only this user's
// files, never block or read without bound, and agree with `cache ls` on what is damaged.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "runtime/cache_directory.h"
#include "runtime/environment.h"
#include "runtime/file_lock.h"
#include "runtime/kernel_cache.h"
#include "tests/cache/cache_test_support.h"
#include "tests/cache/tiny_cache.h"

namespace flashgen {
namespace {

using ::testing::HasSubstr;
using testing_support::read_bytes;
using testing_support::run_bounded;
using testing_support::ScopedEnv;
using testing_support::LogCapture;
using testing_support::ScratchDir;
using testing_support::tiny_cache;
using testing_support::tiny_kernel;
using testing_support::write_bytes;
namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;



std::map<std::string, std::string> skipped(const ClearReport& r) { return {r.skipped.begin(), r.skipped.end()}; }

void chmod_add(const fs::path& p, fs::perms perms) { fs::permissions(p, perms, fs::perm_options::add); }

// ---- cache clear ------------------------------------------------------------------

TEST(CacheClear, RemovesOnlyWhatFlashgenWroteAndReportsTheRest) {
  ScratchDir dir;
  const fs::path root = dir.path();
  auto cache = tiny_cache(root);
  KernelSpec a, b;
  b.head_dim = 64;
  cache->get(a);
  cache->get(b);
  const std::string name_b = cache->entry_name(b);
  write_bytes(cache->entry_dir(b) / "my-notes.txt", "mine");  // a user's file inside an entry

  // What a user keeps where clear cleans: it must all survive.
  write_bytes(root / ".tmp" / "notes.txt", "mine");
  fs::create_directories(root / ".tmp" / "flashgen-tmp.lookalike");  // flashgen's prefix, no marker
  write_bytes(root / ".tmp" / "flashgen-tmp.lookalike" / "kernel.cu", "mine");
  write_bytes(root / ".locks" / "notes.txt", "mine");
  write_bytes(root / ".locks" / "mine.lock", "mine");  // not a lock flashgen wrote
  fs::create_directories(root / "fwd_a-0123456789abcdef");  // named like an entry, no meta.json
  write_bytes(root / "fwd_a-0123456789abcdef" / "thesis.tex", "mine");
  fs::create_directories(root / "fwd_b-0123456789abcdef");  // meta.json naming another entry
  write_bytes(root / "fwd_b-0123456789abcdef" / "meta.json",
              R"({"uri": "fwd_c", "key": "0123456789abcdef0123456789abcdef"})");
  write_bytes(root / "fwd_b-0123456789abcdef" / "kernel.cu", "mine");
  // flashgen's own leftovers: a crashed writer's temporary (marker inside) and a temp file.
  const fs::path crashed = root / ".tmp" / "flashgen-tmp.fwd_x-0123456789abcdef.1.0";
  fs::create_directories(crashed);
  write_bytes(crashed / ".flashgen-entry", "");
  write_bytes(crashed / "kernel.cu", "half written");
  write_bytes(root / ".tmp" / "flashgen-tmp.autotune.json.1.1", "{}");

  const ClearReport r = CacheDirectory(root).clear();
  EXPECT_EQ(r.entries, 1u);
  EXPECT_FALSE(fs::exists(cache->entry_dir(a)));
  EXPECT_FALSE(fs::exists(cache->lock_path(a)));
  EXPECT_FALSE(fs::exists(crashed));
  EXPECT_FALSE(fs::exists(root / ".tmp" / "flashgen-tmp.autotune.json.1.1"));
  EXPECT_THAT(r.removed, ::testing::Contains(cache->entry_name(a)));

  for (const fs::path& p : {root / ".tmp" / "notes.txt", root / ".tmp" / "flashgen-tmp.lookalike" / "kernel.cu",
                            root / ".locks" / "notes.txt", root / ".locks" / "mine.lock",
                            root / "fwd_a-0123456789abcdef" / "thesis.tex",
                            root / "fwd_b-0123456789abcdef" / "kernel.cu", cache->entry_dir(b) / "my-notes.txt"})
    EXPECT_EQ(read_bytes(p), "mine") << p;
  EXPECT_TRUE(fs::exists(cache->entry_dir(b) / "kernel.cubin")) << "an entry is removed whole or not at all";

  auto why = skipped(r);
  EXPECT_THAT(why[".tmp/notes.txt"], HasSubstr("not created by flashgen"));
  EXPECT_THAT(why[".tmp/flashgen-tmp.lookalike"], HasSubstr("marker"));
  EXPECT_THAT(why[".locks/notes.txt"], HasSubstr("not a flashgen lock"));
  EXPECT_THAT(why[".locks/mine.lock"], HasSubstr("not flashgen's"));
  EXPECT_THAT(why["fwd_a-0123456789abcdef"], HasSubstr("meta.json is missing"));
  EXPECT_THAT(why["fwd_b-0123456789abcdef"], HasSubstr("describes entry fwd_c-0123456789abcdef"));
  EXPECT_THAT(why[name_b], HasSubstr("my-notes.txt"));
}

TEST(CacheClear, FollowsNoSymbolicLink) {
  ScratchDir dir, outside;
  const fs::path root = dir.path() / "cache";
  auto cache = tiny_cache(root);
  const KernelSpec a;
  cache->get(a);

  // A symlinked cache directory is refused, with or without a trailing slash.
  fs::create_directory_symlink(root, dir.path() / "link");
  for (const std::string& link : {(dir.path() / "link").string(), (dir.path() / "link").string() + "/"}) {
    try {
      CacheDirectory(link).clear();
      FAIL() << "cleared through the link " << link;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("symbolic link")) << link;
    }
  }
  EXPECT_TRUE(fs::exists(cache->entry_dir(a) / "kernel.cubin"));

  // An entry that is a link to something that looks exactly like an entry; .tmp and
  // .locks replaced by links to directories holding flashgen-looking files.
  const std::string planted = "fwd_l-0123456789abcdef";
  fs::create_directories(outside.path() / "victim");
  write_bytes(outside.path() / "victim" / "meta.json",
              R"({"uri": "fwd_l", "key": "0123456789abcdef0123456789abcdef"})");
  write_bytes(outside.path() / "victim" / "kernel.cu", "mine");
  fs::create_directory_symlink(outside.path() / "victim", root / planted);
  fs::create_directories(outside.path() / "tmp");
  write_bytes(outside.path() / "tmp" / "flashgen-tmp.x.1.0", "mine");
  fs::remove_all(root / ".tmp");
  fs::create_directory_symlink(outside.path() / "tmp", root / ".tmp");
  fs::create_directories(outside.path() / "locks");
  write_bytes(outside.path() / "locks" / (cache->entry_name(a) + ".lock"), "");
  fs::remove_all(root / ".locks");
  fs::create_directory_symlink(outside.path() / "locks", root / ".locks");

  const ClearReport r = CacheDirectory(root).clear();
  EXPECT_EQ(r.entries, 1u);  // the real entry
  EXPECT_EQ(read_bytes(outside.path() / "victim" / "kernel.cu"), "mine");
  EXPECT_EQ(read_bytes(outside.path() / "tmp" / "flashgen-tmp.x.1.0"), "mine");
  EXPECT_TRUE(fs::exists(outside.path() / "locks" / (cache->entry_name(a) + ".lock")));
  auto why = skipped(r);
  EXPECT_THAT(why[planted], HasSubstr("symbolic link"));
  EXPECT_THAT(why[".tmp"], HasSubstr("symbolic link"));
  EXPECT_THAT(why[".locks"], HasSubstr("symbolic link"));
}

TEST(CacheClear, LeavesALockInUseAndSaysByWhom) {
  ScratchDir dir;
  auto cache = tiny_cache(dir.path());
  const KernelSpec a;
  cache->get(a);
  const fs::path lock = cache->lock_path(a);
  const FileLock held = FileLock::acquire(lock);  // another open file: flock conflicts as with another process
  const ClearReport r = CacheDirectory(dir.path()).clear();
  EXPECT_EQ(r.entries, 1u);
  EXPECT_TRUE(fs::exists(lock));
  EXPECT_THAT(skipped(r)[".locks/" + lock.filename().string()],
              HasSubstr(fmt::format("in use by process {} holding it", getpid())));
}

// ---- ownership and permissions ------------------------------------------------------

// Writes the entry of `spec` with a first cache; returns its directory.
fs::path make_entry(const fs::path& root, const KernelSpec& spec) {
  auto cache = tiny_cache(root);
  cache->get(spec);
  return cache->entry_dir(spec);
}

// A new cache asked for `spec` must not load the entry, and must leave it as it is.
void expect_entry_refused(const fs::path& root, const KernelSpec& spec, const std::string& reason) {
  const fs::path entry = tiny_cache(root)->entry_dir(spec);
  struct stat before {};
  ASSERT_EQ(lstat(entry.c_str(), &before), 0);
  LogCapture log;
  auto cache = tiny_cache(root, &log);
  EXPECT_FALSE(cache->get(spec).from_disk_cache) << "an untrusted entry was loaded";
  EXPECT_EQ(cache->stats().compiles, 1);
  const auto warnings = log.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("refusing"));
  EXPECT_THAT(warnings[0], HasSubstr(reason));
  struct stat after {};
  ASSERT_EQ(lstat(entry.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the entry was replaced";

  CacheEntry e;
  std::string problem;
  EXPECT_EQ(CacheDirectory(root).read(cache->entry_name(spec), cache->key(spec), e, problem), EntryState::untrusted);
  const auto listed = CacheDirectory(root).list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].state, EntryState::untrusted);
}

TEST(CacheTrust, EntryWritableByOthersIsNeitherLoadedNorReplaced) {
  ScratchDir dir;
  const KernelSpec spec;
  const fs::path entry = make_entry(dir.path(), spec);
  chmod_add(entry, fs::perms::others_write);
  expect_entry_refused(dir.path(), spec, "writable by group or others");
}

TEST(CacheTrust, EntryOfAnotherUserIsNotLoaded) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give an entry to another user";
  ScratchDir dir;
  const KernelSpec spec;
  const fs::path entry = make_entry(dir.path(), spec);
  // Planted by `nobody`, checksums and all: exactly what another user could write.
  for (const auto& f : fs::recursive_directory_iterator(entry)) ASSERT_EQ(lchown(f.path().c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(lchown(entry.c_str(), kNobody, kNobody), 0);
  expect_entry_refused(dir.path(), spec, fmt::format("owned by uid {}", kNobody));
}

TEST(CacheTrust, EntryThatIsALinkIsNotFollowed) {
  ScratchDir dir, elsewhere;
  const KernelSpec spec;
  const fs::path entry = make_entry(dir.path(), spec);
  fs::rename(entry, elsewhere.path() / "entry");
  fs::create_directory_symlink(elsewhere.path() / "entry", entry);
  expect_entry_refused(dir.path(), spec, "symbolic link");
}

TEST(CacheTrust, CubinWritableByOthersIsNotLoaded) {
  ScratchDir dir;
  const KernelSpec spec;
  const fs::path entry = make_entry(dir.path(), spec);
  chmod_add(entry / "kernel.cubin", fs::perms::others_write);
  auto cache = tiny_cache(dir.path());
  EXPECT_FALSE(cache->get(spec).from_disk_cache);
  EXPECT_EQ(cache->stats().corrupt_entries, 1);
  // Our own entry, damaged: replaced by a private one.
  EXPECT_EQ(fs::status(entry / "kernel.cubin").permissions() & fs::perms::others_write, fs::perms::none);
}

// The directory itself untrusted: nothing read, nothing written, one warning.
void expect_directory_refused(const fs::path& root, const KernelSpec& cached, const std::string& reason) {
  LogCapture log;
  auto cache = tiny_cache(root, &log);
  KernelSpec other;
  other.head_dim = 96;
  EXPECT_FALSE(cache->get(cached).from_disk_cache);
  EXPECT_FALSE(cache->get(other).from_disk_cache);
  EXPECT_FALSE(fs::exists(cache->entry_dir(other))) << "wrote into a refused directory";
  const auto warnings = log.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr(root.string()));
  EXPECT_THAT(warnings[0], HasSubstr(reason));
  EXPECT_FALSE(cache->stats().disk_writable);
  EXPECT_THROW(CacheDirectory(root).list(), Error);
  EXPECT_THROW(CacheDirectory(root).clear(), Error);
}

TEST(CacheTrust, DirectoryWritableByOthersIsNotUsed) {
  ScratchDir dir;
  const KernelSpec spec;
  make_entry(dir.path(), spec);
  chmod_add(dir.path(), fs::perms::others_write | fs::perms::group_write);
  expect_directory_refused(dir.path(), spec, "writable by group or others");
}

TEST(CacheTrust, DirectoryOfAnotherUserIsNotUsed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  ScratchDir dir;
  const KernelSpec spec;
  make_entry(dir.path(), spec);
  ASSERT_EQ(chown(dir.path().c_str(), kNobody, kNobody), 0);
  expect_directory_refused(dir.path(), spec, fmt::format("owned by uid {}", kNobody));
}

TEST(CacheTrust, FallbackDirectoryIsPerUserAndPrivate) {
  ScratchDir tmp;
  ScopedEnv home("HOME", std::nullopt), xdg("XDG_CACHE_HOME", std::nullopt), dir("FLASHGEN_CACHE_DIR", std::nullopt),
      tmpdir("TMPDIR", tmp.path().string());
  const fs::path expected = tmp.path() / fmt::format("flashgen-cache-{}", geteuid());
  ASSERT_EQ(cache_dir_from_env(), expected);
  auto cache = tiny_cache({});
  EXPECT_EQ(cache->dir(), expected);
  cache->get(KernelSpec{});
  EXPECT_TRUE(fs::exists(cache->entry_dir(KernelSpec{}) / "kernel.cubin"));
  EXPECT_EQ(fs::status(expected).permissions() & fs::perms::all, fs::perms::owner_all);

  // Someone made it first, open to everyone: refused, not shared.
  ScratchDir other_tmp;
  ScopedEnv other_tmpdir("TMPDIR", other_tmp.path().string());
  const fs::path squatted = other_tmp.path() / fmt::format("flashgen-cache-{}", geteuid());
  fs::create_directories(squatted);
  fs::permissions(squatted, fs::perms::all);
  expect_directory_refused(squatted, KernelSpec{}, "writable by group or others");

  bool documented = false;
  for (const EnvVar& v : environment_variables())
    if (std::string_view(v.name) == "FLASHGEN_CACHE_DIR")
      documented = std::string_view(v.default_value).find("$TMPDIR/flashgen-cache-<uid>") != std::string_view::npos;
  EXPECT_TRUE(documented) << "`flashgen cache env` must document the fallback";
}

// ---- locks --------------------------------------------------------------------------

TEST(CacheLocks, DanglingSymlinkLockCreatesNothingOutside) {
  ScratchDir dir, outside;
  LogCapture log;
  auto cache = tiny_cache(dir.path(), &log);
  const KernelSpec spec;
  const fs::path lock = cache->lock_path(spec);
  fs::create_directories(lock.parent_path());
  fs::create_symlink(outside.path() / "planted", lock);

  EXPECT_FALSE(cache->get(spec).cubin.empty());
  EXPECT_FALSE(fs::exists(outside.path() / "planted")) << "the lock followed a link out of the cache";
  const auto warnings = log.warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("symbolic link"));
  EXPECT_THROW(FileLock::try_acquire(lock), Error);
  EXPECT_FALSE(fs::exists(outside.path() / "planted"));
}

TEST(CacheLocks, LockFileOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a lock file to another user";
  ScratchDir dir;
  const fs::path lock = dir.path() / "x.lock";
  write_bytes(lock, "");
  ASSERT_EQ(chown(lock.c_str(), kNobody, kNobody), 0);
  try {
    FileLock::try_acquire(lock);
    FAIL() << "locked another user's file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(fmt::format("owned by uid {}", kNobody)));
  }
}

// ---- files read from the cache ------------------------------------------------------

// Replaces `file` of the entry with what `plant` makes, then checks in a bounded child
// that read(), list() and a cache all treat the entry as damaged without blocking.
void expect_damaged_without_blocking(const std::string& file, const std::function<void(const fs::path&)>& plant,
                                     const std::string& reason) {
  ScratchDir dir;
  const KernelSpec spec;
  const fs::path entry = make_entry(dir.path(), spec);
  fs::remove(entry / file);
  plant(entry / file);
  const int code = run_bounded(30, [&] {
    auto cache = tiny_cache(dir.path());
    CacheEntry e;
    std::string problem;
    const EntryState state = CacheDirectory(dir.path()).read(cache->entry_name(spec), cache->key(spec), e, problem);
    if (state != EntryState::corrupt || problem.find(reason) == std::string::npos) {
      std::fprintf(stderr, "%s: read() gave state %d, '%s'\n", file.c_str(), static_cast<int>(state), problem.c_str());
      return 1;
    }
    const auto listed = CacheDirectory(dir.path()).list();
    if (listed.size() != 1 || listed[0].state != EntryState::corrupt) {
      std::fprintf(stderr, "%s: list() does not call it damaged\n", file.c_str());
      return 1;
    }
    const CompiledKernel& k = cache->get(spec);
    if (k.from_disk_cache || cache->stats().corrupt_entries != 1) {
      std::fprintf(stderr, "%s: the cache did not recompile it\n", file.c_str());
      return 1;
    }
    return 0;
  });
  EXPECT_NE(code, -1) << file << ": blocked (killed after 30 s)";
  EXPECT_EQ(code, 0) << file << ": see stderr";
}

TEST(CacheFiles, FifoInPlaceOfMetaOrCubinNeverBlocks) {
  const auto fifo = [](const fs::path& p) { ASSERT_EQ(mkfifo(p.c_str(), 0644), 0); };
  expect_damaged_without_blocking("meta.json", fifo, "is a FIFO");
  expect_damaged_without_blocking("kernel.cubin", fifo, "is a FIFO");
}

TEST(CacheFiles, LinkToDevZeroIsNotRead) {
  const auto zero = [](const fs::path& p) { fs::create_symlink("/dev/zero", p); };
  expect_damaged_without_blocking("meta.json", zero, "symbolic link");
  expect_damaged_without_blocking("kernel.cubin", zero, "symbolic link");
}

TEST(CacheFiles, OversizedFilesAreDamagedUnread) {
  const auto huge = [](std::size_t bytes) {
    return [bytes](const fs::path& p) {
      write_bytes(p, "");
      fs::resize_file(p, bytes);  // sparse: costs no disk
    };
  };
  expect_damaged_without_blocking("kernel.cubin", huge(CacheDirectory::kMaxCubinBytes + 1), "more than");
  expect_damaged_without_blocking("meta.json", huge(CacheDirectory::kMaxJsonBytes + 1), "more than");
}

// ---- meta.json field types ------------------------------------------------------------

TEST(CacheMeta, WronglyTypedFieldIsDamagedForListAndRuntimeAlike) {
  using json = nlohmann::json;
  const std::vector<std::pair<std::vector<std::string>, json>> cases = {
      {{"resources", "registers"}, "many"},  // `cache ls` used to throw type_error.302 here
      {{"resources", "spill_loads_bytes"}, std::int64_t{1} << 40},
      {{"resources"}, "none"},
      {{"compile_ms"}, "slow"},
      {{"cubin_bytes"}, "12"},
      {{"kernel_name"}, 7},
      {{"log"}, json::array()},
      {{"key"}, 5},
  };
  for (const auto& [path, bad] : cases) {
    SCOPED_TRACE(fmt::format("{} = {}", fmt::join(path, "."), bad.dump()));
    ScratchDir dir;
    KernelSpec good, damaged;
    damaged.head_dim = 64;
    make_entry(dir.path(), good);
    const fs::path entry = make_entry(dir.path(), damaged);
    json meta = json::parse(read_bytes(entry / "meta.json"));
    json* field = &meta;
    for (const std::string& p : path) field = &(*field)[p];
    *field = bad;
    write_bytes(entry / "meta.json", meta.dump(2));

    const auto listed = CacheDirectory(dir.path()).list();
    ASSERT_EQ(listed.size(), 2u) << "one damaged entry must not hide the others";
    for (const EntryInfo& e : listed) {
      if (e.path == entry) {
        EXPECT_EQ(e.state, EntryState::corrupt);
        EXPECT_THAT(e.problem, HasSubstr(fmt::format("\"{}\"", path[0])));
      } else {
        EXPECT_EQ(e.state, EntryState::valid) << e.problem;
      }
    }
    auto cache = tiny_cache(dir.path());
    EXPECT_FALSE(cache->get(damaged).from_disk_cache);
    EXPECT_EQ(cache->stats().corrupt_entries, 1) << "list() and the runtime disagree";
    EXPECT_TRUE(cache->get(good).from_disk_cache);
  }
}

// ---- FLASHGEN_* booleans ---------------------------------------------------------------

TEST(CacheEnvironment, DiskCacheSwitchParsesStrictly) {
  for (const char* off : {"no", "FALSE", "Off", "0"}) {
    ScratchDir dir;
    ScopedEnv env("FLASHGEN_DISABLE_DISK_CACHE", off);
    auto cache = tiny_cache(dir.path());
    cache->get(KernelSpec{});
    EXPECT_TRUE(fs::exists(cache->entry_dir(KernelSpec{}))) << off << " must mean: the disk cache is used";
  }
  for (const char* on : {"yes", "TRUE", "On", "1"}) {
    ScratchDir dir;
    ScopedEnv env("FLASHGEN_DISABLE_DISK_CACHE", on);
    auto cache = tiny_cache(dir.path() / "cache");
    cache->get(KernelSpec{});
    EXPECT_FALSE(fs::exists(dir.path() / "cache")) << on << " must disable the disk cache";
  }
  ScopedEnv env("FLASHGEN_DISABLE_DISK_CACHE", "maybe");
  try {
    tiny_cache(ScratchDir().path());
    FAIL() << "a cache was made with FLASHGEN_DISABLE_DISK_CACHE=maybe";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_THAT(e.what(), HasSubstr("FLASHGEN_DISABLE_DISK_CACHE: got 'maybe', expected 1, 0, true, false"));
  }
}

TEST(CacheEnvironment, BadValuesFailTheRuntimeAsTheyFailTheCache) {
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"FLASHGEN_LOG_LEVEL", "bogus"},
           {"FLASHGEN_AUTOTUNE", "bogus"},
           {"FLASHGEN_DISABLE_DISK_CACHE", "2"},
           {"FLASHGEN_CACHE_LOCK_TIMEOUT", "soon"}}) {
    ScopedEnv env(name, value);
    const std::string expected = fmt::format("{}: got '{}'", name, value);
    try {
      Runtime runtime;
      ADD_FAILURE() << "Runtime created with " << name << "=" << value;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument);
      EXPECT_THAT(e.what(), HasSubstr(expected));
    }
    try {
      tiny_cache(ScratchDir().path());
      ADD_FAILURE() << "KernelCache created with " << name << "=" << value;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(expected));
    }
  }
}

}  // namespace
}  // namespace flashgen
