#include "router/extproc/completion_queues.h"

#include <algorithm>

#include "fmt/format.h"

#include "base/thread_name.h"
#include "router/extproc/completion_tag.h"

namespace switchyard::router::extproc {
namespace {

// Completes each event's tag until the queue is shut down and empty.
void Drain(grpc::ServerCompletionQueue* queue) {
  void* tag = nullptr;
  bool ok = false;
  while (queue->Next(&tag, &ok)) {
    auto* completion = static_cast<CompletionTag*>(tag);
    completion->Received();
    completion->Complete(ok);
  }
}

}  // namespace

CompletionQueues::CompletionQueues(grpc::ServerBuilder* builder, int count) {
  queues_.resize(std::max(1, count));
  for (auto& queue : queues_)
    queue = builder->AddCompletionQueue();
}

CompletionQueues::~CompletionQueues() {
  Shutdown();
}

void CompletionQueues::Start(const std::string& name) {
  for (size_t i = 0; i < queues_.size(); ++i) {
    threads_.emplace_back(
        [queue = queues_[i].get(), thread_name = fmt::format("sy-{}-{}", name, i)] {
          base::SetCurrentThreadName(thread_name);
          Drain(queue);
        });
  }
}

bool CompletionQueues::Submit(absl::FunctionRef<void()> op) {
  std::shared_lock lock(closing_);
  if (closed_)
    return false;
  op();
  return true;
}

void CompletionQueues::Shutdown() {
  {
    std::unique_lock lock(closing_);
    if (closed_)
      return;
    closed_ = true;
  }
  for (auto& queue : queues_)
    queue->Shutdown();
  if (threads_.empty()) {  // never started: what the queues hold is completed here
    for (auto& queue : queues_)
      Drain(queue.get());
  }
  for (std::thread& thread : threads_)
    thread.join();
  threads_.clear();
}

}  // namespace switchyard::router::extproc
