// Test helpers for the HTTP server: a blocking HTTP/1.1 client over a plain POSIX socket,
// so that tests control the exact bytes sent, and a one-shot Notification to wait on with
// a deadline. Each client is used by one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace switchyard::net::testing {

// Long enough never to fire on a loaded CI machine; tests that pass do not wait for it.
inline constexpr std::chrono::milliseconds kTimeout{10'000};

struct TestResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::vector<std::string> chunks;  // the chunks of a chunked body, in order
  bool chunked = false;

  std::optional<std::string> Header(std::string_view lower_name) const;
};

class TestClient {
 public:
  // Connects to 127.0.0.1:port; ok() tells whether it did. A receive_buffer_bytes > 0 sets
  // SO_RCVBUF before connecting (a small one makes a non-reading client stall sooner). A
  // source_address (another loopback address, "127.0.0.2") makes the client another client
  // address to the server.
  explicit TestClient(int port, int receive_buffer_bytes = 0, const char* source_address = nullptr);
  ~TestClient();
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool ok() const { return fd_ >= 0; }

  // Sends every byte; false on error (the server closed the connection).
  bool Send(std::string_view bytes);

  // Reads one response: status line, headers, then a Content-Length, chunked or
  // read-until-close body (none for a HEAD request, a 1xx, 204 or 304). nullopt on timeout, on a
  // close before the response is complete, or on bytes that are not a response.
  std::optional<TestResponse> ReadResponse(bool head_request = false,
                                           std::chrono::milliseconds timeout = kTimeout);

  // Reads only the status line and headers.
  std::optional<TestResponse> ReadHead(std::chrono::milliseconds timeout = kTimeout);
  // Reads one chunk of a chunked body whose headers ReadHead returned. nullopt at the last
  // chunk, on timeout or on a close.
  std::optional<std::string> ReadChunk(std::chrono::milliseconds timeout = kTimeout);

  // True when the server closes the connection (end of stream or reset) within `timeout`
  // without sending anything more.
  bool WaitForClose(std::chrono::milliseconds timeout = kTimeout);

  void ShutdownWrite();
  void Close();

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  // Receives more into buffer_; false on close, error or deadline.
  bool Fill(Deadline deadline);
  bool ReadLine(Deadline deadline, std::string* line);
  bool ReadBytes(size_t n, Deadline deadline, std::string* out);
  // Reads one chunk into *chunk; *last at the last chunk (its trailers read too). False on
  // close, timeout or bad framing.
  bool ReadChunkUntil(Deadline deadline, std::string* chunk, bool* last);

  int fd_ = -1;
  std::string buffer_;  // received, not yet parsed
};

// "GET <target> HTTP/1.1" with a Host header and `extra` header lines ("Name: value\r\n").
std::string Get(std::string_view target, std::string_view extra = "");
// A POST with a Content-Length body.
std::string Post(std::string_view target, std::string_view body, std::string_view extra = "");

// Set once; waited on with a deadline.
class Notification {
 public:
  void Notify();
  bool HasBeenNotified();
  // True when notified before the timeout.
  bool WaitFor(std::chrono::milliseconds timeout = kTimeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace switchyard::net::testing
