// PeerBlockServer and PeerBlockClient over real loopback TCP: blocks arrive byte-exact,
// lookups and leases reach the source, and every failure (wrong secret, another model, a
// bad id, garbage, a silent or vanished peer, too many connections, a server process killed
// mid-transfer) ends in a clean error with the server still serving.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/mutex.h"
#include "kvx/kv_block_layout.h"
#include "kvx/memory_region.h"
#include "kvx/peer_block_client.h"
#include "kvx/peer_block_server.h"
#include "kvx/tcp_socket.h"

namespace switchyard::kvx {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kLayers = 3;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kHeads = 2;
constexpr int64_t kHeadDim = 8;
constexpr int64_t kBlocks = 32;

KvBlockLayout Layout() {
  return *KvBlockLayout::ForKvCache(kLayers, kBlockSize, kHeads, kHeadDim, /*dtype_bytes=*/2);
}

// An engine-pool-shaped region (one pool per segment) over owned memory.
struct Pool {
  explicit Pool(uint32_t seed) {
    const KvBlockLayout layout = Layout();
    std::mt19937 rng(seed);
    std::vector<std::span<std::byte>> spans;
    for (size_t s = 0; s < layout.num_segments(); ++s) {
      auto& pool = pools.emplace_back(layout.segment_bytes(s) * kBlocks);
      for (auto& b : pool)
        b = static_cast<std::byte>(rng());
    }
    for (auto& pool : pools)
      spans.emplace_back(pool);
    region = std::make_unique<MemoryRegion>(*MemoryRegion::ForPools(layout, spans, kBlocks));
  }
  std::vector<std::byte> Block(int32_t id) const {
    std::vector<std::byte> out;
    for (size_t s = 0; s < region->layout().num_segments(); ++s) {
      const std::byte* p = region->addr(id, s);
      out.insert(out.end(), p, p + region->layout().segment_bytes(s));
    }
    return out;
  }
  std::vector<std::vector<std::byte>> pools;
  std::unique_ptr<MemoryRegion> region;
};

PeerDigest Hash(uint8_t n) {
  PeerDigest d{};
  d[0] = n;
  return d;
}

// Holds hashes 1..held at blocks 10..; records pins.
class FakeSource : public PeerBlockSource {
 public:
  explicit FakeSource(int held) : held_(held) {}
  absl::StatusOr<PeerLookupResult> Lookup(std::span<const PeerDigest> hashes) override {
    PeerLookupResult result{.lease_ms = 5000};
    for (const PeerDigest& h : hashes) {
      if (h[0] == 0 || h[0] > held_)
        break;
      result.block_ids.push_back(9 + h[0]);
    }
    base::MutexLock lock(&mu_);
    for (uint32_t id : result.block_ids)
      pinned_.push_back(static_cast<int32_t>(id));
    return result;
  }
  absl::StatusOr<uint64_t> BeginRead(std::span<const int32_t> ids) override {
    for (int32_t id : ids) {
      if (id == 31)
        return absl::NotFoundError("block 31 was evicted");
    }
    base::MutexLock lock(&mu_);
    return static_cast<uint64_t>(reads_begun_++);
  }
  void EndRead(uint64_t read) override {
    base::MutexLock lock(&mu_);
    EXPECT_LT(read, static_cast<uint64_t>(reads_begun_));  // a token BeginRead gave
    ++reads_ended_;
  }
  void Release(std::span<const int32_t> ids) override {
    base::MutexLock lock(&mu_);
    released_.insert(released_.end(), ids.begin(), ids.end());
  }
  std::vector<int32_t> released() {
    base::MutexLock lock(&mu_);
    return released_;
  }
  std::pair<int, int> reads() {
    base::MutexLock lock(&mu_);
    return {reads_begun_, reads_ended_};
  }

 private:
  const int held_;
  base::Mutex mu_;
  std::vector<int32_t> pinned_ ABSL_GUARDED_BY(mu_);
  std::vector<int32_t> released_ ABSL_GUARDED_BY(mu_);
  int reads_begun_ ABSL_GUARDED_BY(mu_) = 0;
  int reads_ended_ ABSL_GUARDED_BY(mu_) = 0;
};

PeerHandshakeOptions Handshake(const std::string& engine_id, const std::string& secret = "s3",
                               uint8_t compat = 7) {
  PeerHandshakeOptions options{.engine_id = engine_id, .secret = secret};
  options.compatibility_hash.fill(compat);
  return options;
}

class PeerBlockTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PeerBlockServerOptions options{
        .handshake = Handshake("prefill-0"), .max_connections = 3, .io_timeout = absl::Seconds(5)};
    auto server = PeerBlockServer::Start(options, *source_pool_.region, &source_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  absl::StatusOr<std::unique_ptr<PeerBlockClient>> Connect(
      PeerHandshakeOptions options = Handshake("decode-0"),
      absl::Duration timeout = absl::Seconds(5)) {
    return PeerBlockClient::Connect("127.0.0.1", server_->port(), options, timeout);
  }

  Pool source_pool_{1};
  FakeSource source_{4};
  std::unique_ptr<PeerBlockServer> server_;
};

TEST_F(PeerBlockTransferTest, ReadBlocksArriveByteExactInTheBlocksNamed) {
  auto client = Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->peer_engine_id(), "prefill-0");
  Pool local(2);
  const std::vector<int64_t> remote = {5, 6, 7, 0, 30};
  const std::vector<int32_t> into = {1, 2, 3, 20, 4};
  const auto untouched = local.Block(0);
  ASSERT_TRUE((*client)->ReadBlocks(remote, *local.region, into).ok());
  for (size_t i = 0; i < remote.size(); ++i)
    EXPECT_EQ(local.Block(into[i]), source_pool_.Block(remote[i])) << i;
  EXPECT_EQ(local.Block(0), untouched);
  EXPECT_EQ(server_->counters().blocks_sent, 5u);
  EXPECT_EQ(server_->counters().bytes_sent, 5 * Layout().block_bytes());
  EXPECT_EQ(source_.reads(), std::make_pair(1, 1));
}

TEST_F(PeerBlockTransferTest, AnInterleavedDestinationReceivesTheSameBytes) {
  auto client = Connect();
  ASSERT_TRUE(client.ok());
  std::vector<std::byte> store(Layout().block_bytes() * 4);
  auto region = *MemoryRegion::ForInterleaved(Layout(), store, 4);
  const std::vector<int64_t> remote = {9, 8};
  const std::vector<int32_t> into = {3, 0};
  ASSERT_TRUE((*client)->ReadBlocks(remote, region, into).ok());
  const auto expect9 = source_pool_.Block(9);
  EXPECT_EQ(0,
            std::memcmp(store.data() + 3 * Layout().block_bytes(), expect9.data(), expect9.size()));
}

TEST_F(PeerBlockTransferTest, LookupReturnsTheHeldPrefixAndReleaseReachesTheSource) {
  auto client = Connect();
  ASSERT_TRUE(client.ok());
  const std::vector<PeerDigest> hashes = {Hash(1), Hash(2), Hash(3), Hash(9), Hash(4)};
  auto result = (*client)->Lookup(hashes);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->block_ids, ElementsAre(10, 11, 12));
  EXPECT_EQ(result->lease_ms, 5000u);
  const std::vector<int64_t> ids = {10, 11, 12};
  ASSERT_TRUE((*client)->Release(ids).ok());
  // The release has no reply; a later request on the same connection orders after it.
  ASSERT_TRUE((*client)->Lookup({}).ok());
  EXPECT_THAT(source_.released(), ElementsAre(10, 11, 12));
}

TEST_F(PeerBlockTransferTest, RefusedReadsLeaveTheConnectionUsable) {
  auto client = Connect();
  ASSERT_TRUE(client.ok());
  Pool local(3);
  const std::vector<int64_t> out_of_range = {1, 32};
  const std::vector<int32_t> into = {0, 1};
  absl::Status status = (*client)->ReadBlocks(out_of_range, *local.region, into);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("block id 32 is outside this engine's 32"));

  const std::vector<int64_t> evicted = {31};
  const std::vector<int64_t> remote_one = {0};
  const std::vector<int32_t> one = {0};
  EXPECT_EQ((*client)->ReadBlocks(evicted, *local.region, one).code(), absl::StatusCode::kNotFound);

  const std::vector<int32_t> bad_local = {99};
  EXPECT_EQ((*client)->ReadBlocks(remote_one, *local.region, bad_local).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> not_an_id = {int64_t{1} << 33};
  EXPECT_EQ((*client)->ReadBlocks(not_an_id, *local.region, one).code(),
            absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE((*client)->ReadBlocks(remote_one, *local.region, one).ok());
  EXPECT_EQ(local.Block(0), source_pool_.Block(0));
  EXPECT_EQ(server_->counters().reads_failed, 2u);
}

TEST_F(PeerBlockTransferTest, AWrongSecretOrAnotherModelIsRefused) {
  auto wrong_secret = Connect(Handshake("decode-0", "not-the-secret"));
  EXPECT_EQ(wrong_secret.status().code(), absl::StatusCode::kUnauthenticated);
  auto other_model = Connect(Handshake("decode-0", "s3", /*compat=*/8));
  EXPECT_EQ(other_model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_model.status().message(), HasSubstr("incompatible"));
  auto good = Connect();
  EXPECT_TRUE(good.ok()) << good.status();
}

TEST_F(PeerBlockTransferTest, ConnectionsOverTheLimitAreRefusedAsBusy) {
  auto a = Connect();
  auto b = Connect();
  auto b2 = Connect();
  ASSERT_TRUE(a.ok() && b.ok() && b2.ok());
  auto c = Connect();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  a->reset();
  // The freed slot is reaped at the next accept; retry until it is.
  absl::StatusOr<std::unique_ptr<PeerBlockClient>> d = c.status();
  for (int i = 0; i < 100 && !d.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    d = Connect();
  }
  EXPECT_TRUE(d.ok()) << d.status();
}

TEST_F(PeerBlockTransferTest, GarbageFromAPeerClosesOnlyItsConnection) {
  auto fd = ConnectTcp("127.0.0.1", server_->port(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_GT(send(fd->get(), junk, sizeof(junk), MSG_NOSIGNAL), 0);
  // The server answers with its hello and then a refusal, and closes.
  char buf[4096];
  std::string got;
  for (int i = 0; i < 200; ++i) {
    const ssize_t n = recv(fd->get(), buf, sizeof(buf), 0);
    if (n == 0)
      break;
    if (n > 0)
      got.append(buf, static_cast<size_t>(n));
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(got, HasSubstr("bad magic"));
  auto good = Connect();
  EXPECT_TRUE(good.ok()) << good.status();
}

TEST_F(PeerBlockTransferTest, ASilentPeerTimesOut) {
  auto listener = ListenTcp("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  // Accepted by the kernel's backlog, never answered: a stopped (SIGSTOP) engine.
  auto client = PeerBlockClient::Connect("127.0.0.1", *LocalPort(listener->get()),
                                         Handshake("decode-0"), absl::Milliseconds(200));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(PeerBlockTransferTest, AServerThatGoesAwayBreaksTheClientCleanly) {
  auto client = Connect();
  ASSERT_TRUE(client.ok());
  server_.reset();
  Pool local(4);
  const std::vector<int64_t> remote_one = {0};
  const std::vector<int32_t> one = {0};
  const absl::Status status = (*client)->ReadBlocks(remote_one, *local.region, one);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ((*client)->ReadBlocks(remote_one, *local.region, one).code(),
            absl::StatusCode::kFailedPrecondition);
}

// The source's side of the kill test below: lends every block, and a read's start sends the
// whole process a SIGKILL 2 ms later, while the blocks stream.
class DiesMidReadSource : public PeerBlockSource {
 public:
  absl::StatusOr<PeerLookupResult> Lookup(std::span<const PeerDigest>) override {
    return PeerLookupResult{};
  }
  absl::StatusOr<uint64_t> BeginRead(std::span<const int32_t>) override {
    std::thread([] {
      ::usleep(2000);
      ::raise(SIGKILL);
    }).detach();
    return 0;
  }
  void EndRead(uint64_t) override {}
  void Release(std::span<const int32_t>) override {}
};

// kill -9 of the lending engine while a read streams: the reader gets Unavailable (the
// stream ends mid-frame), not a hang or a partial success, and its connection is done.
// 256 MiB take far longer than 2 ms over loopback, so the kill lands mid-transfer.
TEST(PeerBlockServerKillTest, AServerKilledMidTransferBreaksTheReadCleanly) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan does not support threads started after fork";
#endif
  const KvBlockLayout layout = *KvBlockLayout::ForKvCache(8, 16, 8, 128, 2);  // 512 KiB blocks
  constexpr int64_t kBigBlocks = 512;
  std::vector<std::byte> store(layout.block_bytes() * kBigBlocks);
  const MemoryRegion region = *MemoryRegion::ForInterleaved(layout, store, kBigBlocks);
  int port_pipe[2];
  ASSERT_EQ(::pipe(port_pipe), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(port_pipe[0]);
    DiesMidReadSource source;
    auto server = PeerBlockServer::Start({.handshake = Handshake("prefill-0")}, region, &source);
    if (!server.ok())
      ::_exit(2);
    const uint16_t port = (*server)->port();
    if (::write(port_pipe[1], &port, sizeof(port)) != sizeof(port))
      ::_exit(3);
    while (true)
      ::pause();  // until the SIGKILL
  }
  ::close(port_pipe[1]);
  uint16_t port = 0;
  ASSERT_EQ(::read(port_pipe[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  ::close(port_pipe[0]);

  auto client =
      PeerBlockClient::Connect("127.0.0.1", port, Handshake("decode-0"), absl::Seconds(10));
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<std::byte> local_store(store.size());
  const MemoryRegion local = *MemoryRegion::ForInterleaved(layout, local_store, kBigBlocks);
  std::vector<int64_t> remote_ids(kBigBlocks);
  std::iota(remote_ids.begin(), remote_ids.end(), 0);
  std::vector<int32_t> local_ids(kBigBlocks);
  std::iota(local_ids.begin(), local_ids.end(), 0);
  const absl::Status read = (*client)->ReadBlocks(remote_ids, local, local_ids);
  EXPECT_EQ(read.code(), absl::StatusCode::kUnavailable) << read;
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_EQ((*client)->ReadBlocks(remote_ids, local, local_ids).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(PeerBlockTransferTest, ManyClientsReadConcurrently) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto client = Connect();
      if (!client.ok())
        return;
      Pool local(10 + t);
      std::vector<int32_t> ids(kBlocks - 1);
      for (int32_t i = 0; i < kBlocks - 1; ++i)
        ids[i] = i;
      const std::vector<int64_t> remote(ids.begin(), ids.end());
      for (int round = 0; round < 20; ++round) {
        if (!(*client)->ReadBlocks(remote, *local.region, ids).ok())
          return;
      }
      for (int32_t id : ids) {
        if (local.Block(id) != source_pool_.Block(id))
          return;
      }
      ok.fetch_add(1);
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(ok.load(), 2);
}

}  // namespace
}  // namespace switchyard::kvx
