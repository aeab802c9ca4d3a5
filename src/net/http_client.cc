#include "net/http_client.h"

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status_macros.h"
#include "net/internal/client_call.h"
#include "net/internal/client_loop.h"

namespace switchyard::net {
namespace {

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

  std::shared_ptr<HttpRequestHandle> Send(HttpClientRequest request, HttpClientCallbacks callbacks,
                                          std::optional<int> loop) override {
    return StartCall(std::move(request), std::move(callbacks), loop, std::nullopt);
  }

  void Fetch(HttpClientRequest request,
             std::function<void(absl::StatusOr<Response>)> done) override {
    // Every callback runs on the call's loop, one after another: no lock needed.
    struct Collected {
      Response response;
      std::function<void(absl::StatusOr<Response>)> done;
    };
    auto collected = std::make_shared<Collected>();
    collected->done = std::move(done);
    HttpClientCallbacks callbacks;
    callbacks.on_head = [collected](int status, const HeaderList& headers) {
      collected->response.status = status;
      collected->response.headers = headers;
    };
    callbacks.on_body = [collected](std::string_view chunk) {
      collected->response.body.append(chunk);
      return true;
    };
    callbacks.on_done = [collected](const absl::Status& status) {
      if (status.ok()) {
        collected->done(std::move(collected->response));
      } else {
        collected->done(status);
      }
    };
    StartCall(std::move(request), std::move(callbacks), std::nullopt, options_.max_response_bytes);
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
  std::shared_ptr<HttpRequestHandle> StartCall(HttpClientRequest request,
                                               HttpClientCallbacks callbacks,
                                               std::optional<int> loop_hint,
                                               std::optional<size_t> body_limit) {
    ClientLoop& loop = *loops_[PickLoop(loop_hint)];
    auto handle = std::make_shared<ClientCallHandle>(loop.poster());
    auto call = std::make_shared<ClientCall>(&loop, std::move(request), std::move(callbacks),
                                             handle, body_limit);
    handle->Bind(call);
    if (!loop.poster()->Post([call] { call->Start(); }))
      call->Abandon();
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
