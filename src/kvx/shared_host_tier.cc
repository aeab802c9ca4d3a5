#include "kvx/shared_host_tier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "kvx/unique_fd.h"

namespace switchyard::kvx {
namespace {

constexpr uint64_t kMagic = 0x5359'4b56'5348'5402;  // "SYKVSHT", version 2
constexpr size_t kPage = 4096;

struct Header {
  uint64_t magic;
  // 0 while the maker builds the index, 1 once it may be used.
  std::atomic<uint32_t> ready;
  uint32_t unused;
  std::array<uint8_t, 32> compatibility;
  int64_t num_slots;
  uint64_t block_bytes;
  // The maker's pid namespace (PidNamespace()): the index names holders by pid.
  uint64_t pid_namespace;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

size_t RoundUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

absl::Status SystemError(const std::string& what, int err) {
  return absl::InternalError(fmt::format("{}: {}", what, std::system_category().message(err)));
}

// This process's pid namespace as its /proc inode; 0 without /proc.
uint64_t PidNamespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 200)
    return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok)
      return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedHostTier>> SharedHostTier::Open(
    const std::string& name, int64_t num_slots, size_t block_bytes,
    const std::array<uint8_t, 32>& compatibility) {
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        fmt::format("shared KV tier name '{}': use 1-200 of A-Z a-z 0-9 . _ -", name));
  }
  const size_t index_offset = RoundUp(sizeof(Header), 64);
  const size_t blocks_offset = RoundUp(index_offset + BlockTierIndex::BytesFor(num_slots), kPage);
  const size_t bytes = blocks_offset + static_cast<size_t>(num_slots) * block_bytes;

  std::unique_ptr<SharedHostTier> tier(new SharedHostTier());
  tier->path_ = "/switchyard-kv-" + name;
  UniqueFd fd(::shm_open(tier->path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  tier->created_ = fd.valid();
  if (!fd.valid()) {
    if (errno != EEXIST)
      return SystemError("shm_open " + tier->path_, errno);
    fd = UniqueFd(::shm_open(tier->path_.c_str(), O_RDWR | O_CLOEXEC, 0600));
    if (!fd.valid())
      return SystemError("shm_open " + tier->path_, errno);
    // Its maker may not have sized it yet.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    struct stat st {};
    while (::fstat(fd.get(), &st) == 0 && st.st_size == 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (static_cast<size_t>(st.st_size) != bytes) {
      return absl::FailedPreconditionError(fmt::format(
          "the shared KV tier /dev/shm{} is {} bytes, not the {} that {} slots of {} bytes take "
          "(every engine sharing it needs the same --kv-offloading-size and model; remove it to "
          "start over)",
          tier->path_, st.st_size, bytes, num_slots, block_bytes));
    }
  } else if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    ::shm_unlink(tier->path_.c_str());
    return SystemError("ftruncate " + tier->path_, err);
  }
  void* mapping = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (mapping == MAP_FAILED)
    return SystemError("mmap " + tier->path_, errno);
  tier->mapping_ = static_cast<std::byte*>(mapping);
  tier->mapping_bytes_ = bytes;
  auto* header = reinterpret_cast<Header*>(tier->mapping_);
  const std::span<std::byte> index_memory(tier->mapping_ + index_offset,
                                          BlockTierIndex::BytesFor(num_slots));
  tier->blocks_ = {tier->mapping_ + blocks_offset, static_cast<size_t>(num_slots) * block_bytes};

  if (tier->created_) {
    header->magic = kMagic;
    header->compatibility = compatibility;
    header->num_slots = num_slots;
    header->block_bytes = block_bytes;
    header->pid_namespace = PidNamespace();
    SY_ASSIGN_OR_RETURN(tier->index_, BlockTierIndex::InMemory(index_memory, num_slots,
                                                               /*initialize=*/true));
    header->ready.store(1, std::memory_order_release);
    return tier;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (header->ready.load(std::memory_order_acquire) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::FailedPreconditionError(fmt::format(
          "the shared KV tier /dev/shm{} was never finished by the engine that made it; remove "
          "it to start over",
          tier->path_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (header->magic != kMagic || header->compatibility != compatibility ||
      header->num_slots != num_slots || header->block_bytes != block_bytes) {
    return absl::FailedPreconditionError(fmt::format(
        "the shared KV tier /dev/shm{} holds other KV (another model, dtype or shape) or another "
        "geometry; give this engine another name or remove it",
        tier->path_));
  }
  if (header->pid_namespace != PidNamespace()) {
    return absl::FailedPreconditionError(fmt::format(
        "the shared KV tier /dev/shm{} was made in another pid namespace (another container); "
        "engines share a tier only within one, so give this engine another name",
        tier->path_));
  }
  SY_ASSIGN_OR_RETURN(tier->index_, BlockTierIndex::InMemory(index_memory, num_slots,
                                                             /*initialize=*/false));
  // What an engine killed while using the tier held (a restarted one usually joins here).
  tier->index_->ReclaimDeadHolders();
  return tier;
}

SharedHostTier::~SharedHostTier() {
  index_.reset();
  if (mapping_ != nullptr)
    ::munmap(mapping_, mapping_bytes_);
}

}  // namespace switchyard::kvx
