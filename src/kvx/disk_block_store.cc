#include "kvx/disk_block_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "fmt/format.h"

#include "base/status_macros.h"
#include "kvx/kv_block_entry.h"
#include "kvx/unique_fd.h"

namespace switchyard::kvx {
namespace {

absl::Status SystemError(const std::string& what, int err) {
  const std::string message = fmt::format("{}: {}", what, std::system_category().message(err));
  if (err == ENOSPC || err == EDQUOT)
    return absl::ResourceExhaustedError(message);
  if (err == ENOENT)
    return absl::NotFoundError(message);
  return absl::InternalError(message);
}

// The block's segments in layout order, as iovecs over the pool, after `first` (the header).
std::vector<iovec> BlockIovecs(const MemoryRegion& pool, int32_t block, iovec first) {
  std::vector<iovec> iov;
  iov.reserve(pool.layout().num_segments() + 1);
  iov.push_back(first);
  for (size_t s = 0; s < pool.layout().num_segments(); ++s)
    iov.push_back({pool.addr(block, s), pool.layout().segment_bytes(s)});
  return iov;
}

// Writes or reads all of `iov` at offset 0, going on after short transfers.
template <typename Io>
absl::Status TransferAll(int fd, std::vector<iovec> iov, Io io, const std::string& path) {
  size_t next = 0;
  off_t offset = 0;
  while (next < iov.size()) {
    const auto count = static_cast<int>(std::min<size_t>(iov.size() - next, IOV_MAX));
    const ssize_t n = io(fd, &iov[next], count, offset);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return SystemError(path, errno);
    }
    if (n == 0)
      return absl::DataLossError(fmt::format("{}: shorter than its entry", path));
    offset += n;
    auto left = static_cast<size_t>(n);
    while (next < iov.size() && left >= iov[next].iov_len) {
      left -= iov[next].iov_len;
      ++next;
    }
    if (left > 0) {
      iov[next].iov_base = static_cast<char*>(iov[next].iov_base) + left;
      iov[next].iov_len -= left;
    }
  }
  return absl::OkStatus();
}

constexpr std::string_view kEntryDirectoryPrefix = "switchyard-kv-";

// Removes the entry directories of processes that are gone (killed before they could remove
// their own), so that a crash leaks no disk.
void RemoveOrphans(const std::filesystem::path& directory) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(error) || !name.starts_with(kEntryDirectoryPrefix))
      continue;
    const std::string rest = name.substr(kEntryDirectoryPrefix.size());
    const std::string pid_text = rest.substr(0, rest.find('-'));
    char* end = nullptr;
    const long pid = std::strtol(pid_text.c_str(), &end, 10);
    if (pid_text.empty() || *end != '\0' || pid <= 0)
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove_all(entry.path(), error);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<DiskBlockStore>> DiskBlockStore::Open(DiskBlockStoreOptions options,
                                                                     MemoryRegion pool) {
  // Stores of one process (engines of one `up`) each get a folder of their own.
  static std::atomic<int> next_store{0};
  const std::filesystem::path dir =
      std::filesystem::path(options.directory) /
      fmt::format("{}{}-{}", kEntryDirectoryPrefix, getpid(), next_store.fetch_add(1));
  std::error_code error;
  std::filesystem::create_directories(options.directory, error);
  RemoveOrphans(options.directory);
  std::filesystem::remove_all(dir, error);
  if (!std::filesystem::create_directories(dir, error) || error) {
    return absl::FailedPreconditionError(
        fmt::format("KV disk tier: cannot make {}: {}", dir.string(),
                    error ? error.message() : std::string("it exists")));
  }
  return std::unique_ptr<DiskBlockStore>(
      new DiskBlockStore(std::move(options), std::move(pool), dir.string()));
}

DiskBlockStore::DiskBlockStore(DiskBlockStoreOptions options, MemoryRegion pool,
                               std::string entry_directory)
    : options_(std::move(options)),
      pool_(std::move(pool)),
      entry_directory_(std::move(entry_directory)),
      threads_(std::make_unique<base::ThreadPool>(static_cast<size_t>(options_.num_threads),
                                                  "sy-kvdisk")) {}

DiskBlockStore::~DiskBlockStore() {
  threads_.reset();  // runs what is queued, then joins
  std::error_code ignored;
  std::filesystem::remove_all(entry_directory_, ignored);
}

std::string DiskBlockStore::EntryPath(int64_t slot) const {
  return fmt::format("{}/{}.kv", entry_directory_, slot);
}

void DiskBlockStore::Write(std::vector<Op> ops, Callback done) {
  threads_->Submit(
      [this, ops = std::move(ops), done = std::make_shared<Callback>(std::move(done))] {
        std::vector<absl::Status> results;
        results.reserve(ops.size());
        for (const Op& op : ops)
          results.push_back(WriteOne(op));
        (*done)(std::move(results));
      });
}

void DiskBlockStore::Read(std::vector<Op> ops, Callback done) {
  threads_->Submit(
      [this, ops = std::move(ops), done = std::make_shared<Callback>(std::move(done))] {
        std::vector<absl::Status> results;
        results.reserve(ops.size());
        for (const Op& op : ops)
          results.push_back(ReadOne(op));
        (*done)(std::move(results));
      });
}

absl::Status DiskBlockStore::WriteOne(const Op& op) const {
  KvBlockEntryHeader header =
      MakeKvBlockEntryHeader(op.key, options_.compatibility, pool_, op.block);
  const std::string path = EntryPath(op.slot);
  const std::string temporary = fmt::format("{}/{}.tmp", entry_directory_, op.slot);
  UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid())
    return SystemError(temporary, errno);
  absl::Status written = TransferAll(
      fd.get(), BlockIovecs(pool_, op.block, {header.data(), header.size()}), ::pwritev, temporary);
  if (!written.ok()) {
    ::unlink(temporary.c_str());
    return written;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    return SystemError(path, err);
  }
  return absl::OkStatus();
}

absl::Status DiskBlockStore::ReadOne(const Op& op) const {
  const std::string path = EntryPath(op.slot);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return SystemError(path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return SystemError(path, errno);
  const size_t payload = pool_.layout().block_bytes();
  if (static_cast<size_t>(st.st_size) != kKvBlockEntryHeaderBytes + payload)
    return absl::DataLossError(fmt::format("{}: {} bytes, not a whole entry", path, st.st_size));
  KvBlockEntryHeader header{};
  SY_RETURN_IF_ERROR(TransferAll(
      fd.get(), BlockIovecs(pool_, op.block, {header.data(), header.size()}), ::preadv, path));
  return CheckKvBlockEntry(header, op.key, options_.compatibility, pool_, op.block, path);
}

}  // namespace switchyard::kvx
