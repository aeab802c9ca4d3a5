// RoutedRequest: the PickedRequest the router hands the ext_proc server: one request's
// RequestRouting after its pick, which holds the request's endpoint load, tenant account and
// drain ticket from the pick to its end (destruction), and counts what the response generates
// (GeneratedTokens over its SSE events or its whole JSON body) for the tenant's token quota
// and the endpoint's in-flight tokens. Not thread-safe (PickedRequest's contract).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "router/extproc/pick_backend.h"
#include "router/internal/generated_tokens.h"
#include "router/internal/proxy_call.h"
#include "router/internal/request_routing.h"
#include "router/internal/sse_framer.h"

namespace switchyard::router::extproc {

class RoutedRequest final : public PickedRequest {
 public:
  // REQUIRES: `target` came from routing->NextTarget and was passed to routing->Picked.
  RoutedRequest(std::unique_ptr<internal::RequestRouting> routing, internal::ProxyTarget target,
                std::string body);
  ~RoutedRequest() override;

  const std::string& endpoint() const override { return endpoint_; }
  const std::string& body() const override { return body_; }
  void ResponseStatus(int http_status) override;
  void ResponseBody(std::string_view chunk, bool event_stream) override;

 private:
  // The response's first byte came: its prefill is done.
  void FirstByte();
  void Count(int64_t tokens);

  // Before target_ and routing_'s snapshot go, which target_ views.
  std::unique_ptr<internal::RequestRouting> routing_;
  const internal::ProxyTarget target_;
  const std::string endpoint_;
  const std::string body_;
  const int64_t prompt_tokens_;
  bool failed_ = false;
  bool prefill_pending_ = true;
  internal::SseFramer framer_;
  internal::GeneratedTokens generated_;
  // A JSON response's bytes, counted whole at the end; past kMaxJsonBytes it goes uncounted.
  static constexpr size_t kMaxJsonBytes = 16 << 20;
  std::string json_;
  bool json_overflow_ = false;
};

}  // namespace switchyard::router::extproc
