// Listener: the listening socket. It accepts on the first loop and hands each accepted
// connection, as an AcceptedSocket for the next loop in turn with its ConnectionSlot, to the
// server's callback (still on the accepting loop). A connection the server's admission
// refuses (its client over max_connections_per_client, or far past max_connections) is
// closed at once.
//
// Threads: everything on the accepting loop (Listen too: the loops lock no socket's state,
// event_loop.h).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "net/internal/beast.h"
#include "net/internal/connection_admission.h"
#include "net/internal/event_loop.h"
#include "net/internal/server_context.h"

namespace switchyard::net::internal {

// An accepted connection on its way to the loop it will live on, as a bare descriptor: only
// that loop's thread may register it with that loop. Closed on destruction unless adopted.
class AcceptedSocket {
 public:
  AcceptedSocket(tcp protocol, int descriptor, ConnectionSlot slot)
      : protocol_(protocol), descriptor_(descriptor), slot_(std::move(slot)) {}
  AcceptedSocket(AcceptedSocket&& other) noexcept
      : protocol_(other.protocol_),
        descriptor_(std::exchange(other.descriptor_, -1)),
        slot_(std::move(other.slot_)) {}
  AcceptedSocket& operator=(AcceptedSocket&&) = delete;
  ~AcceptedSocket();

  // The socket on `context`'s loop. REQUIRES: on that loop's thread; called once. Errors
  // (the descriptor cannot be registered) close it.
  Socket Adopt(asio::io_context& context, ErrorCode& ec);
  // The connection's place under the server's limits, moved out (to the connection).
  ConnectionSlot TakeSlot() { return std::move(slot_); }
  bool over_capacity() const { return slot_.over_capacity(); }

 private:
  tcp protocol_;
  int descriptor_;
  ConnectionSlot slot_;  // released with the socket unless taken
};

class Listener {
 public:
  // Runs on the accepting loop; the socket is for loops[loop_index].
  using AcceptCallback = std::function<void(size_t loop_index, AcceptedSocket socket)>;

  // REQUIRES: !loops.empty(); loops and server outlive the Listener.
  Listener(std::vector<EventLoop*> loops, ServerContext* server, AcceptCallback on_accept);

  // Binds and listens, on the accepting loop; errors: the host does not resolve, the address
  // cannot be bound.
  absl::Status Listen(const std::string& host, int port);
  // The bound port. REQUIRES: Listen succeeded.
  int port() const { return port_; }

  // Starts accepting. REQUIRES: Listen succeeded.
  void Start();
  // Closes the listening socket; accepts completing later are dropped. On the accepting
  // loop.
  void Close();

 private:
  void Accept();
  void OnAccept(const ErrorCode& ec, Socket socket, size_t loop_index);

  const std::vector<EventLoop*> loops_;
  ServerContext* const server_;
  const AcceptCallback on_accept_;
  Acceptor acceptor_;
  SteadyTimer retry_timer_;  // after a failed accept (out of descriptors)
  int port_ = 0;
  tcp protocol_ = tcp::v4();
  size_t next_loop_ = 0;
  bool closed_ = false;
};

}  // namespace switchyard::net::internal
