// Four processes race for one key on an empty host directory: exactly one compiles (each
// compile appends a line to a file), every one gets the whole artefact, and watcher
// processes polling the directory meanwhile never see a partial entry.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

#include "base/file.h"
#include "compile/artefact_cache.h"
#include "compile_test_support.h"

namespace switchyard::compile {
namespace {

constexpr size_t kArtefactBytes = size_t{4} << 20;
enum ExitCode {
  kOk = 0,
  kOpenFailed = 10,
  kLookupFailed,
  kWrongBytes,
  kSawPartialEntry,
  kTimedOut
};

HostCacheOptions HostOptions(const std::string& root) {
  HostCacheOptions options;
  options.root = root;
  options.requirements = TestRequirements();
  return options;
}

int Race(const std::string& root, const std::string& compile_log) {
  absl::StatusOr<std::unique_ptr<ArtefactCache>> cache =
      ArtefactCache::Open({.host = HostOptions(root)});
  if (!cache.ok())
    return kOpenFailed;
  absl::StatusOr<ArtefactLookup> lookup =
      (*cache)->GetOrCompile(SampleKey(), []() -> absl::StatusOr<CompiledArtefact> {
        return CompiledArtefact{ArtefactBytes(7, kArtefactBytes), {"avx2"}};
      });
  if (!lookup.ok())
    return kLookupFailed;
  if (lookup->found_in == CacheLevel::kCompiled) {
    const int fd = ::open(compile_log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    const std::string line = std::to_string(::getpid()) + "\n";
    if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      return kLookupFailed;
    ::close(fd);
  }
  absl::StatusOr<std::string> bytes = base::ReadFile(lookup->entry->artefact_path());
  return bytes.ok() && *bytes == ArtefactBytes(7, kArtefactBytes) ? kOk : kWrongBytes;
}

// Polls the directory until the entry is there: until then Find may say NotFound, never
// DataLoss (which a partial entry would be).
int Watch(const std::string& root) {
  absl::StatusOr<std::unique_ptr<HostCache>> cache = HostCache::Open(HostOptions(root));
  if (!cache.ok())
    return kOpenFailed;
  const std::string key = SampleKey().hex;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<std::unique_ptr<HostEntry>> entry = (*cache)->Find(key);
    if (entry.ok()) {
      absl::StatusOr<std::string> bytes = base::ReadFile((*entry)->artefact_path());
      return bytes.ok() && *bytes == ArtefactBytes(7, kArtefactBytes) ? kOk : kWrongBytes;
    }
    if (!absl::IsNotFound(entry.status()))
      return kSawPartialEntry;
  }
  return kTimedOut;
}

TEST(ArtefactCacheRaceTest, FourProcessesCompileOneKeyOnce) {
  ScratchDirectory scratch;
  const std::string root = (scratch.path() / "cache").string();
  const std::string compile_log = (scratch.path() / "compiles.log").string();
  ASSERT_TRUE(HostCache::Open(HostOptions(root)).ok());
  int start[2];
  ASSERT_EQ(::pipe2(start, O_CLOEXEC), 0);
  std::vector<pid_t> children;
  for (int n = 0; n < 6; ++n) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(start[1]);
      char c = 0;
      // Everyone starts when the parent closes its end.
      while (::read(start[0], &c, 1) < 0) {
      }
      ::_exit(n < 4 ? Race(root, compile_log) : Watch(root));
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  ::close(start[1]);
  for (size_t n = 0; n < children.size(); ++n) {
    int status = 0;
    ASSERT_EQ(::waitpid(children[n], &status, 0), children[n]);
    ASSERT_TRUE(WIFEXITED(status)) << "child " << n << " status " << status;
    EXPECT_EQ(WEXITSTATUS(status), kOk) << "child " << n;
  }
  absl::StatusOr<std::string> log = base::ReadFile(compile_log);
  ASSERT_TRUE(log.ok());
  const std::vector<std::string> compiles = absl::StrSplit(*log, '\n', absl::SkipEmpty());
  EXPECT_EQ(compiles.size(), 1u) << *log;
}

}  // namespace
}  // namespace switchyard::compile
