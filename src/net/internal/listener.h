// Listener: the listening socket. It accepts on the first loop and creates each accepted
// socket on the next loop in turn, then hands it to the server's callback (still on the
// accepting loop). Past max_connections, a new connection is closed at once.
//
// Threads: Listen before the first accept, from the thread that starts the server;
// everything else on the accepting loop.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "net/internal/beast.h"
#include "net/internal/event_loop.h"
#include "net/internal/server_context.h"

namespace switchyard::net::internal {

class Listener {
 public:
  // Runs on the accepting loop; the socket belongs to loops[loop_index].
  using AcceptCallback = std::function<void(size_t loop_index, Socket socket)>;

  // REQUIRES: !loops.empty(); loops and server outlive the Listener.
  Listener(std::vector<EventLoop*> loops, ServerContext* server, AcceptCallback on_accept);

  // Binds and listens; errors: the host does not resolve, the address cannot be bound.
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
  size_t next_loop_ = 0;
  bool closed_ = false;
};

}  // namespace switchyard::net::internal
