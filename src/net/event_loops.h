// EventLoops: a fixed set of event loops (one io_context and one owned, named thread each)
// that an HttpServer and HttpClients can share. A proxy puts its server and its upstream
// client on the same loops: an upstream call that a handler starts then runs on the
// handler's own thread (HttpClient picks the calling loop), and its callbacks answer the
// client's connection there too. Nothing crosses threads per request: no hand-off, no
// wake-up, no context switch between a server loop and a client loop.
//
// Threads: Start and Stop from one controlling thread; size and CurrentLoop from any.
// Ownership: shared by whoever runs on the loops. Each HttpServer and HttpClient on them
// stops its own work on them in its Stop (and no handler of theirs runs after that
// returns); Stop the loops after every one of them.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::net {

namespace internal {
class EventLoop;
}  // namespace internal

class EventLoops {
 public:
  // Starts `num_threads` loops, threads named "<name>-0", "<name>-1", ... (cut to 15 bytes).
  // Errors: num_threads < 1.
  static absl::StatusOr<std::shared_ptr<EventLoops>> Start(int num_threads,
                                                           const std::string& name);
  // Stops the loops if Stop() was not called.
  ~EventLoops();
  EventLoops(const EventLoops&) = delete;
  EventLoops& operator=(const EventLoops&) = delete;

  size_t size() const { return loops_.size(); }
  // The index of the loop whose thread calls this, or nullopt on any other thread.
  std::optional<size_t> CurrentLoop() const;
  // Lets what was posted run, then stops and joins every loop. REQUIRES: not called on a
  // loop thread; every server and client on the loops stopped. Idempotent.
  void Stop();

  // For net/'s servers and clients.
  internal::EventLoop& loop(size_t index) { return *loops_[index]; }

 private:
  explicit EventLoops(std::vector<std::unique_ptr<internal::EventLoop>> loops);

  std::vector<std::unique_ptr<internal::EventLoop>> loops_;
};

}  // namespace switchyard::net
