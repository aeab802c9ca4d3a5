#include "router/internal/proxy_call.h"

#include <utility>

#include "fmt/format.h"

#include "api/error.h"
#include "api/response_writer.h"

namespace switchyard::router::internal {
namespace {

constexpr std::string_view kJson = "application/json";

// Response headers passed back to the client (hop-by-hop ones and framing are the
// server's business).
bool ForwardResponseHeader(std::string_view name) {
  return name == "x-request-id" || name == "openai-processing-ms" ||
         name.starts_with("x-ratelimit-");
}

std::string HeaderValue(const net::HeaderList& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name)
      return v;
  }
  return "";
}

}  // namespace

ProxyCall::ProxyCall(
    ProxyRequest request, std::shared_ptr<net::HttpResponder> responder, net::HttpClient* client,
    EndpointTable* table, int max_retries,
    std::function<std::optional<ProxyTarget>(const std::vector<std::string>&)> next_target,
    std::function<std::string(const std::string&)> issue_token,
    std::function<void(const ProxyTarget&)> on_picked)
    : request_(std::move(request)),
      responder_(std::move(responder)),
      client_(client),
      table_(table),
      max_retries_(max_retries),
      next_target_(std::move(next_target)),
      issue_token_(std::move(issue_token)),
      on_picked_(std::move(on_picked)) {}

void ProxyCall::Start() {
  std::weak_ptr<ProxyCall> weak = weak_from_this();
  responder_->OnClose([weak] {
    std::shared_ptr<ProxyCall> self = weak.lock();
    if (self == nullptr)
      return;
    std::shared_ptr<net::HttpRequestHandle> handle;
    {
      base::MutexLock lock(&self->mu_);
      self->client_gone_ = true;
      handle = self->handle_;
    }
    if (handle != nullptr)
      handle->Cancel();  // the engine sees the disconnect and frees the request
  });
  base::MutexLock lock(&mu_);
  TryNext();
}

void ProxyCall::TryNext() {
  std::optional<ProxyTarget> target;
  if (static_cast<int>(tried_.size()) <= max_retries_)
    target = next_target_(tried_);
  if (!target.has_value()) {
    done_ = true;
    absl::Status error =
        tried_.empty()
            ? api::WithHttpStatus(
                  absl::ResourceExhaustedError("No endpoint can serve the request right now."), 429)
            : absl::UnavailableError(
                  fmt::format("No endpoint could serve the request ({} tried; last error: {}).",
                              tried_.size(), std::string(last_error_.message())));
    responder_->Send(api::HttpErrorFor(error).http_status, kJson, api::ErrorBody(error));
    return;
  }
  tried_.push_back(target->name);
  current_ = target;
  prefill_pending_ = true;
  retry_this_attempt_ = false;
  table_->RequestStarted(target->name, request_.prompt_tokens);
  on_picked_(*target);
  net::HttpClientRequest upstream;
  upstream.method = request_.method;
  upstream.upstream = target->address;
  upstream.target = request_.target;
  upstream.headers = request_.headers;
  upstream.body = request_.body;
  std::shared_ptr<ProxyCall> self = shared_from_this();
  net::HttpClientCallbacks callbacks;
  callbacks.on_head = [self](int status, const net::HeaderList& headers) {
    self->OnHead(status, headers);
  };
  callbacks.on_body = [self](std::string_view chunk) { return self->OnBody(chunk); };
  callbacks.on_done = [self](const absl::Status& status) { self->OnDone(status); };
  handle_ = client_->Send(std::move(upstream), std::move(callbacks));
}

void ProxyCall::OnHead(int status, const net::HeaderList& headers) {
  base::MutexLock lock(&mu_);
  if (client_gone_ || done_)
    return;
  if ((status == 502 || status == 503) && static_cast<int>(tried_.size()) <= max_retries_) {
    retry_this_attempt_ = true;  // skip its body; try the next endpoint when it ends
    last_error_ = absl::UnavailableError(fmt::format("{} answered {}", current_->name, status));
    return;
  }
  net::HeaderList out;
  for (const auto& [name, value] : headers) {
    if (ForwardResponseHeader(name))
      out.emplace_back(name, value);
  }
  out.emplace_back("x-switchyard-endpoint", current_->name);
  out.emplace_back("x-session-token", issue_token_(current_->name));
  const std::string content_type = HeaderValue(headers, "content-type");
  if (request_.stream) {
    started_downstream_ = true;
    responder_->StartStream(status, content_type.empty() ? "text/event-stream" : content_type,
                            std::move(out));
  } else {
    head_status_ = status;
    out.emplace_back("content-type", content_type.empty() ? std::string(kJson) : content_type);
    head_headers_ = std::move(out);
  }
}

bool ProxyCall::OnBody(std::string_view chunk) {
  base::MutexLock lock(&mu_);
  if (client_gone_ || done_ || retry_this_attempt_)
    return true;
  if (prefill_pending_) {
    table_->PrefillDone(current_->name, request_.prompt_tokens);
    prefill_pending_ = false;
  }
  if (request_.stream) {
    responder_->Write(std::string(chunk));
  } else {
    buffered_.append(chunk);
  }
  return true;
}

void ProxyCall::FinishAttempt() {
  table_->RequestEnded(current_->name, request_.prompt_tokens, prefill_pending_);
  handle_ = nullptr;
}

void ProxyCall::OnDone(const absl::Status& status) {
  base::MutexLock lock(&mu_);
  if (done_)
    return;
  FinishAttempt();
  if (client_gone_) {
    done_ = true;
    return;
  }
  const bool before_first_byte = !started_downstream_;
  if (retry_this_attempt_ || (before_first_byte && absl::IsUnavailable(status))) {
    if (!status.ok() && !retry_this_attempt_)
      last_error_ = status;
    buffered_.clear();
    TryNext();
    return;
  }
  done_ = true;
  if (status.ok()) {
    if (request_.stream) {
      responder_->End();
    } else {
      std::string content_type = std::string(kJson);
      net::HeaderList headers;
      for (auto& [k, v] : head_headers_) {
        if (k == "content-type")
          content_type = v;
        else
          headers.emplace_back(k, v);
      }
      responder_->Send(head_status_, content_type, std::move(buffered_), std::move(headers));
    }
    return;
  }
  const absl::Status error =
      absl::IsDeadlineExceeded(status)
          ? status
          : absl::UnavailableError(fmt::format("The endpoint {} failed: {}", current_->name,
                                               std::string(status.message())));
  if (request_.stream && started_downstream_) {
    // Mid-stream: an error event, then the end. Never a fake finish_reason.
    responder_->Write(api::SseError(error));
    responder_->Write(std::string(api::kSseDone));
    responder_->End();
    return;
  }
  responder_->Send(api::HttpErrorFor(error).http_status, kJson, api::ErrorBody(error));
}

}  // namespace switchyard::router::internal
