#include "net/internal/event_loop.h"

#include <string>
#include <utility>

#include "base/logging.h"
#include "base/thread_name.h"

namespace switchyard::net::internal {
namespace {

thread_local EventLoop* current_loop = nullptr;

}  // namespace

EventLoop::EventLoop(const std::string& thread_name)
    : work_(asio::make_work_guard(context_)),
      poster_(std::make_shared<LoopPoster>(&context_)),
      thread_([this] {
        current_loop = this;
        // Handlers report failures through error codes; run() only throws what a user
        // handler throws, and that is a bug to crash on.
        context_.run();
      }) {
  base::SetThreadName(thread_, thread_name);
}

EventLoop::~EventLoop() {
  Stop();
}

EventLoop* EventLoop::Current() {
  return current_loop;
}

void EventLoop::RunAndWait(std::function<void()> fn) {
  SY_CHECK(std::this_thread::get_id() != thread_.get_id());
  base::Mutex mu;
  base::CondVar cv;
  bool done = false;
  const bool posted = poster_->Post([&] {
    fn();
    base::MutexLock lock(&mu);
    done = true;
    cv.NotifyAll();
  });
  if (!posted)
    return;
  base::MutexLock lock(&mu);
  cv.Wait(&mu, [&] { return done; });
}

void EventLoop::Stop() {
  if (!thread_.joinable())
    return;
  SY_CHECK(std::this_thread::get_id() != thread_.get_id());
  poster_->Close();
  // Posted last, so every handler posted through the poster before Close() runs first;
  // completions still queued behind it are destroyed with the io_context.
  asio::post(context_, [this] { context_.stop(); });
  work_.reset();
  thread_.join();
}

}  // namespace switchyard::net::internal
