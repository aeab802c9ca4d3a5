// ClientCall: one HttpClient request on one ClientLoop, from taking a pooled connection
// (or resolving and connecting) through writing the request and reading the response
// incrementally to OnDone. client_call.cc has the connection side (connect, write,
// retry, finish), client_call_response.cc the response side (read, parse, deliver,
// back-pressure, idle timeout).
//
// Failures are classified by how far the response got: before its first byte the request
// may be retried elsewhere (Unavailable), after it not (Internal). A pooled connection
// that fails before the first byte is retried once on a fresh connection first: the
// server most likely closed it while idle, before our request reached it.
//
// Threads: constructed on the caller's thread (by HttpClient::Send) and started there when
// that is the loop's thread, else posted to the loop or, if it could not be, abandoned there;
// everything else runs on the loop's thread. The caller's
// ClientCallHandle reaches the call only by posting to the loop.
//
// Ownership: the ClientLoop holds the call while it is in flight, and each pending socket
// operation holds it until it completes. Its timer is the loop's (CallTimer): a pending wait
// does not hold the call. The handle holds it weakly, so no call
// (with its socket) outlives the loop's io_context.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

#include "net/http_client.h"
#include "net/internal/beast.h"
#include "net/internal/client_pool.h"
#include "net/internal/event_loop.h"
#include "net/internal/message_parser.h"

namespace switchyard::net::internal {

class ClientCall;
class ClientLoop;
struct CallTimer;

// The HttpRequestHandle of one call. Cancel and Resume post to the call's loop; Cancel also
// sets a flag the loop checks before every callback, so that once Cancel returned no
// OnHead or OnBody starts and OnDone reports Cancelled (unless it already started).
class ClientCallHandle final : public HttpRequestHandle {
 public:
  explicit ClientCallHandle(std::shared_ptr<LoopPoster> poster) : poster_(std::move(poster)) {}

  // Binds the call. REQUIRES: called once, before the handle is shared with other threads.
  void Bind(std::weak_ptr<ClientCall> call) { call_ = std::move(call); }

  void Cancel() override;
  void Resume() override;
  bool cancel_requested() const { return cancel_requested_.load(std::memory_order_acquire); }

 private:
  const std::shared_ptr<LoopPoster> poster_;
  std::weak_ptr<ClientCall> call_;
  std::atomic<bool> cancel_requested_{false};
};

class ClientCall final : public std::enable_shared_from_this<ClientCall> {
 public:
  // `body_limit`: the most body bytes accepted (more fails with ResourceExhausted); unset
  // for no limit (a stream).
  // Encodes the request's head and takes a share of its body; keeps nothing else of it.
  ClientCall(ClientLoop* loop, const HttpClientRequest& request,
             std::shared_ptr<HttpResponseHandler> handler,
             std::shared_ptr<const ClientCallHandle> handle, std::optional<size_t> body_limit);
  ClientCall(const ClientCall&) = delete;
  ClientCall& operator=(const ClientCall&) = delete;

  // Loop thread: starts the request (or cancels it at once when the loop is stopping).
  void Start();
  // Loop thread, from inside HttpClient::Send: starts the request at once, but reports a
  // failure found now from a posted task, so that OnDone never runs inside Send.
  void StartInSend();
  // Loop thread: closes the connection and reports Cancelled, unless already done.
  void Cancel(std::string_view reason);
  // Loop thread: continues reading after OnBody returned false.
  void Resume();
  // The caller's thread, instead of Start, when the call could not be posted to its loop
  // (the client stopped): reports Cancelled there.
  void Abandon();

 private:
  enum class Stage {
    kNew,
    kConnecting,  // resolving the name and connecting
    kWriting,     // writing the request
    kHead,        // reading the response head
    kBody,        // reading the body
    kDone,        // OnDone was called (or is being called)
  };

  // Why the call cannot start (the loop is stopping, the request is bad), or OK. The upstream
  // is checked only when a connection is made (ParseUpstreamOnce).
  absl::Status Prepare() const;
  // Takes a pooled connection or connects; errors: a bad upstream. REQUIRES: Prepare
  // succeeded.
  absl::Status Begin();
  // Sets host_ and port_ from the upstream, once. A pooled connection's upstream needs no
  // parsing: it was parsed when that connection was made (the pool is keyed by it).
  absl::Status ParseUpstreamOnce();
  // REQUIRES: ParseUpstreamOnce succeeded.
  void Connect();
  void OnResolved(const ErrorCode& ec, const Resolver::results_type& results);
  void OnConnected(const ErrorCode& ec);
  // Writes the request; its first-byte timeout counts from `now`, a clock read just made.
  void Write(std::chrono::steady_clock::time_point now);
  void OnWritten(const ErrorCode& ec);
  // A failure before the first response byte: a retry on a fresh connection when this one
  // came from the pool, else Unavailable.
  void FailBeforeResponse(const ErrorCode& ec, std::string_view step);
  void ArmDeadline(std::chrono::milliseconds timeout);
  void ArmDeadlineAt(std::chrono::steady_clock::time_point deadline);
  void OnDeadline();
  // Ends the call: closes the socket unless it went back to the pool, runs OnDone.
  void Finish(const absl::Status& status);
  void CloseSocket();
  std::string Describe() const;

  // Response side (client_call_response.cc).
  void NewParser();
  void Read();
  void OnRead(const ErrorCode& ec, size_t bytes);
  void OnReadFailed(const ErrorCode& ec);
  void Parse();
  void OnHead();
  void OnMessageDone();
  absl::Status ParseError(const ErrorCode& ec) const;

  ClientLoop* const loop_;
  const HttpClientOptions& options_;
  const std::chrono::milliseconds first_byte_timeout_;  // the request's, else the options'
  std::string upstream_;                                // "host:port": the pool's key
  // The request line and headers, and the body, as they go out; with the first attempt's
  // connection and, again, with a fresh one when a pooled one failed before the response.
  // head_bytes_ is empty when the request could not be encoded (bad_request_ says why).
  std::string head_bytes_;
  SharedBody body_;
  absl::Status bad_request_;
  bool head_method_ = false;                      // HEAD: the response has no body
  std::shared_ptr<HttpResponseHandler> handler_;  // until OnDone
  const std::shared_ptr<const ClientCallHandle> handle_;
  const std::optional<size_t> body_limit_;

  Stage stage_ = Stage::kNew;
  bool registered_ = false;  // in the loop's calls in flight
  std::string host_;         // the upstream's host, without IPv6 brackets
  uint16_t port_ = 0;        // 0 until ParseUpstreamOnce
  bool reused_ = false;      // the connection came from the pool
  // The pool's entry for the upstream, held from Begin until the connection goes back to the
  // pool or the call ends.
  ConnectionPool::Upstream* pool_upstream_ = nullptr;
  // A pooled connection's, or made when connecting: most calls take a pooled one, and making
  // a socket costs a lookup of asio's socket service.
  std::optional<Socket> socket_;
  std::optional<Resolver> resolver_;
  // Connect, first-byte or idle timeout, by stage_; the loop's, from Begin until Finish. The
  // idle timeout is not re-armed per read: on expiry it re-arms itself for what is left since
  // last_read_, the one clock read per read (the idle deadline and the pool's idle time count
  // from it).
  std::shared_ptr<CallTimer> timer_;
  std::chrono::steady_clock::time_point last_read_;

  // Response side. Reads append to in_; the parser consumes from it.
  bool reading_ = false;
  bool paused_ = false;  // OnBody returned false; no reads until Resume
  size_t received_bytes_ = 0;
  beast::flat_buffer in_;
  std::optional<ResponseParser> parser_;
};

}  // namespace switchyard::net::internal
