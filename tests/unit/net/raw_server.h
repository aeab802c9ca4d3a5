// Test helper for the HTTP client: a listening POSIX socket on 127.0.0.1 (port 0) whose
// connections the test scripts byte by byte, for upstreams that misbehave (close without
// answering, reset mid-body, never answer, close a keep-alive connection). Each object is
// used by one thread at a time.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "test_client.h"

namespace switchyard::net::testing {

class RawConnection {
 public:
  RawConnection() = default;
  explicit RawConnection(int fd) : fd_(fd) {}
  ~RawConnection();
  RawConnection(RawConnection&& other) noexcept;
  RawConnection& operator=(RawConnection&& other) noexcept;

  bool ok() const { return fd_ >= 0; }

  // Reads one request: its head and its Content-Length body. nullopt on close or timeout.
  std::optional<std::string> ReadRequest(std::chrono::milliseconds timeout = kTimeout);
  // Sends every byte; false on error.
  bool Send(std::string_view bytes);
  // True when the peer closes (end of stream or reset) within `timeout`; bytes that arrive
  // meanwhile are discarded.
  bool WaitForClose(std::chrono::milliseconds timeout = kTimeout);
  // Closes with a FIN.
  void Close();
  // Closes with a RST (SO_LINGER 0).
  void Reset();

 private:
  int fd_ = -1;
  std::string buffer_;  // received, not yet returned
};

class RawServer {
 public:
  // Listens on 127.0.0.1 with a free port; ok() tells whether it does.
  explicit RawServer(int backlog = 64);
  ~RawServer();
  RawServer(const RawServer&) = delete;
  RawServer& operator=(const RawServer&) = delete;

  bool ok() const { return fd_ >= 0; }
  int port() const { return port_; }
  std::string upstream() const;  // "127.0.0.1:<port>"

  // The next connection, or one that is not ok() after `timeout`.
  RawConnection Accept(std::chrono::milliseconds timeout = kTimeout);

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace switchyard::net::testing
