#include "kvx/shared_host_tier.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace switchyard::kvx {
namespace {

std::array<uint8_t, 32> Digest(uint8_t v) {
  std::array<uint8_t, 32> d{};
  d.fill(v);
  return d;
}

BlockTierIndex::Key Key(uint8_t v) {
  BlockTierIndex::Key k{};
  k.fill(v);
  return k;
}

class SharedHostTierTest : public ::testing::Test {
 protected:
  SharedHostTierTest()
      : name_("unit-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()) {}
  ~SharedHostTierTest() override { shm_unlink(("/switchyard-kv-" + name_).c_str()); }

  std::string name_;
};

TEST_F(SharedHostTierTest, ASecondOpenerSharesTheIndexAndTheBlocks) {
  auto first = SharedHostTier::Open(name_, 4, 64, Digest(1));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE((*first)->created());
  auto second = SharedHostTier::Open(name_, 4, 64, Digest(1));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE((*second)->created());

  std::optional<BlockTierIndex::Key> evicted;
  const std::optional<int64_t> slot = (*first)->index().BeginWrite(Key(7), &evicted);
  ASSERT_TRUE(slot.has_value());
  (*first)->blocks()[static_cast<size_t>(*slot) * 64] = std::byte{0x5a};
  EXPECT_FALSE((*second)->index().IsReadable(Key(7)));  // still being written
  (*first)->index().EndWrite(*slot, /*ok=*/true);
  const std::optional<int64_t> read = (*second)->index().Acquire(Key(7));
  ASSERT_EQ(read, slot);
  EXPECT_EQ((*second)->blocks()[static_cast<size_t>(*read) * 64], std::byte{0x5a});
  (*second)->index().Release(*read);
  // One index: the key is held for both, so neither writes it again.
  EXPECT_FALSE((*second)->index().BeginWrite(Key(7), &evicted).has_value());
  EXPECT_EQ((*first)->index().num_used(), 1);
}

TEST_F(SharedHostTierTest, AnotherModelOrGeometryIsRefused) {
  auto first = SharedHostTier::Open(name_, 4, 64, Digest(1));
  ASSERT_TRUE(first.ok()) << first.status();
  // Same size in bytes, other KV: the digest tells them apart.
  auto other_kv = SharedHostTier::Open(name_, 4, 64, Digest(2));
  EXPECT_EQ(other_kv.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other_kv.status().message().find("holds other KV"), std::string_view::npos)
      << other_kv.status();
  auto other_size = SharedHostTier::Open(name_, 8, 64, Digest(1));
  EXPECT_EQ(other_size.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SharedHostTierTest, ANameMustBePlain) {
  for (const char* bad : {"", "a/b", "a b", "..%"}) {
    EXPECT_EQ(SharedHostTier::Open(bad, 4, 64, Digest(1)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace switchyard::kvx
