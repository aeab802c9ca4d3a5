// A gRPC server's completion queues (its asynchronous API), each run by one thread of its own
// that takes the queue's events and completes their tags (CompletionTag): what a call reads,
// picks and writes runs on its queue's thread, with no hand-off between threads. The calls
// hand gRPC each operation (the next call, a read, a write, a Finish) through Submit, which
// drops it once the queues shut down (a queue that is shut down must not be given more).
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_builder.h"

namespace switchyard::router::extproc {

class CompletionQueues {
 public:
  // Adds `count` (at least 1) queues to `builder`, before its BuildAndStart.
  CompletionQueues(grpc::ServerBuilder* builder, int count);
  ~CompletionQueues();  // Shutdown

  size_t size() const { return queues_.size(); }
  grpc::ServerCompletionQueue* queue(size_t i) const { return queues_[i].get(); }

  // Starts the threads, named "sy-<name>-<i>", once the server is built.
  void Start(const std::string& name);
  // Runs `op` (which hands gRPC an operation whose completion comes on one of these queues)
  // unless the queues are shutting down; returns whether it ran. Any thread.
  bool Submit(absl::FunctionRef<void()> op);
  // After the server's Shutdown (which cancels its calls): drops what is submitted from now
  // on, shuts the queues down, and waits for the threads to complete what is left in them.
  // Idempotent; from the controlling thread.
  void Shutdown();

 private:
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  // Submit holds it shared (the queues' threads submit at once), Shutdown exclusive.
  std::shared_mutex closing_;
  bool closed_ = false;  // under closing_
};

}  // namespace switchyard::router::extproc
