#include "net/internal/client_loop.h"

#include <utility>
#include <vector>

#include "net/internal/client_call.h"

namespace switchyard::net::internal {
namespace {

// The largest read buffer kept (a long response head may have grown one past the usual
// 16 KiB).
constexpr size_t kMaxSpareBufferBytes = 64 << 10;

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
  calls_.insert({key, std::move(call)});
}

void ClientLoop::Remove(ClientCall* call) {
  calls_.erase(call);
}

beast::flat_buffer ClientLoop::TakeReadBuffer() {
  return spare_buffers_.Take().value_or(beast::flat_buffer());
}

void ClientLoop::GiveBackReadBuffer(beast::flat_buffer buffer) {
  if (spare_buffers_.full() || buffer.capacity() > kMaxSpareBufferBytes)
    return;
  buffer.clear();
  spare_buffers_.Keep(std::move(buffer));
}

std::shared_ptr<CallTimer> ClientLoop::TakeTimer() {
  if (std::optional<std::shared_ptr<CallTimer>> timer = spare_timers_.Take())
    return *std::move(timer);
  return std::make_shared<CallTimer>(loop_->context().get_executor());
}

void ClientLoop::GiveBackTimer(std::shared_ptr<CallTimer> timer) {
  timer->on_expiry = nullptr;
  if (stopping_ || spare_timers_.full()) {
    // Its wait would keep it until its time, for nothing.
    timer->deadline.Cancel();
    return;
  }
  timer->deadline.Disarm();
  spare_timers_.Keep(std::move(timer));
}

HeaderList ClientLoop::TakeHeaderList() {
  return spare_header_lists_.Take().value_or(HeaderList());
}

void ClientLoop::GiveBackHeaderList(HeaderList headers) {
  if (spare_header_lists_.full() || headers.empty())
    return;
  spare_header_lists_.Keep(std::move(headers));
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
    for (const std::shared_ptr<CallTimer>& timer : spare_timers_.TakeAll())
      timer->deadline.Cancel();
  });
  // A call's start posted from this loop's thread just before the poster closed may have
  // queued behind the round above (asio queues a loop's own posts after its handler ends):
  // a second round runs after it (and it, stopping, cancels itself).
  loop_->RunAndWait([] {});
}

}  // namespace switchyard::net::internal
