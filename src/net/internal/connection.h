// HttpConnection: one accepted socket on one EventLoop, from accept to close. It reads and
// parses requests one at a time (a RequestParser under the server's limits and
// timeouts), hands each to the handler with an HttpResponder, writes the response through
// a queue with one write outstanding, then reads the next request or closes.
//
// connection.cc has the read side, connection_response.cc the response side.
//
// Threads: every method runs on the connection's loop; responders on other threads reach
// it by posting (responder.h). ConnectionStatus is the part they read directly.
//
// Ownership: the loop's ConnectionRegistry holds the connection from Start until Close, and
// pending operations hold it while they are queued. Responders hold only a weak_ptr, so no
// connection (with its socket) outlives the loop's io_context.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "net/http_server.h"
#include "net/internal/beast.h"
#include "net/internal/deadline.h"
#include "net/internal/event_loop.h"
#include "net/internal/message_parser.h"
#include "net/internal/server_context.h"
#include "net/internal/wire.h"

namespace switchyard::net::internal {

class HttpConnection;
class HttpResponderImpl;

// What responders on any thread read about their connection.
struct ConnectionStatus {
  std::atomic<bool> closed{false};
  // Bytes handed to Send/Write (still in the loop's queue) or queued on the connection and
  // not yet written to the socket.
  std::atomic<size_t> pending_write_bytes{0};
};

// The live connections of one loop, so that Stop can close them. Loop thread only.
class ConnectionRegistry {
 public:
  void Add(std::shared_ptr<HttpConnection> connection);
  void Remove(HttpConnection* connection);
  void CloseAll();
  // Closes the connection, other than `except`, that has waited the longest for a request
  // (idle between requests, or with its request head still incomplete: a slow client), to
  // make room for `except`. False when none is waiting (all are being answered or reading a
  // body).
  bool ShedLongestWaiting(const HttpConnection* except);

 private:
  std::unordered_map<HttpConnection*, std::shared_ptr<HttpConnection>> connections_;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  // Constructed on `loop`, the loop it lives on; holds `slot` until it closes.
  HttpConnection(Socket socket, ConnectionSlot slot, ServerContext* server,
                 ConnectionRegistry* registry, EventLoop* loop);
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Starts reading the first request; the header timeout counts from now.
  void Start();
  // Closes the socket at once. If a response is not fully written, its close callback runs
  // (here, on the loop). Idempotent.
  void Close();
  // Since when it has been waiting for a request (idle, or its head incomplete) or for the
  // client to read its last response and close; nullopt while a request is read past its
  // head or answered.
  std::optional<std::chrono::steady_clock::time_point> WaitingSince() const;

  // The responder's operations. `seq` names the request being answered; calls for an older
  // request, calls out of order (Write before StartStream, a second Send) and calls after
  // Close are dropped. Send and Write first take the bytes the responder counted off
  // ConnectionStatus::pending_write_bytes.
  void Send(uint64_t seq, int status, std::string_view content_type, std::string body,
            const HeaderList& extra_headers);
  void StartStream(uint64_t seq, int status, std::string_view content_type,
                   const HeaderList& extra_headers);
  void Write(uint64_t seq, std::string data);
  void End(uint64_t seq);
  // Runs callback now when closed; keeps it when `seq`'s response is still being made;
  // drops it otherwise (that response was fully written).
  void SetCloseCallback(uint64_t seq, std::function<void()> callback);
  // Runs callback now when the bytes not yet written are at most `low_water`; else keeps it
  // until a write brings them there. Dropped when `seq`'s response is not being made, and
  // when the connection closes or the response is fully written.
  void SetDrainCallback(uint64_t seq, size_t low_water, std::function<void()> callback);

 private:
  // What the read side is doing.
  enum class Phase {
    kIdle,      // keep-alive, waiting for the next request's first byte
    kHeader,    // reading the request line and headers
    kBody,      // reading the body
    kHandling,  // the handler has the request; reading only to notice a disconnect
    kDraining,  // the last response is going or gone; reading only to discard until close
  };
  enum class Response { kNone, kAwaiting, kStreaming, kEnded };

  void NewParser();
  void Read();
  void OnRead(const ErrorCode& ec, size_t bytes);
  void Parse();
  // Reads on for more of the request, its timeout running: the header timeout from the first
  // read of the request that did not complete its head (armed once per request), the body
  // timeout from each read.
  void ReadMore();
  void Dispatch();
  void Reject(int status, std::string_view message);
  void MaybeSendContinue();

  Persistence PersistenceFor(bool close) const;
  void Enqueue(std::string bytes);
  void Flush();
  void OnWrite(const ErrorCode& ec, size_t bytes);
  void OnWritesDone();
  void MaybeRunDrainCallback();
  void FinishResponse();
  void StartDraining();

  void ArmReadTimer(std::chrono::milliseconds timeout);
  void OnReadTimeout();
  // The phase a connection waits in (kIdle, kHeader, kDraining) starts now.
  void StartWaiting(Phase phase);

  ServerContext* const server_;
  ConnectionRegistry* const registry_;
  EventLoop* const loop_;
  const std::shared_ptr<ConnectionStatus> status_;
  Socket socket_;
  std::string remote_address_;
  ConnectionSlot slot_;
  bool closed_ = false;
  std::chrono::steady_clock::time_point waiting_since_;  // see WaitingSince

  // Read side. While a request is read, reads land straight in in_, which the parser
  // consumes. While the handler has the request, and after, they land in read_chunk_ and are
  // appended to in_ once done, so that in_ can be parsed and consumed (the next request, when
  // the response ends) while the disconnect-detecting read is outstanding. Both are small
  // while the connection waits (a slow or idle client holds little memory): in_ is shrunk
  // when the connection goes idle, read_chunk_ is allocated on the first response.
  Phase phase_ = Phase::kHeader;
  bool reading_ = false;
  bool read_into_in_ = false;           // the outstanding (or last) read's bytes go to in_
  std::unique_ptr<char[]> read_chunk_;  // kChunkBytes
  beast::flat_buffer in_;
  std::optional<RequestParser> parser_;
  Deadline read_deadline_;           // header, body idle, keep-alive or drain timeout, by phase_
  bool header_timer_armed_ = false;  // for the request being read

  // The response to the current request.
  uint64_t seq_ = 0;
  Response response_ = Response::kNone;
  bool keep_alive_ = false;   // the request allows another request after this one
  bool http11_ = false;       // HTTP/1.1 request: chunked streams; else close-delimited
  bool head_only_ = false;    // HEAD: headers only
  bool close_after_ = false;  // close once this response is written
  std::shared_ptr<HttpResponderImpl> responder_;  // set until the response is written
  std::function<void()> close_callback_;
  std::function<void()> drain_callback_;  // and when it runs:
  size_t drain_low_water_ = 0;            // pending_write_bytes at most this

  // Write side: at most one async_write_some outstanding.
  std::deque<std::string> out_;
  size_t out_offset_ = 0;                          // bytes of out_.front() already written
  std::vector<asio::const_buffer> write_buffers_;  // the outstanding write's
  bool writing_ = false;
  Deadline write_deadline_;  // armed while a write is outstanding
};

}  // namespace switchyard::net::internal
