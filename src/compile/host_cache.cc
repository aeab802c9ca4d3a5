#include "compile/host_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "fmt/format.h"

#include "base/file.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "compile/internal/system_error.h"
#include "kvx/unique_fd.h"

namespace switchyard::compile {
namespace {

namespace fs = std::filesystem;
using internal::FileLock;
using internal::SystemError;

// Temporary directories older than this belong to writers that died.
constexpr auto kStaleTemporaryAge = std::chrono::minutes(10);

constexpr std::string_view kTemporaryPrefix = ".tmp-";
constexpr std::string_view kDoomedPrefix = ".removing-";

// A fresh dot-named path in `parent`, unique across threads and processes.
std::string DotPath(const std::string& parent, std::string_view prefix, std::string_view key) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}/{}{}-{}-{}", parent, prefix, key, ::getpid(), counter.fetch_add(1));
}

absl::Status WriteSynced(const std::string& path, std::string_view contents) {
  kvx::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid())
    return SystemError("cannot create", path, errno);
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return SystemError("cannot write", path, errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0)
    return SystemError("cannot sync", path, errno);
  return absl::OkStatus();
}

// Renames the directory out of the entries' namespace, then deletes it; readers that got
// there first keep their open files.
void RemoveDirectory(const std::string& directory, std::string_view key) {
  const std::string parent = fs::path(directory).parent_path();
  const std::string doomed = DotPath(parent, kDoomedPrefix, key);
  if (::rename(directory.c_str(), doomed.c_str()) != 0)
    return;
  std::error_code ignored;
  fs::remove_all(doomed, ignored);
}

// The names in `directory` (none when it cannot be read); what vanishes meanwhile is
// simply missed. Never throws, unlike a range-for over a directory_iterator.
std::vector<fs::path> ListDirectory(const fs::path& directory) {
  std::vector<fs::path> paths;
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec))
    paths.push_back(it->path());
  return paths;
}

bool IsDirectory(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Whether `path` names the directory open as `fd`.
bool SameDirectory(int fd, const std::string& path) {
  struct stat held {};
  struct stat named {};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
         held.st_ino == named.st_ino && held.st_dev == named.st_dev;
}

int64_t MtimeNanoseconds(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

bool IsHexPair(std::string_view name) {
  return name.size() == 2 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

HostEntryInfo DescribeEntry(const fs::path& directory) {
  HostEntryInfo info;
  info.key = directory.filename().string();
  info.directory = directory.string();
  struct stat st {};
  if (::stat(info.directory.c_str(), &st) == 0)
    info.last_use_unix_ns = MtimeNanoseconds(st);
  for (const fs::path& file : ListDirectory(directory)) {
    if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    info.bytes += static_cast<uint64_t>(st.st_size);
    if (file.filename() == kMetadataFileName)
      info.last_use_unix_ns = MtimeNanoseconds(st);
  }
  return info;
}

}  // namespace

std::string DefaultHostCacheRoot() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return fmt::format("{}/switchyard/compile", xdg);
  const char* home = std::getenv("HOME");
  return fmt::format("{}/.cache/switchyard/compile", home != nullptr ? home : "");
}

std::string HostEntry::artefact_path() const {
  return fmt::format("{}/{}", directory_, kArtefactFileName);
}

bool HostEntry::StillInPlace() const {
  return SameDirectory(lock_.fd(), directory_);
}

void HostEntry::MarkUsed() const {
  // Best effort: a read-only cache directory still serves, its LRU order unchanged.
  ::utimensat(lock_.fd(), kMetadataFileName, nullptr, 0);
}

absl::StatusOr<std::unique_ptr<HostCache>> HostCache::Open(HostCacheOptions options) {
  if (options.root.empty())
    options.root = DefaultHostCacheRoot();
  std::error_code ec;
  fs::create_directories(options.root, ec);
  if (ec) {
    return absl::InternalError(fmt::format("cannot create the compile cache directory {}: {}",
                                           options.root, ec.message()));
  }
  return std::unique_ptr<HostCache>(new HostCache(std::move(options)));
}

std::string HostCache::EntryDirectory(std::string_view key) const {
  return fmt::format("{}/{}/{}", options_.root, key.substr(0, 2), key);
}

absl::StatusOr<std::unique_ptr<HostEntry>> HostCache::Find(std::string_view key) const {
  return FindEntry(key, /*mark_used=*/true);
}

absl::Status HostCache::Verify(std::string_view key) const {
  return FindEntry(key, /*mark_used=*/false).status();
}

absl::StatusOr<std::unique_ptr<HostEntry>> HostCache::FindEntry(std::string_view key,
                                                                bool mark_used) const {
  if (!IsCacheKeyHex(key))
    return absl::InvalidArgumentError(fmt::format("not a compile cache key: '{}'", key));
  const std::string directory = EntryDirectory(key);
  absl::StatusOr<FileLock> lock = FileLock::LockDirectory(directory, FileLock::Mode::kShared);
  if (!lock.ok())
    return absl::IsNotFound(lock.status()) ? absl::NotFoundError(directory) : lock.status();
  // Removal renames the directory away while holding it exclusively: once we hold it, the
  // path still names what we opened, or the entry is gone.
  struct stat held {};
  struct stat named {};
  if (::fstat(lock->fd(), &held) != 0 || ::stat(directory.c_str(), &named) != 0 ||
      held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
    return absl::NotFoundError(directory);
  }
  absl::StatusOr<std::string> metadata_text =
      base::ReadFile(fmt::format("{}/{}", directory, kMetadataFileName));
  if (!metadata_text.ok())
    return absl::DataLossError(
        fmt::format("no readable metadata: {}", std::string(metadata_text.status().message())));
  SY_ASSIGN_OR_RETURN(EntryMetadata metadata, ParseEntryMetadata(*metadata_text));
  const std::string artefact_path = fmt::format("{}/{}", directory, kArtefactFileName);
  std::string_view artefact_bytes;
  absl::StatusOr<std::unique_ptr<base::MappedFile>> artefact =
      base::MappedFile::Open(artefact_path);
  if (artefact.ok()) {
    artefact_bytes = (*artefact)->view();
  } else {
    // An empty file cannot be mapped; anything else missing or unreadable is a bad entry.
    struct stat st {};
    if (::stat(artefact_path.c_str(), &st) != 0 || st.st_size != 0)
      return absl::DataLossError(
          fmt::format("no readable artefact: {}", std::string(artefact.status().message())));
  }
  SY_RETURN_IF_ERROR(CheckEntry(metadata, key, artefact_bytes, options_.requirements));
  std::unique_ptr<HostEntry> entry(new HostEntry(directory, std::move(metadata), *std::move(lock)));
  if (mark_used)
    entry->MarkUsed();
  return entry;
}

absl::StatusOr<FileLock> HostCache::LockKey(std::string_view key) const {
  if (!IsCacheKeyHex(key))
    return absl::InvalidArgumentError(fmt::format("not a compile cache key: '{}'", key));
  const std::string parent = fmt::format("{}/{}", options_.root, key.substr(0, 2));
  std::error_code ec;
  fs::create_directories(parent, ec);
  return FileLock::LockFile(fmt::format("{}/.{}.lock", parent, key), FileLock::Mode::kExclusive);
}

absl::Status HostCache::WriteTemporary(const std::string& directory, const EntryMetadata& metadata,
                                       std::string_view factors_json,
                                       std::string_view artefact) const {
  if (::mkdir(directory.c_str(), 0755) != 0)
    return SystemError("cannot create", directory, errno);
  SY_RETURN_IF_ERROR(WriteSynced(fmt::format("{}/{}", directory, kArtefactFileName), artefact));
  SY_RETURN_IF_ERROR(WriteSynced(fmt::format("{}/{}", directory, kFactorsFileName), factors_json));
  return WriteSynced(fmt::format("{}/{}", directory, kMetadataFileName),
                     EncodeEntryMetadata(metadata));
}

absl::StatusOr<EvictionResult> HostCache::Store(const EntryMetadata& metadata,
                                                std::string_view factors_json,
                                                std::string_view artefact) const {
  const std::string& key = metadata.key;
  if (!IsCacheKeyHex(key))
    return absl::InvalidArgumentError(fmt::format("not a compile cache key: '{}'", key));
  const std::string directory = EntryDirectory(key);
  const std::string parent = fs::path(directory).parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  const std::string temporary = DotPath(parent, kTemporaryPrefix, key);
  absl::Status written = WriteTemporary(temporary, metadata, factors_json, artefact);
  if (written.ok() && ::rename(temporary.c_str(), directory.c_str()) != 0) {
    // EEXIST/ENOTEMPTY: another writer's entry is in place first, and it stays.
    if (errno != EEXIST && errno != ENOTEMPTY)
      written = SystemError("cannot rename into", directory, errno);
  }
  fs::remove_all(temporary, ec);
  SY_RETURN_IF_ERROR(written);
  return EvictTo(options_.max_bytes, key);
}

absl::Status HostCache::Remove(std::string_view key, IfHeld if_held) const {
  if (!IsCacheKeyHex(key))
    return absl::InvalidArgumentError(fmt::format("not a compile cache key: '{}'", key));
  const std::string directory = EntryDirectory(key);
  if (if_held == IfHeld::kRemove) {
    RemoveDirectory(directory, key);
    return absl::OkStatus();
  }
  absl::StatusOr<FileLock> lock = FileLock::TryLockDirectory(directory, FileLock::Mode::kExclusive);
  if (absl::IsNotFound(lock.status()))
    return absl::OkStatus();
  if (absl::IsUnavailable(lock.status()))
    return absl::UnavailableError(fmt::format("{} is in use by another process", directory));
  SY_RETURN_IF_ERROR(lock.status());
  RemoveDirectory(directory, key);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HostEntryInfo>> HostCache::List() const {
  if (!IsDirectory(options_.root))
    return absl::NotFoundError(fmt::format("no compile cache directory {}", options_.root));
  std::vector<HostEntryInfo> entries;
  for (const fs::path& shard : ListDirectory(options_.root)) {
    const std::string prefix = shard.filename().string();
    if (!IsHexPair(prefix))
      continue;
    for (const fs::path& entry : ListDirectory(shard)) {
      const std::string name = entry.filename().string();
      if (IsCacheKeyHex(name) && name.compare(0, 2, prefix) == 0 && IsDirectory(entry))
        entries.push_back(DescribeEntry(entry));
    }
  }
  return entries;
}

void HostCache::RemoveStaleTemporaries() const {
  const int64_t stale_before_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (std::chrono::system_clock::now() - kStaleTemporaryAge).time_since_epoch())
          .count();
  for (const fs::path& shard : ListDirectory(options_.root)) {
    if (!IsHexPair(shard.filename().string()))
      continue;
    for (const fs::path& entry : ListDirectory(shard)) {
      const std::string name = entry.filename().string();
      const bool temporary =
          name.rfind(kTemporaryPrefix, 0) == 0 || name.rfind(kDoomedPrefix, 0) == 0;
      struct stat st {};
      if (temporary && ::lstat(entry.c_str(), &st) == 0 && MtimeNanoseconds(st) < stale_before_ns) {
        std::error_code ignored;
        fs::remove_all(entry, ignored);
      }
    }
  }
}

absl::StatusOr<EvictionResult> HostCache::EvictTo(uint64_t max_bytes,
                                                  std::string_view keep_key) const {
  RemoveStaleTemporaries();
  SY_ASSIGN_OR_RETURN(std::vector<HostEntryInfo> entries, List());
  uint64_t total = 0;
  for (const HostEntryInfo& entry : entries)
    total += entry.bytes;
  EvictionResult result;
  if (total <= max_bytes)
    return result;
  std::sort(entries.begin(), entries.end(), [](const HostEntryInfo& a, const HostEntryInfo& b) {
    return a.last_use_unix_ns != b.last_use_unix_ns ? a.last_use_unix_ns < b.last_use_unix_ns
                                                    : a.key < b.key;
  });
  for (const HostEntryInfo& entry : entries) {
    if (total <= max_bytes)
      break;
    if (entry.key == keep_key)
      continue;
    const absl::Status removed = Remove(entry.key);
    if (absl::IsUnavailable(removed)) {
      ++result.skipped_in_use;
      continue;
    }
    SY_RETURN_IF_ERROR(removed);
    ++result.removed_entries;
    result.removed_bytes += entry.bytes;
    total -= entry.bytes;
  }
  if (result.removed_entries > 0) {
    SY_LOG_INFO("compile cache {}: evicted {} entries ({} bytes) to stay under {} bytes",
                options_.root, result.removed_entries, result.removed_bytes, max_bytes);
  }
  return result;
}

}  // namespace switchyard::compile
