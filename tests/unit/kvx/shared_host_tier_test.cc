#include "kvx/shared_host_tier.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
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

TEST_F(SharedHostTierTest, JoiningTakesBackWhatAKilledEngineHeld) {
  auto first = SharedHostTier::Open(name_, 4, 64, Digest(1));
  ASSERT_TRUE(first.ok()) << first.status();
  std::optional<BlockTierIndex::Key> evicted;
  const std::optional<int64_t> stored = (*first)->index().BeginWrite(Key(1), &evicted);
  ASSERT_TRUE(stored.has_value());
  (*first)->index().EndWrite(*stored, /*ok=*/true);

  // An engine that dies mid-write of one block and mid-read of another.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto engine = SharedHostTier::Open(name_, 4, 64, Digest(1));
    const bool held = engine.ok() && (*engine)->index().BeginWrite(Key(2), &evicted) &&
                      (*engine)->index().Acquire(Key(1));
    ::_exit(held ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE((*first)->index().Contains(Key(2)));
  EXPECT_TRUE((*first)->index().IsPinned(*stored));

  auto restarted = SharedHostTier::Open(name_, 4, 64, Digest(1));
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_FALSE((*restarted)->index().Contains(Key(2)));
  EXPECT_FALSE((*restarted)->index().IsPinned(*stored));
  EXPECT_EQ((*restarted)->index().num_used(), 1);
}

TEST_F(SharedHostTierTest, AnEngineInAnotherPidNamespaceIsRefused) {
  auto first = SharedHostTier::Open(name_, 4, 64, Digest(1));
  ASSERT_TRUE(first.ok()) << first.status();
  // The child moves its children into a new pid namespace (a user namespace lets an
  // unprivileged process do so); its child then joins. Exit codes: 0 refused as expected,
  // 1 anything else, 2 no namespaces here.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWPID) != 0 && ::unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0)
      ::_exit(2);
    const pid_t inner = ::fork();
    if (inner == 0) {
      auto joined = SharedHostTier::Open(name_, 4, 64, Digest(1));
      ::_exit(!joined.ok() &&
                      joined.status().message().find("pid namespace") != std::string_view::npos
                  ? 0
                  : 1);
    }
    int inner_status = 0;
    ::waitpid(inner, &inner_status, 0);
    ::_exit(WIFEXITED(inner_status) ? WEXITSTATUS(inner_status) : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 2)
    GTEST_SKIP() << "no pid namespaces here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
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
