#include "kvx/shared_memory_region.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <numeric>

#include "gtest/gtest.h"

#include "kvx/transfer_engine.h"
#include "transfer_test_memory.h"

namespace switchyard::kvx {
namespace {

// A connected AF_UNIX stream pair, closed at the end of the test.
struct SocketPair {
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a = UniqueFd(fds[0]);
    b = UniqueFd(fds[1]);
  }
  UniqueFd a;
  UniqueFd b;
};

TEST(SharedMemoryRegionTest, ACreatedRegionIsZeroedAndSized) {
  absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(8192, "kvx-test");
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_EQ(region->bytes().size(), 8192u);
  for (std::byte b : region->bytes())
    ASSERT_EQ(b, std::byte{0});
  EXPECT_EQ(SharedMemoryRegion::Create(0, "kvx-test").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegionTest, APeerAttachesThroughAUnixSocket) {
  SocketPair sockets;
  absl::StatusOr<SharedMemoryRegion> created = SharedMemoryRegion::Create(4096, "kvx-test");
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(SendFd(sockets.a.get(), created->fd()).ok());
  absl::StatusOr<UniqueFd> fd = ReceiveFd(sockets.b.get());
  ASSERT_TRUE(fd.ok()) << fd.status();
  absl::StatusOr<SharedMemoryRegion> attached = SharedMemoryRegion::Attach(*std::move(fd), 4096);
  ASSERT_TRUE(attached.ok()) << attached.status();
  ASSERT_NE(attached->bytes().data(), created->bytes().data());

  created->bytes()[100] = std::byte{0x5a};
  EXPECT_EQ(attached->bytes()[100], std::byte{0x5a});
  attached->bytes()[4095] = std::byte{0xa5};
  EXPECT_EQ(created->bytes()[4095], std::byte{0xa5});
}

TEST(SharedMemoryRegionTest, AttachRefusesAnotherSize) {
  SocketPair sockets;
  absl::StatusOr<SharedMemoryRegion> created = SharedMemoryRegion::Create(4096, "kvx-test");
  ASSERT_TRUE(created.ok());
  for (size_t expected : {size_t{4095}, size_t{8192}, size_t{0}}) {
    ASSERT_TRUE(SendFd(sockets.a.get(), created->fd()).ok());
    absl::StatusOr<UniqueFd> fd = ReceiveFd(sockets.b.get());
    ASSERT_TRUE(fd.ok());
    EXPECT_EQ(SharedMemoryRegion::Attach(*std::move(fd), expected).status().code(),
              absl::StatusCode::kInvalidArgument)
        << expected;
  }
}

TEST(SharedMemoryRegionTest, AttachRefusesWhatIsNotASizeSealedMemfd) {
  // A pipe: no memfd at all.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  UniqueFd pipe_write(pipe_fds[1]);
  EXPECT_EQ(SharedMemoryRegion::Attach(UniqueFd(pipe_fds[0]), 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A memfd whose size its sender could still shrink under our mapping.
  UniqueFd unsealed(::memfd_create("kvx-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_TRUE(unsealed.valid());
  ASSERT_EQ(::ftruncate(unsealed.get(), 4096), 0);
  EXPECT_EQ(SharedMemoryRegion::Attach(std::move(unsealed), 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegionTest, ReceiveRefusesAMessageWithoutADescriptor) {
  SocketPair sockets;
  ASSERT_EQ(::write(sockets.a.get(), "x", 1), 1);
  EXPECT_EQ(ReceiveFd(sockets.b.get()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegionTest, ReceiveRefusesSeveralDescriptors) {
  SocketPair sockets;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  char payload = 'F';
  iovec iov{&payload, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * 2);
  std::memcpy(CMSG_DATA(cmsg), pipe_fds, sizeof(int) * 2);
  ASSERT_EQ(::sendmsg(sockets.a.get(), &msg, 0), 1);
  EXPECT_EQ(ReceiveFd(sockets.b.get()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SharedMemoryRegionTest, ReceiveReportsAClosedPeer) {
  SocketPair sockets;
  sockets.a = UniqueFd();
  EXPECT_EQ(ReceiveFd(sockets.b.get()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(SendFd(sockets.b.get(), sockets.b.get()).ok());
}

// What the cross-engine host tier will do: blocks copied by the transfer engine into an
// interleaved store in shared memory are there for the process that attached to it.
TEST(SharedMemoryRegionTest, BlocksAnEngineCopiesInAreThereForThePeer) {
  const KvBlockLayout layout = *KvBlockLayout::ForKvCache(2, 4, 2, 8, 2);
  constexpr int32_t kBlocks = 8;
  PoolMemory pool(layout, kBlocks, 3);
  SocketPair sockets;
  absl::StatusOr<SharedMemoryRegion> created =
      SharedMemoryRegion::Create(layout.block_bytes() * kBlocks, "kvx-tier");
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(SendFd(sockets.a.get(), created->fd()).ok());
  absl::StatusOr<UniqueFd> fd = ReceiveFd(sockets.b.get());
  ASSERT_TRUE(fd.ok());
  absl::StatusOr<SharedMemoryRegion> attached =
      SharedMemoryRegion::Attach(*std::move(fd), layout.block_bytes() * kBlocks);
  ASSERT_TRUE(attached.ok());
  {
    TransferEngine engine({.num_threads = 1});
    absl::StatusOr<MemoryRegion> tier =
        MemoryRegion::ForInterleaved(layout, created->bytes(), kBlocks);
    ASSERT_TRUE(tier.ok());
    const BlockListHandle pool_table =
        *engine.PrepareBlockList(engine.RegisterRegion(*pool.region), {{5, 6}});
    const BlockListHandle tier_table =
        *engine.PrepareBlockList(engine.RegisterRegion(*tier), {{0, 1}});
    CallbackLog log;
    ASSERT_TRUE(engine.Post(pool_table, {{0, 1}}, tier_table, {{0, 1}}, log.Callback(0)).ok());
    log.WaitForCalls(1);
    ASSERT_EQ(log.Calls(0).at(0).state, TransferState::kDone);
  }
  for (int32_t b = 0; b < 2; ++b) {
    for (size_t s = 0; s < layout.num_segments(); ++s) {
      std::span<std::byte> expected = pool.Segment(layout, 5 + b, s);
      EXPECT_EQ(std::memcmp(
                    attached->bytes().data() + b * layout.block_bytes() + layout.segment_offset(s),
                    expected.data(), expected.size()),
                0);
    }
  }
}

// The child attaches to the parent's region through the socket and writes a pattern; the
// parent reads it after the child has exited.
TEST(SharedMemoryRegionTest, AChildProcessWritesWhatTheParentReads) {
  constexpr size_t kBytes = 1 << 20;
  SocketPair sockets;
  absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(kBytes, "kvx-fork");
  ASSERT_TRUE(region.ok()) << region.status();

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<UniqueFd> fd = ReceiveFd(sockets.b.get());
    if (!fd.ok())
      ::_exit(2);
    absl::StatusOr<SharedMemoryRegion> attached =
        SharedMemoryRegion::Attach(*std::move(fd), kBytes);
    if (!attached.ok())
      ::_exit(3);
    for (size_t i = 0; i < kBytes; ++i)
      attached->bytes()[i] = static_cast<std::byte>((i * 31 + 7) & 0xff);
    ::_exit(0);
  }
  ASSERT_TRUE(SendFd(sockets.a.get(), region->fd()).ok());
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status));
  ASSERT_EQ(WEXITSTATUS(wait_status), 0);
  for (size_t i = 0; i < kBytes; ++i)
    ASSERT_EQ(region->bytes()[i], static_cast<std::byte>((i * 31 + 7) & 0xff)) << i;
}

}  // namespace
}  // namespace switchyard::kvx
