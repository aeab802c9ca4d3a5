#include "router/shared/replica_update.h"

#include <string>

#include "gtest/gtest.h"

namespace switchyard::router {
namespace {

ReplicaUpdate Sample() {
  ReplicaUpdate u;
  u.replica_id = "router-0-12ab";
  u.prefixes = {{"10.0.0.7:8000", {1, 2, 0xffffffffffffffffull}}, {"10.0.0.8:8000", {}}};
  u.sessions = {{"session-1", "10.0.0.7:8000"}};
  u.charges = {{"team-a", 3, 1200}, {"team-b", 0, -5}};
  u.load = {{"10.0.0.7:8000", 2, 512, 700}};
  return u;
}

TEST(ReplicaUpdateTest, RoundTrips) {
  const ReplicaUpdate u = Sample();
  const std::string bytes = EncodeReplicaUpdate(u);
  absl::StatusOr<ReplicaUpdate> back = DecodeReplicaUpdate(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, u);
  EXPECT_EQ(bytes.substr(0, 5), std::string("SYRU\x01", 5));
  // An empty update is a few bytes: the magic, the id and four zero counts.
  EXPECT_EQ(EncodeReplicaUpdate({.replica_id = "r"}).size(), 5u + 3u + 16u);
}

TEST(ReplicaUpdateTest, EveryTruncationAndTrailingByteIsRefused) {
  const std::string bytes = EncodeReplicaUpdate(Sample());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(DecodeReplicaUpdate(bytes.substr(0, n)).ok()) << n;
  EXPECT_FALSE(DecodeReplicaUpdate(bytes + "x").ok());
  std::string other_version = bytes;
  other_version[4] = 2;
  EXPECT_FALSE(DecodeReplicaUpdate(other_version).ok());
}

TEST(ReplicaUpdateTest, HugeCountsAreRefusedWithoutAllocating) {
  // The id, then a prefix count of 2^32 - 1 with nothing behind it.
  std::string bytes("SYRU\x01\x01\x00r\xff\xff\xff\xff", 12);
  EXPECT_FALSE(DecodeReplicaUpdate(bytes).ok());
  // One prefix whose key count passes the bound.
  ReplicaUpdate u{.replica_id = "r"};
  u.prefixes = {{"e", std::vector<uint64_t>(kMaxPrefixKeys)}};
  std::string big = EncodeReplicaUpdate(u);
  EXPECT_TRUE(DecodeReplicaUpdate(big).ok());
  // Patch the key count (after magic 5, id 3, prefix count 4, endpoint 3) past the bound.
  const uint32_t over = kMaxPrefixKeys + 1;
  big.replace(15, 4, reinterpret_cast<const char*>(&over), 4);
  big.append(8, '\0');
  EXPECT_FALSE(DecodeReplicaUpdate(big).ok());
}

}  // namespace
}  // namespace switchyard::router
