#include "router/extproc/routed_request.h"

#include <utility>

namespace switchyard::router::extproc {

RoutedRequest::RoutedRequest(std::unique_ptr<internal::RequestRouting> routing,
                             internal::ProxyTarget target, std::string body)
    : routing_(std::move(routing)),
      target_(target),
      endpoint_(target_.address),
      body_(std::move(body)),
      prompt_tokens_(routing_->prompt_tokens()) {
  target_.load->Started(prompt_tokens_);
}

RoutedRequest::~RoutedRequest() {
  if (!json_.empty() && !json_overflow_)
    Count(generated_.FeedBody(json_));
  target_.load->Ended(prompt_tokens_, generated_.count(), prefill_pending_);
  routing_->AttemptEnded(target_, failed_);
}

void RoutedRequest::ResponseStatus(int http_status) {
  failed_ = http_status >= 500;
}

void RoutedRequest::ResponseBody(std::string_view chunk, bool event_stream) {
  if (chunk.empty())
    return;
  FirstByte();
  if (!event_stream) {
    if (json_.size() + chunk.size() > kMaxJsonBytes)
      json_overflow_ = true;
    else
      json_.append(chunk);
    return;
  }
  // A malformed stream (an event past the framer's bound) goes uncounted from there on.
  if (absl::StatusOr<std::string> events = framer_.Feed(chunk); events.ok() && !events->empty())
    Count(generated_.FeedEvents(*events));
}

void RoutedRequest::FirstByte() {
  if (!prefill_pending_)
    return;
  prefill_pending_ = false;
  target_.load->PrefillDone(prompt_tokens_);
}

void RoutedRequest::Count(int64_t tokens) {
  if (tokens == 0)
    return;
  target_.load->Generated(tokens);
  routing_->Generated(tokens);
}

}  // namespace switchyard::router::extproc
