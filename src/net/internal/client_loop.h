// ClientLoop: one of HttpClient's event loops ("sy-httpc-N") and what lives on it: its
// keep-alive ConnectionPool and its calls in flight, so that Stop can cancel them.
//
// Threads: options() and poster() from any thread; pool(), stopping(), Add and Remove on
// the loop's thread; Stop from the client's controlling thread.
//
// Ownership: HttpClient owns its loops. A ClientLoop holds each call in flight from Add
// until Remove; the pool and the calls are destroyed before the io_context they use.
#pragma once

#include <memory>
#include <unordered_map>

#include "net/http_client.h"
#include "net/internal/client_pool.h"
#include "net/internal/event_loop.h"

namespace switchyard::net::internal {

class ClientCall;

class ClientLoop {
 public:
  // `options` must outlive the loop.
  ClientLoop(int index, const HttpClientOptions& options);
  ~ClientLoop();
  ClientLoop(const ClientLoop&) = delete;
  ClientLoop& operator=(const ClientLoop&) = delete;

  const HttpClientOptions& options() const { return options_; }
  const std::shared_ptr<LoopPoster>& poster() const { return loop_.poster(); }
  asio::io_context& context() { return loop_.context(); }

  ConnectionPool& pool() { return pool_; }
  // Set once Stop began: a call starting now is cancelled at once.
  bool stopping() const { return stopping_; }
  void Add(std::shared_ptr<ClientCall> call);
  void Remove(ClientCall* call);

  // Cancels every call in flight (each on_done runs, on the loop), closes the pool, then
  // lets what was posted meanwhile run, stops the loop and joins its thread. Idempotent.
  // REQUIRES: not called on this loop's thread.
  void Stop();

 private:
  const HttpClientOptions& options_;
  // Declared first, destroyed last: the io_context outlives the sockets and timers below.
  EventLoop loop_;
  ConnectionPool pool_;
  std::unordered_map<ClientCall*, std::shared_ptr<ClientCall>> calls_;
  bool stopping_ = false;
};

}  // namespace switchyard::net::internal
