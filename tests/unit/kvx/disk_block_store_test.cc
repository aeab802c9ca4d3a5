// DiskBlockStore on a scratch directory: byte-exact round trips between a multi-segment pool
// and the files, NotFound and DataLoss for missing, damaged and foreign entries, temporary
// files never read, the entry directory's life (orphans of dead processes removed at Open,
// the store's own removed at destruction), and every callback run even at destruction.
#include "kvx/disk_block_store.h"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "kvx/kv_block_entry.h"
#include "store_test_support.h"
#include "transfer_test_memory.h"

namespace switchyard::kvx {
namespace {

namespace fs = std::filesystem;
using Op = DiskBlockStore::Op;
using absl::StatusCode;

constexpr int32_t kBlocks = 8;

std::array<uint8_t, 32> Filled(uint8_t value) {
  std::array<uint8_t, 32> bytes;
  bytes.fill(value);
  return bytes;
}

DiskBlockStore::Key K(uint8_t n) {
  DiskBlockStore::Key key = Filled(0x5a);
  key[0] = n;
  return key;
}

void FlipByte(const fs::path& path, std::streamoff offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  const char c = static_cast<char>(file.get() ^ 0x01);
  file.seekp(offset);
  file.put(c);
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A process id that no process has: a child's, once it has exited and been reaped.
pid_t DeadPid() {
  const pid_t child = ::fork();
  if (child == 0)
    ::_exit(0);
  EXPECT_GT(child, 0);
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  return child;
}

class DiskBlockStoreTest : public ::testing::Test {
 protected:
  DiskBlockStoreTest()
      : layout_(*KvBlockLayout::ForKvCache(2, 4, 2, 4, 2)), pool_(layout_, kBlocks, /*seed=*/9) {}

  std::unique_ptr<DiskBlockStore> Open(const fs::path& directory,
                                       const std::array<uint8_t, 32>& compatibility = Filled(1)) {
    absl::StatusOr<std::unique_ptr<DiskBlockStore>> store = DiskBlockStore::Open(
        {.directory = directory.string(), .num_threads = 2, .compatibility = compatibility},
        *pool_.region);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  std::vector<std::byte> Bytes(int32_t block) { return pool_.BlockBytes(layout_, block); }

  size_t EntryBytes() const { return kKvBlockEntryHeaderBytes + layout_.block_bytes(); }

  ScratchDirectory dir_;
  KvBlockLayout layout_;
  PoolMemory pool_;
};

TEST_F(DiskBlockStoreTest, WrittenBlocksReadBackByteExactIntoOtherBlocks) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  const fs::path entry_directory(store->entry_directory());
  EXPECT_EQ(entry_directory.parent_path(), dir_.path());
  EXPECT_TRUE(entry_directory.filename().string().starts_with("switchyard-kv-" +
                                                              std::to_string(::getpid()) + "-"))
      << entry_directory;
  const std::vector<std::byte> one = Bytes(1);
  const std::vector<std::byte> five = Bytes(5);
  EXPECT_EQ(Codes(Write(*store, {{0, K(1), 1}, {6, K(5), 5}})),
            (std::vector{StatusCode::kOk, StatusCode::kOk}));
  for (int64_t slot : {0, 6}) {
    EXPECT_EQ(fs::path(store->EntryPath(slot)).parent_path(), store->entry_directory());
    EXPECT_EQ(fs::file_size(store->EntryPath(slot)), EntryBytes());
  }
  ASSERT_NE(Bytes(2), five);
  ASSERT_NE(Bytes(7), one);

  EXPECT_EQ(Codes(Read(*store, {{6, K(5), 2}, {0, K(1), 7}})),
            (std::vector{StatusCode::kOk, StatusCode::kOk}));
  EXPECT_EQ(Bytes(2), five);
  EXPECT_EQ(Bytes(7), one);
  EXPECT_EQ(Bytes(1), one);
  EXPECT_EQ(Bytes(5), five);
}

TEST_F(DiskBlockStoreTest, AMissingSlotIsNotFound) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(Codes(Read(*store, {{3, K(3), 2}})), std::vector{StatusCode::kNotFound});
  ASSERT_EQ(Codes(Write(*store, {{0, K(1), 1}})), std::vector{StatusCode::kOk});
  // One status per op.
  EXPECT_EQ(Codes(Read(*store, {{3, K(3), 2}, {0, K(1), 4}, {1, K(1), 5}})),
            (std::vector{StatusCode::kNotFound, StatusCode::kOk, StatusCode::kNotFound}));
}

TEST_F(DiskBlockStoreTest, ADamagedFileIsDataLoss) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(
      Codes(Write(
          *store,
          {{0, K(1), 1}, {1, K(1), 1}, {2, K(1), 1}, {3, K(1), 1}, {4, K(1), 1}, {5, K(1), 1}})),
      std::vector<StatusCode>(6, StatusCode::kOk));
  const auto entry_bytes = static_cast<std::uintmax_t>(EntryBytes());
  fs::resize_file(store->EntryPath(0), entry_bytes - 1);
  fs::resize_file(store->EntryPath(1), kKvBlockEntryHeaderBytes);
  fs::resize_file(store->EntryPath(2), 0);
  fs::resize_file(store->EntryPath(3), entry_bytes + 1);
  FlipByte(store->EntryPath(4), static_cast<std::streamoff>(entry_bytes - 1));  // payload
  FlipByte(store->EntryPath(5), 20);                                            // header
  for (int64_t slot = 0; slot < 6; ++slot) {
    const std::vector<absl::Status> results = Read(*store, {{slot, K(1), 6}});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].code(), StatusCode::kDataLoss) << slot << ": " << results[0];
    EXPECT_NE(results[0].message().find(store->EntryPath(slot)), std::string::npos) << results[0];
  }
}

TEST_F(DiskBlockStoreTest, AnEntryReadUnderAnotherKeyIsDataLoss) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{0, K(1), 1}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Codes(Read(*store, {{0, K(2), 6}})), std::vector{StatusCode::kDataLoss});
  EXPECT_EQ(Codes(Read(*store, {{0, K(1), 6}})), std::vector{StatusCode::kOk});
}

TEST_F(DiskBlockStoreTest, AnEntryWrittenForOtherKvIsDataLoss) {
  std::unique_ptr<DiskBlockStore> writer = Open(dir_.path(), Filled(1));
  ScratchDirectory other_dir, same_dir;
  std::unique_ptr<DiskBlockStore> other = Open(other_dir.path(), Filled(2));
  std::unique_ptr<DiskBlockStore> same = Open(same_dir.path(), Filled(1));
  ASSERT_NE(writer, nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_NE(same, nullptr);
  ASSERT_EQ(Codes(Write(*writer, {{0, K(1), 1}})), std::vector{StatusCode::kOk});
  fs::copy_file(writer->EntryPath(0), other->EntryPath(0));
  fs::copy_file(writer->EntryPath(0), same->EntryPath(0));
  EXPECT_EQ(Codes(Read(*other, {{0, K(1), 6}})), std::vector{StatusCode::kDataLoss});
  EXPECT_EQ(Codes(Read(*same, {{0, K(1), 6}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(6), Bytes(1));
}

TEST_F(DiskBlockStoreTest, ATemporaryFileIsNeverRead) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{0, K(1), 1}})), std::vector{StatusCode::kOk});
  const fs::path directory = store->entry_directory();
  EXPECT_FALSE(fs::exists(directory / "0.tmp"));  // renamed once whole
  // A whole entry left under slot 4's temporary name, and garbage under slot 0's.
  fs::copy_file(store->EntryPath(0), directory / "4.tmp");
  WriteText(directory / "0.tmp", "torn");
  EXPECT_EQ(Codes(Read(*store, {{4, K(1), 6}})), std::vector{StatusCode::kNotFound});
  EXPECT_EQ(Codes(Read(*store, {{0, K(1), 7}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(7), Bytes(1));
  // A write goes over the leftover.
  ASSERT_EQ(Codes(Write(*store, {{4, K(2), 2}})), std::vector{StatusCode::kOk});
  EXPECT_FALSE(fs::exists(directory / "4.tmp"));
  EXPECT_EQ(Codes(Read(*store, {{4, K(2), 6}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(6), Bytes(2));
}

TEST_F(DiskBlockStoreTest, RewritingASlotReplacesIt) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{0, K(1), 1}})), std::vector{StatusCode::kOk});
  ASSERT_EQ(Codes(Write(*store, {{0, K(3), 3}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Codes(Read(*store, {{0, K(1), 6}})), std::vector{StatusCode::kDataLoss});
  EXPECT_EQ(Codes(Read(*store, {{0, K(3), 6}})), std::vector{StatusCode::kOk});
  EXPECT_EQ(Bytes(6), Bytes(3));
  EXPECT_EQ(fs::file_size(store->EntryPath(0)), EntryBytes());
}

TEST_F(DiskBlockStoreTest, OpenRemovesTheDirectoriesOfDeadProcessesOnly) {
  const auto named = [&](const std::string& suffix) {
    return dir_.path() / ("switchyard-kv-" + suffix);
  };
  const fs::path dead = named(std::to_string(DeadPid()));
  const fs::path dead_store = named(std::to_string(DeadPid()) + "-3");
  const fs::path init = named("1");
  const fs::path parent = named(std::to_string(::getppid()));
  const fs::path not_a_pid = named("7x");
  const fs::path unrelated = dir_.path() / "models";
  const fs::path own = named(std::to_string(::getpid()));
  for (const fs::path& p : {dead, dead_store, init, parent, not_a_pid, unrelated, own}) {
    fs::create_directories(p);
    WriteText(p / "0.kv", "left over");
  }

  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(dead_store));
  // Live processes' folders stay, this process's other stores' included.
  for (const fs::path& p : {init, parent, not_a_pid, unrelated, own})
    EXPECT_TRUE(fs::exists(p / "0.kv")) << p;
  // The store's own folder is new and empty: nothing is reused across runs.
  EXPECT_TRUE(fs::is_directory(store->entry_directory()));
  EXPECT_TRUE(fs::is_empty(store->entry_directory()));
}

TEST_F(DiskBlockStoreTest, OpenMakesMissingParentsAndFailsWhereNoDirectoryCanBe) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path() / "a" / "b");
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(fs::is_directory(store->entry_directory()));

  WriteText(dir_.path() / "file", "not a directory");
  EXPECT_FALSE(
      DiskBlockStore::Open({.directory = (dir_.path() / "file").string()}, *pool_.region).ok());
}

TEST_F(DiskBlockStoreTest, DestructionRemovesTheEntryDirectory) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(Codes(Write(*store, {{0, K(1), 1}, {1, K(2), 2}})),
            (std::vector{StatusCode::kOk, StatusCode::kOk}));
  const fs::path directory = store->entry_directory();
  ASSERT_TRUE(fs::exists(directory));
  store.reset();
  EXPECT_FALSE(fs::exists(directory));
  EXPECT_TRUE(fs::is_directory(dir_.path()));
}

TEST_F(DiskBlockStoreTest, EveryCallbackRunsWhenTheStoreIsDestroyedRightAfterPosting) {
  std::unique_ptr<DiskBlockStore> store = Open(dir_.path());
  ASSERT_NE(store, nullptr);
  std::vector<std::shared_ptr<BatchResult>> writes, reads;
  for (int32_t i = 0; i < kBlocks; ++i) {
    auto [write, write_done] = BatchResult::Make();
    store->Write({{i, K(static_cast<uint8_t>(i)), i}, {i + 100, K(7), i}}, std::move(write_done));
    writes.push_back(write);
    auto [read, read_done] = BatchResult::Make();
    store->Read({{i + 200, K(static_cast<uint8_t>(i)), i}}, std::move(read_done));
    reads.push_back(read);
  }
  store.reset();
  for (const std::shared_ptr<BatchResult>& write : writes) {
    ASSERT_TRUE(write->done());
    EXPECT_EQ(Codes(write->Wait()), (std::vector{StatusCode::kOk, StatusCode::kOk}));
  }
  for (const std::shared_ptr<BatchResult>& read : reads) {
    ASSERT_TRUE(read->done());
    EXPECT_EQ(Codes(read->Wait()), std::vector{StatusCode::kNotFound});
  }
}

}  // namespace
}  // namespace switchyard::kvx
