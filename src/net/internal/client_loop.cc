#include "net/internal/client_loop.h"

#include <utility>
#include <vector>

#include "net/internal/client_call.h"

namespace switchyard::net::internal {
namespace {

// Spare read buffers kept per loop, and the largest one kept (a long response head may
// have grown one past the usual 16 KiB).
constexpr size_t kMaxSpareBuffers = 64;
constexpr size_t kMaxSpareBufferBytes = 64 << 10;
// Spare response header lists kept per loop, each at most max_header_bytes of strings.
constexpr size_t kMaxSpareHeaderLists = 64;
// Spare call timers kept per loop: about the calls a loop has in flight at its busiest.
constexpr size_t kMaxSpareTimers = 1024;

}  // namespace

ClientLoop::ClientLoop(EventLoop* loop, const HttpClientOptions& options)
    : options_(options),
      loop_(loop),
      poster_(std::make_shared<LoopPoster>(&loop->context())),
      pool_(loop->context(), options.max_idle_connections_per_upstream, options.pool_idle_timeout) {
}

ClientLoop::~ClientLoop() {
  Stop();
}

void ClientLoop::Add(std::shared_ptr<ClientCall> call) {
  ClientCall* key = call.get();
  calls_.emplace(key, std::move(call));
}

void ClientLoop::Remove(ClientCall* call) {
  calls_.erase(call);
}

beast::flat_buffer ClientLoop::TakeReadBuffer() {
  if (spare_buffers_.empty())
    return beast::flat_buffer();
  beast::flat_buffer buffer = std::move(spare_buffers_.back());
  spare_buffers_.pop_back();
  return buffer;
}

void ClientLoop::GiveBackReadBuffer(beast::flat_buffer buffer) {
  if (spare_buffers_.size() >= kMaxSpareBuffers || buffer.capacity() > kMaxSpareBufferBytes)
    return;
  buffer.clear();
  spare_buffers_.push_back(std::move(buffer));
}

std::shared_ptr<CallTimer> ClientLoop::TakeTimer() {
  if (spare_timers_.empty())
    return std::make_shared<CallTimer>(loop_->context().get_executor());
  std::shared_ptr<CallTimer> timer = std::move(spare_timers_.back());
  spare_timers_.pop_back();
  return timer;
}

void ClientLoop::GiveBackTimer(std::shared_ptr<CallTimer> timer) {
  timer->on_expiry = nullptr;
  if (stopping_ || spare_timers_.size() >= kMaxSpareTimers) {
    // Its wait would keep it until its time, for nothing.
    timer->deadline.Cancel();
    return;
  }
  timer->deadline.Disarm();
  spare_timers_.push_back(std::move(timer));
}

HeaderList ClientLoop::TakeHeaderList() {
  if (spare_header_lists_.empty())
    return HeaderList();
  HeaderList headers = std::move(spare_header_lists_.back());
  spare_header_lists_.pop_back();
  return headers;
}

void ClientLoop::GiveBackHeaderList(HeaderList headers) {
  if (spare_header_lists_.size() >= kMaxSpareHeaderLists || headers.empty())
    return;
  spare_header_lists_.push_back(std::move(headers));
}

void ClientLoop::Stop() {
  if (stopped_)
    return;
  stopped_ = true;
  // Once closed, no Send reaches the loop (it reports Cancelled on its caller's thread).
  poster_->Close();
  loop_->RunAndWait([this] {
    stopping_ = true;
    // Cancel removes from the map, so walk a copy.
    std::vector<std::shared_ptr<ClientCall>> calls;
    calls.reserve(calls_.size());
    for (const auto& [key, call] : calls_)
      calls.push_back(call);
    for (const auto& call : calls)
      call->Cancel("the client is stopping");
    pool_.Close();
    // Their waits end now, so that nothing of this client's is left on the loop.
    for (const std::shared_ptr<CallTimer>& timer : spare_timers_)
      timer->deadline.Cancel();
    spare_timers_.clear();
  });
  // A call's start posted from this loop's thread just before the poster closed may have
  // queued behind the round above (asio queues a loop's own posts after its handler ends):
  // a second round runs after it (and it, stopping, cancels itself).
  loop_->RunAndWait([] {});
}

}  // namespace switchyard::net::internal
