#include "net/http_client.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

#include "base/mutex.h"
#include "base/recycling_allocator.h"
#include "base/status_macros.h"
#include "net/internal/client_call.h"
#include "net/internal/client_loop.h"

namespace switchyard::net {
namespace {

class CallbackHandler final : public HttpResponseHandler {
 public:
  explicit CallbackHandler(HttpClientCallbacks callbacks) : callbacks_(std::move(callbacks)) {}

  void OnHead(int status, const HeaderList& headers) override {
    if (callbacks_.on_head)
      callbacks_.on_head(status, headers);
  }
  bool OnBody(std::string_view chunk) override {
    return !callbacks_.on_body || callbacks_.on_body(chunk);
  }
  void OnDone(const absl::Status& status) override {
    if (callbacks_.on_done)
      callbacks_.on_done(status);
  }

 private:
  const HttpClientCallbacks callbacks_;
};

// Collects a Fetch's response. Its methods run on the call's loop, one after another: no lock
// needed.
class FetchHandler final : public HttpResponseHandler {
  static constexpr uint64_t kMaxReservedBodyBytes = 1 << 20;

 public:
  explicit FetchHandler(std::function<void(absl::StatusOr<HttpClient::Response>)> done)
      : done_(std::move(done)) {}

  void OnHead(int status, const HeaderList& headers) override {
    response_.status = status;
    response_.headers = headers;
    // The body is collected in one allocation when its length is known (up to a bound: the
    // length is the peer's word; a longer body grows as any other).
    for (const auto& [name, value] : headers) {
      uint64_t length = 0;
      if (absl::EqualsIgnoreCase(name, "content-length") && absl::SimpleAtoi(value, &length)) {
        response_.body.reserve(std::min<uint64_t>(length, kMaxReservedBodyBytes));
        break;
      }
    }
  }
  bool OnBody(std::string_view chunk) override {
    response_.body.append(chunk);
    return true;
  }
  void OnDone(const absl::Status& status) override {
    if (status.ok()) {
      done_(std::move(response_));
    } else {
      done_(status);
    }
  }

 private:
  const std::function<void(absl::StatusOr<HttpClient::Response>)> done_;
  HttpClient::Response response_;
};

using internal::ClientCall;
using internal::ClientCallHandle;
using internal::ClientLoop;

class HttpClientImpl final : public HttpClient {
 public:
  // `owns_loops`: Stop stops them too.
  HttpClientImpl(const HttpClientOptions& options, std::shared_ptr<EventLoops> event_loops,
                 bool owns_loops)
      : options_(options), event_loops_(std::move(event_loops)), owns_loops_(owns_loops) {
    for (size_t i = 0; i < event_loops_->size(); ++i)
      loops_.push_back(std::make_unique<ClientLoop>(&event_loops_->loop(i), options_));
  }

  ~HttpClientImpl() override { Stop(); }

  std::shared_ptr<HttpRequestHandle> Send(const HttpClientRequest& request,
                                          std::shared_ptr<HttpResponseHandler> handler,
                                          std::optional<int> loop) override {
    return StartCall(request, std::move(handler), loop, std::nullopt);
  }

  void Fetch(const HttpClientRequest& request,
             std::function<void(absl::StatusOr<Response>)> done) override {
    StartCall(request, std::make_shared<FetchHandler>(std::move(done)), std::nullopt,
              options_.max_response_bytes);
  }

  void Stop() override {
    {
      base::MutexLock lock(&stop_mu_);
      if (stopped_)
        return;
      stopped_ = true;
    }
    for (auto& loop : loops_)
      loop->Stop();
    if (owns_loops_)
      event_loops_->Stop();
  }

 private:
  std::shared_ptr<HttpRequestHandle> StartCall(const HttpClientRequest& request,
                                               std::shared_ptr<HttpResponseHandler> handler,
                                               std::optional<int> loop_hint,
                                               std::optional<size_t> body_limit) {
    ClientLoop& loop = *loops_[PickLoop(loop_hint)];
    auto handle = std::allocate_shared<ClientCallHandle>(
        base::RecyclingAllocator<ClientCallHandle>(), loop.poster());
    auto call = std::allocate_shared<ClientCall>(base::RecyclingAllocator<ClientCall>(), &loop,
                                                 request, std::move(handler), handle, body_limit);
    handle->Bind(call);
    // On the call's own loop (a proxy's handler or a callback of this client) it starts at
    // once: no post, no second handler. Once Stop began there, it is abandoned as after Stop.
    if (loop.OnLoopThread()) {
      if (loop.stopping()) {
        call->Abandon();
      } else {
        call->StartInSend();
      }
    } else if (!loop.poster()->Post([call] { call->Start(); })) {
      call->Abandon();
    }
    return handle;
  }

  size_t PickLoop(std::optional<int> hint) {
    const size_t n = loops_.size();
    if (hint.has_value()) {
      const int64_t wrapped = *hint % static_cast<int64_t>(n);
      return static_cast<size_t>(wrapped < 0 ? wrapped + static_cast<int64_t>(n) : wrapped);
    }
    if (const std::optional<size_t> current = event_loops_->CurrentLoop())
      return *current;
    return next_loop_.fetch_add(1, std::memory_order_relaxed) % n;
  }

  const HttpClientOptions options_;
  // Declared before loops_, so destroyed after them: the io_contexts outlive the pools.
  const std::shared_ptr<EventLoops> event_loops_;
  const bool owns_loops_;
  std::vector<std::unique_ptr<ClientLoop>> loops_;
  std::atomic<size_t> next_loop_{0};
  base::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace

std::shared_ptr<HttpRequestHandle> HttpClient::Send(const HttpClientRequest& request,
                                                    HttpClientCallbacks callbacks,
                                                    std::optional<int> loop) {
  return Send(request, std::make_shared<CallbackHandler>(std::move(callbacks)), loop);
}

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Start(const HttpClientOptions& options) {
  if (options.num_threads < 1)
    return absl::InvalidArgumentError("httpc: num_threads must be at least 1");
  SY_ASSIGN_OR_RETURN(std::shared_ptr<EventLoops> loops,
                      EventLoops::Start(options.num_threads, "sy-httpc"));
  return std::unique_ptr<HttpClient>(
      std::make_unique<HttpClientImpl>(options, std::move(loops), true));
}

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Start(const HttpClientOptions& options,
                                                              std::shared_ptr<EventLoops> loops) {
  if (loops == nullptr)
    return absl::InvalidArgumentError("httpc: no loops");
  return std::unique_ptr<HttpClient>(
      std::make_unique<HttpClientImpl>(options, std::move(loops), false));
}

}  // namespace switchyard::net
