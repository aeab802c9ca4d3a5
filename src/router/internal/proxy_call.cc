#include "router/internal/proxy_call.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "fmt/format.h"

#include "api/error.h"
#include "api/response_writer.h"
#include "base/logging.h"
#include "router/internal/pd_bodies.h"

namespace switchyard::router::internal {
namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kEventStream = "text/event-stream";

// Response headers passed back to the client (hop-by-hop ones and framing are the
// server's business; x-request-id is the router's).
bool ForwardResponseHeader(std::string_view name) {
  return name == "openai-processing-ms" || name.starts_with("x-ratelimit-");
}

std::string_view HeaderValue(const net::HeaderList& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (k == name)
      return v;
  }
  return "";
}

}  // namespace

ProxyCall::ProxyCall(ProxyRequest&& request, std::shared_ptr<net::HttpResponder> responder,
                     net::HttpClient* client, RouterMetrics* metrics, int max_retries,
                     std::unique_ptr<ProxyRouting> routing)
    : responder_(std::move(responder)),
      client_(client),
      metrics_(metrics),
      max_retries_(max_retries),
      request_(std::move(request)),
      client_body_(request_.http.body),
      routing_(std::move(routing)) {}

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
  if (!done_)  // not aborted already
    TryNext();
}

void ProxyCall::TryNext() {
  std::optional<ProxyTarget> target;
  if (static_cast<int>(tried_.size()) <= max_retries_)
    target = routing_->NextTarget(tried_);
  if (!target.has_value()) {
    done_ = true;
    // A fleet with no endpoint to take the request is down, not busy: 503 (429 is for
    // saturation and quotas, which a client should slow down for).
    absl::Status error =
        tried_.empty() ? absl::UnavailableError(
                             "No endpoint can serve the request right now: none is healthy.")
                       : absl::UnavailableError(fmt::format(
                             "No endpoint could serve the request ({} tried; last error: {}).",
                             tried_.size(), std::string(last_error_.message())));
    SendError(error);
    return;
  }
  tried_.emplace_back(target->name);
  current_ = target;
  prefill_pending_ = true;
  retry_this_attempt_ = false;
  head_status_ = 0;
  sse_ = false;
  framer_ = SseFramer();
  generated_ = GeneratedTokens();
  cut_ = absl::OkStatus();
  current_->load->Started(request_.prompt_tokens);
  routing_->Picked(*current_);
  disaggregated_ = false;
  if (current_->prefill.has_value()) {
    StartPrefill();
    return;
  }
  SendAttempt(std::nullopt);
}

std::string_view ProxyCall::AuthorizationFor(std::string_view endpoint_credentials) const {
  return endpoint_credentials.empty() ? std::string_view(request_.client_authorization)
                                      : endpoint_credentials;
}

void ProxyCall::StartPrefill() {
  const ProxyTarget::Prefill& prefill = *current_->prefill;
  absl::StatusOr<std::string> body = PrefillRequestBody(client_body_);
  if (!body.ok()) {
    metrics_->PdDecision(PdOutcome::kFallback);
    SendAttempt(std::nullopt);
    return;
  }
  net::HttpClientRequest leg;
  leg.method = "POST";
  leg.upstream = prefill.address;
  leg.target = request_.http.target;
  leg.headers.emplace_back("content-type", kJson);
  leg.headers.emplace_back(
      "x-request-id",
      fmt::format("prefill-{}", request_.http.headers[request_.request_id_header].second));
  const std::string_view authorization = AuthorizationFor(prefill.authorization);
  if (!authorization.empty())
    leg.headers.emplace_back("authorization", authorization);
  leg.body = *std::move(body);
  leg.first_byte_timeout = request_.prefill_timeout;
  prefill.load->Started(request_.prompt_tokens);
  prefill_running_ = true;
  client_->Fetch(leg, [self = shared_from_this()](absl::StatusOr<net::HttpClient::Response> r) {
    self->PrefillDone(std::move(r));
  });
}

void ProxyCall::PrefillDone(absl::StatusOr<net::HttpClient::Response> response) {
  base::MutexLock lock(&mu_);
  prefill_running_ = false;
  const ProxyTarget::Prefill& prefill = *current_->prefill;
  prefill.load->Ended(request_.prompt_tokens, 0, true);
  if (done_)  // aborted
    return;
  if (client_gone_) {
    done_ = true;
    EndLoad();
    Finished(499, std::chrono::steady_clock::now());
    return;
  }
  absl::StatusOr<std::string> params =
      !response.ok()            ? absl::StatusOr<std::string>(response.status())
      : response->status != 200 ? absl::UnavailableError(fmt::format("HTTP {}", response->status))
                                : KvTransferParamsOf(response->body);
  absl::StatusOr<std::string> decode_body =
      params.ok() ? DecodeRequestBody(client_body_, *params) : params.status();
  if (!decode_body.ok()) {
    metrics_->PdDecision(PdOutcome::kFallback);
    SY_LOG_WARN("router: the prefill leg on {} failed ({}); {} computes the prompt",
                std::string(prefill.name), std::string(decode_body.status().message()),
                std::string(current_->name));
    SendAttempt(std::nullopt);
    return;
  }
  metrics_->PdDecision(PdOutcome::kDisaggregated);
  disaggregated_ = true;
  SendAttempt(*std::move(decode_body));
}

void ProxyCall::SendAttempt(std::optional<std::string> decode_body) {
  request_.http.upstream = current_->address;
  request_.http.body =
      decode_body.has_value() ? net::SharedBody(*std::move(decode_body)) : client_body_;
  // Each attempt's own x-prefiller-host-port or x-kv-cache-source-host-port, and
  // Authorization (its endpoint's credentials, else the client's), last in the list.
  request_.http.headers.resize(request_.http.headers.size() - attempt_headers_);
  const size_t shared_headers = request_.http.headers.size();
  if (disaggregated_) {
    request_.http.headers.emplace_back("x-prefiller-host-port", current_->prefill->address);
  } else if (!current_->kv_source.empty()) {
    request_.http.headers.emplace_back("x-kv-cache-source-host-port", current_->kv_source);
    current_->metrics->KvSource();
  }
  if (const std::string_view authorization = AuthorizationFor(current_->authorization);
      !authorization.empty())
    request_.http.headers.emplace_back("authorization", authorization);
  attempt_headers_ = request_.http.headers.size() - shared_headers;
  handle_ = client_->Send(request_.http, shared_from_this());
  waiting_ = true;
  woken_ = false;
  current_->load->waiters.Add(&waiter_, handle_);
}

void ProxyCall::Retry(RetryReason reason) {
  if (static_cast<int>(tried_.size()) <= max_retries_)  // else TryNext gives up
    current_->metrics->Retry(reason);
  buffered_.clear();
  TryNext();
}

void ProxyCall::OnHead(int status, const net::HeaderList& headers) {
  base::MutexLock lock(&mu_);
  if (client_gone_ || done_)
    return;
  head_status_ = status;
  if (status == 503) {
    // A draining engine refuses new requests with 503 and Retry-After: send it no more
    // for that long, whether or not this request is retried.
    int seconds = 0;
    const std::string_view after = HeaderValue(headers, "retry-after");
    if (absl::SimpleAtoi(absl::string_view(after.data(), after.size()), &seconds) && seconds > 0)
      routing_->Refused(*current_, std::chrono::seconds(seconds));
  }
  if ((status == 502 || status == 503) && static_cast<int>(tried_.size()) <= max_retries_) {
    retry_this_attempt_ = true;  // skip its body; try the next endpoint when it ends
    retry_reason_ = status == 502 ? RetryReason::kHttp502 : RetryReason::kHttp503;
    last_error_ = absl::UnavailableError(fmt::format("{} answered {}", current_->name, status));
    return;
  }
  net::HeaderList out;
  out.reserve(4);  // the two below, x-request-id, and rarely more than one forwarded
  for (const auto& [name, value] : headers) {
    if (ForwardResponseHeader(name))
      out.emplace_back(name, value);
  }
  out.emplace_back("x-switchyard-endpoint", current_->name);
  if (disaggregated_)
    out.emplace_back("x-switchyard-prefill-endpoint", current_->prefill->name);
  if (std::string token = routing_->SessionToken(current_->name); !token.empty())
    out.emplace_back("x-session-token", std::move(token));
  // The usual types need no copy of their own.
  const std::string_view type = HeaderValue(headers, "content-type");
  if (type.empty()) {
    head_content_type_ = request_.stream ? kEventStream : kJson;
  } else if (type == kJson || type == kEventStream) {
    head_content_type_ = type == kJson ? kJson : kEventStream;
  } else {
    head_content_type_copy_ = type;
    head_content_type_ = head_content_type_copy_;
  }
  sse_ = request_.stream && head_content_type_.starts_with(kEventStream);
  head_headers_ = std::move(out);
}

net::HeaderList ProxyCall::TakeHeadHeaders() {
  // The response is the last use of the request id: it moves rather than copies.
  head_headers_.emplace_back("x-request-id", TakeRequestId());
  return std::move(head_headers_);
}

std::string ProxyCall::TakeRequestId() {
  return std::move(request_.http.headers[request_.request_id_header].second);
}

bool ProxyCall::OnBody(std::string_view chunk) {
  base::MutexLock lock(&mu_);
  if (client_gone_ || done_ || retry_this_attempt_ || !cut_.ok())
    return true;
  if (!sse_) {
    if (prefill_pending_) {
      current_->load->PrefillDone(request_.prompt_tokens);
      prefill_pending_ = false;
    }
    buffered_.append(chunk);
    return true;
  }
  absl::StatusOr<std::string> events = framer_.Feed(chunk);
  if (!events.ok()) {
    cut_ = events.status();
    handle_->Cancel();  // posted: OnDone(Cancelled) follows, outside this lock
    return true;
  }
  if (events->empty())
    return true;  // an unfinished event, or keep-alive comments before the first data
  if (!first_byte_sent_) {
    if (StopWaiting())
      return true;  // the endpoint went down: the attempt is being cancelled, to retry
    current_->load->PrefillDone(request_.prompt_tokens);
    prefill_pending_ = false;
    FirstByte(std::chrono::steady_clock::now());
  }
  Generated(generated_.FeedEvents(*events));
  responder_->Write(*std::move(events));
  if (responder_->pending_write_bytes() > kStreamPauseBytes) {
    // The callback may run at once: it takes no lock, and Resume is posted, so it reaches
    // the upstream call after this pause.
    responder_->OnDrained(kStreamResumeBytes,
                          [handle = std::weak_ptr<net::HttpRequestHandle>(handle_)] {
                            if (const std::shared_ptr<net::HttpRequestHandle> h = handle.lock())
                              h->Resume();
                          });
    return false;
  }
  return true;
}

bool ProxyCall::StopWaiting() {
  if (waiting_) {
    waiting_ = false;
    woken_ = current_->load->waiters.Remove(&waiter_);
  }
  return woken_;
}

absl::Status ProxyCall::EndStream() {
  if (std::string last = framer_.End(); !last.empty()) {
    if (!first_byte_sent_) {
      current_->load->PrefillDone(request_.prompt_tokens);
      prefill_pending_ = false;
      FirstByte(std::chrono::steady_clock::now());
    }
    Generated(generated_.FeedEvents(last));
    responder_->Write(std::move(last));
  }
  if (framer_.done())
    return absl::OkStatus();
  return absl::InternalError("the stream ended without its data: [DONE] event");
}

void ProxyCall::FinishAttempt() {
  StopWaiting();
  EndLoad();
  handle_ = nullptr;
}

void ProxyCall::EndLoad() {
  current_->load->Ended(request_.prompt_tokens, generated_.count(), prefill_pending_);
}

void ProxyCall::Generated(int64_t tokens) {
  if (tokens == 0)
    return;
  current_->load->Generated(tokens);
  routing_->Generated(tokens);
}

void ProxyCall::FirstByte(std::chrono::steady_clock::time_point now) {
  if (first_byte_sent_)
    return;
  first_byte_sent_ = true;
  current_->metrics->FirstByte(SecondsBetween(request_.arrival, now));
  if (sse_)
    responder_->StartStream(head_status_, head_content_type_, TakeHeadHeaders());
}

void ProxyCall::Finished(int code, std::chrono::steady_clock::time_point now) {
  EndpointRecorder& recorder = current_.has_value() ? *current_->metrics : metrics_->Unrouted();
  recorder.RequestFinished(code, SecondsBetween(request_.arrival, now));
}

void ProxyCall::SendError(const absl::Status& error, net::HeaderList extra) {
  const int http_status = api::HttpErrorFor(error).http_status;
  Finished(http_status, std::chrono::steady_clock::now());
  extra.emplace_back("x-request-id", TakeRequestId());
  // A client that retries (the openai client does, on 429 and 5xx) waits this long first:
  // an endpoint comes back with a good scrape or when its ejection ends.
  if (http_status == 503 || http_status == 429)
    extra.emplace_back("retry-after", std::to_string(kRetryAfterSeconds));
  responder_->Send(http_status, kJson, api::ErrorBody(error), std::move(extra));
}

void ProxyCall::Abort(const absl::Status& error) {
  std::shared_ptr<net::HttpRequestHandle> handle;
  {
    base::MutexLock lock(&mu_);
    if (done_)
      return;
    done_ = true;
    handle = std::move(handle_);
    if (handle != nullptr || prefill_running_)  // an attempt is running
      EndLoad();
    if (request_.stream && first_byte_sent_) {
      Finished(kStreamErrorCode, std::chrono::steady_clock::now());
      responder_->Write(api::SseError(error));
      responder_->Write(std::string(api::kSseDone));
      responder_->End();
    } else {
      SendError(error);
    }
  }
  if (handle != nullptr)
    handle->Cancel();  // its OnDone finds the call done
}

void ProxyCall::OnDone(const absl::Status& upstream_status) {
  base::MutexLock lock(&mu_);
  if (done_)
    return;
  FinishAttempt();
  if (client_gone_) {
    done_ = true;
    // A client that closes once it has the stream's [DONE] event got the whole answer
    // (the openai client closes there, before the last chunk of the framing arrives).
    Finished(first_byte_sent_ && sse_ && framer_.done() ? head_status_ : 499,
             std::chrono::steady_clock::now());
    return;
  }
  absl::Status status = cut_.ok() ? upstream_status : cut_;
  if (woken_ && !first_byte_sent_ && !(status.ok() && !sse_)) {
    // The endpoint left the routing set while the attempt waited on it, and the attempt was
    // cancelled (only a whole buffered response that made it anyway is kept).
    last_error_ = absl::UnavailableError(
        fmt::format("{} became unhealthy while the request waited on it", current_->name));
    Retry(RetryReason::kUnhealthy);
    return;
  }
  if (status.ok() && sse_)
    status = EndStream();
  if (status.ok() && request_.stream && !sse_ && head_status_ >= 200 && head_status_ < 300) {
    // A success that is not an event stream (a whole JSON completion) is not the answer a
    // stream client can read: the openai client would see an empty stream. The endpoint is
    // broken; the request, buffered so far, goes to another. (Error answers pass as JSON.)
    status = absl::InternalError(
        fmt::format("{} answered a stream request with {}", current_->name, head_content_type_));
  }
  if (!absl::IsCancelled(status))  // the router stopping is no failure of the endpoint's
    routing_->AttemptEnded(*current_, !status.ok() || head_status_ >= 500);
  // Nothing reached the client yet: a failed attempt (Unavailable before the upstream's
  // head, Internal after it) is retried; a timeout only for a stream.
  const bool before_first_byte = !first_byte_sent_;
  const bool timed_out = request_.stream && before_first_byte && absl::IsDeadlineExceeded(status);
  if (retry_this_attempt_ ||
      (before_first_byte && (absl::IsUnavailable(status) || absl::IsInternal(status))) ||
      timed_out) {
    if (!retry_this_attempt_) {
      last_error_ = status;
      retry_reason_ = timed_out ? RetryReason::kTimeout : RetryReason::kConnect;
    }
    Retry(retry_reason_);
    return;
  }
  done_ = true;
  if (status.ok()) {
    // A buffered response's first byte goes with its last: one clock read for both.
    const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
    FirstByte(now);
    // Counted before the client sees the end: a client holding its response finds it in
    // /metrics.
    Finished(head_status_, now);
    if (sse_) {
      responder_->End();
    } else {
      // The attempt's load has ended (FinishAttempt): only the routing charges these.
      if (const int64_t tokens = generated_.FeedBody(buffered_); tokens != 0)
        routing_->Generated(tokens);
      responder_->Send(head_status_, head_content_type_, std::move(buffered_), TakeHeadHeaders());
    }
    return;
  }
  const absl::Status error =
      absl::IsDeadlineExceeded(status)
          ? status
          : absl::UnavailableError(fmt::format("The endpoint {} failed: {}", current_->name,
                                               std::string(status.message())));
  if (sse_ && first_byte_sent_) {
    // Mid-stream: the framer holds back any partial event, so the client's stream stands at
    // an event boundary: an error event, then [DONE]. Never a fake finish_reason.
    Finished(kStreamErrorCode, std::chrono::steady_clock::now());
    responder_->Write(api::SseError(error));
    responder_->Write(std::string(api::kSseDone));
    responder_->End();
    return;
  }
  SendError(error);
}

}  // namespace switchyard::router::internal
