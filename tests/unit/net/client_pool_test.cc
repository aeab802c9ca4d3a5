// ConnectionPool on its own, on an io_context run by the test thread: LIFO reuse, the
// per-upstream cap, skipping connections the server closed or wrote to (and trusting recently
// released ones without the check), the idle sweep, entries kept while held.
#include "net/internal/client_pool.h"

#include <poll.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::net::internal {
namespace {

using std::chrono::milliseconds;

// Connected socket pairs on loopback: `client` goes into the pool, `server` is the peer.
class PoolTest : public ::testing::Test {
 protected:
  struct Pair {
    Socket client;
    Socket server;
  };

  void SetUp() override {
    ErrorCode ec;
    acceptor_.open(tcp::v4(), ec);
    ASSERT_FALSE(ec);
    acceptor_.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0), ec);
    ASSERT_FALSE(ec);
    acceptor_.listen(16, ec);
    ASSERT_FALSE(ec);
  }

  Pair Connect() {
    Pair pair{Socket(context_), Socket(context_)};
    ErrorCode ec;
    pair.client.connect(acceptor_.local_endpoint(ec), ec);
    EXPECT_FALSE(ec) << ec.message();
    acceptor_.accept(pair.server, ec);
    EXPECT_FALSE(ec) << ec.message();
    return pair;
  }

  // A connection back from a call to `upstream` now: held, then released.
  static void Give(ConnectionPool& pool, const std::string& upstream, Socket&& socket) {
    pool.Release(pool.Hold(upstream), std::move(socket), ConnectionPool::Clock::now());
  }

  // What a call to `upstream` starting now takes from the pool (it lets go of the entry then).
  static std::optional<Socket> Take(ConnectionPool& pool, const std::string& upstream) {
    ConnectionPool::Upstream* entry = pool.Hold(upstream);
    std::optional<Socket> socket;
    pool.Acquire(entry, ConnectionPool::Clock::now(), &socket);
    pool.Drop(entry);
    return socket;
  }

  static uint16_t Port(const Socket& socket) {
    ErrorCode ec;
    return socket.local_endpoint(ec).port();
  }

  // Waits until `fd` has something to read (bytes or end-of-stream); false after a while.
  static bool Readable(int fd) {
    pollfd p = {fd, POLLIN, 0};
    return ::poll(&p, 1, 10'000) == 1;
  }

  // True when the peer of `server` closed it: a read returns end-of-stream or a reset.
  static bool PeerClosed(Socket& server) {
    if (!Readable(server.native_handle()))
      return false;
    char byte;
    ErrorCode ec;
    server.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  asio::io_context context_;
  Acceptor acceptor_{context_};
};

TEST_F(PoolTest, LastInFirstOutPerUpstream) {
  ConnectionPool pool(context_, 8, milliseconds(60'000));
  Pair a = Connect();
  Pair b = Connect();
  Pair other = Connect();
  const uint16_t port_a = Port(a.client);
  const uint16_t port_b = Port(b.client);
  Give(pool, "up:1", std::move(a.client));
  Give(pool, "up:1", std::move(b.client));
  Give(pool, "up:2", std::move(other.client));
  EXPECT_EQ(pool.idle_connections(), 3u);
  std::optional<Socket> first = Take(pool, "up:1");
  std::optional<Socket> second = Take(pool, "up:1");
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(Port(*first), port_b);
  EXPECT_EQ(Port(*second), port_a);
  EXPECT_FALSE(Take(pool, "up:1").has_value());
  EXPECT_FALSE(Take(pool, "up:3").has_value());
  EXPECT_EQ(pool.idle_connections(), 1u);
}

TEST_F(PoolTest, CapClosesTheOldest) {
  ConnectionPool pool(context_, 2, milliseconds(60'000));
  Pair a = Connect();
  Pair b = Connect();
  Pair c = Connect();
  Give(pool, "up:1", std::move(a.client));
  Give(pool, "up:1", std::move(b.client));
  Give(pool, "up:1", std::move(c.client));
  EXPECT_EQ(pool.idle_connections(), 2u);
  EXPECT_TRUE(PeerClosed(a.server));
  ConnectionPool keeps_none(context_, 0, milliseconds(60'000));
  Pair d = Connect();
  Give(keeps_none, "up:1", std::move(d.client));
  EXPECT_EQ(keeps_none.idle_connections(), 0u);
  EXPECT_TRUE(PeerClosed(d.server));
}

TEST_F(PoolTest, SkipsConnectionsClosedOrWrittenToWhileIdle) {
  ConnectionPool pool(context_, 8, milliseconds(60'000), /*trusted_idle=*/milliseconds(0));
  Pair healthy = Connect();
  Pair chatty = Connect();
  Pair closed = Connect();
  const uint16_t healthy_port = Port(healthy.client);
  const int chatty_fd = chatty.client.native_handle();
  const int closed_fd = closed.client.native_handle();
  Give(pool, "up:1", std::move(healthy.client));
  Give(pool, "up:1", std::move(chatty.client));
  Give(pool, "up:1", std::move(closed.client));
  ErrorCode ec;
  closed.server.close(ec);
  asio::write(chatty.server, asio::buffer("HTTP/1.1 200 OK\r\n", 17), ec);
  ASSERT_FALSE(ec);
  ASSERT_TRUE(Readable(chatty_fd));
  ASSERT_TRUE(Readable(closed_fd));
  std::optional<Socket> acquired = Take(pool, "up:1");
  ASSERT_TRUE(acquired.has_value());
  EXPECT_EQ(Port(*acquired), healthy_port);
  EXPECT_TRUE(PeerClosed(chatty.server));
  EXPECT_EQ(pool.idle_connections(), 0u);
}

// A connection back for less than trusted_idle goes out without the peek, even one the server
// has closed meanwhile (ClientCall replaces it when its request fails); after that, checked.
TEST_F(PoolTest, RecentlyReleasedConnectionsAreNotPeekedAt) {
  ConnectionPool pool(context_, 8, milliseconds(60'000), /*trusted_idle=*/milliseconds(200));
  Pair closed = Connect();
  const uint16_t closed_port = Port(closed.client);
  const int closed_fd = closed.client.native_handle();
  Give(pool, "up:1", std::move(closed.client));
  ErrorCode ec;
  closed.server.close(ec);
  ASSERT_TRUE(Readable(closed_fd));
  std::optional<Socket> trusted = Take(pool, "up:1");
  ASSERT_TRUE(trusted.has_value());
  EXPECT_EQ(Port(*trusted), closed_port);

  Give(pool, "up:1", std::move(*trusted));
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_FALSE(Take(pool, "up:1").has_value());
  EXPECT_EQ(pool.idle_connections(), 0u);
}

TEST_F(PoolTest, SweepClosesIdleConnections) {
  ConnectionPool pool(context_, 8, milliseconds(20));
  Pair a = Connect();
  Give(pool, "up:1", std::move(a.client));
  // The sweep timer is the only work on the context: run it until it fired.
  while (pool.idle_connections() > 0 && context_.run_one_for(std::chrono::seconds(10)) > 0) {
  }
  EXPECT_EQ(pool.idle_connections(), 0u);
  EXPECT_TRUE(PeerClosed(a.server));
}

TEST_F(PoolTest, CloseEmptiesAndRefusesMore) {
  ConnectionPool pool(context_, 8, milliseconds(60'000));
  Pair a = Connect();
  Pair b = Connect();
  Give(pool, "up:1", std::move(a.client));
  pool.Close();
  EXPECT_EQ(pool.idle_connections(), 0u);
  EXPECT_TRUE(PeerClosed(a.server));
  Give(pool, "up:1", std::move(b.client));
  EXPECT_EQ(pool.idle_connections(), 0u);
  EXPECT_TRUE(PeerClosed(b.server));
  pool.Close();
}

// A call's entry stays while it holds it, through sweeps and Close, so that its Release
// lands; with no holder and no connection, the sweep erases it.
TEST_F(PoolTest, HeldEntriesOutliveSweepsAndClose) {
  ConnectionPool pool(context_, 8, milliseconds(20));
  ConnectionPool::Upstream* held = pool.Hold("up:1");
  ConnectionPool::Upstream* dropped = pool.Hold("up:2");
  std::optional<Socket> none;
  EXPECT_FALSE(pool.Acquire(held, ConnectionPool::Clock::now(), &none));
  EXPECT_FALSE(none.has_value());
  pool.Drop(dropped);
  // The drop armed the sweep, the only work on the context.
  ASSERT_EQ(context_.run_one_for(std::chrono::seconds(10)), 1u);
  EXPECT_EQ(pool.Hold("up:1"), held);  // the same entry, held twice now
  pool.Drop(held);
  Pair a = Connect();
  const uint16_t port_a = Port(a.client);
  pool.Release(held, std::move(a.client), ConnectionPool::Clock::now());
  EXPECT_EQ(pool.idle_connections(), 1u);
  std::optional<Socket> taken = Take(pool, "up:1");
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(Port(*taken), port_a);

  ConnectionPool::Upstream* closing = pool.Hold("up:1");
  pool.Close();
  Pair b = Connect();
  pool.Release(closing, std::move(b.client), ConnectionPool::Clock::now());
  EXPECT_EQ(pool.idle_connections(), 0u);
  EXPECT_TRUE(PeerClosed(b.server));
}

}  // namespace
}  // namespace switchyard::net::internal
