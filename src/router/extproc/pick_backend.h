// What the ext_proc server asks of the router it runs in: admit and schedule one request as
// the HTTP front would (the same tenants, tokenizer, flow control and scheduling profile),
// and account for its response. RouterServer implements it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "net/http_message.h"

namespace switchyard::router::extproc {

// A request the router admitted and picked an endpoint for. It counts as in flight on that
// endpoint (and for its tenant, its flow and the drain) until it is destroyed. Calls come one
// at a time (the stream's lock).
class PickedRequest {
 public:
  virtual ~PickedRequest() = default;
  // "ip:port", for x-gateway-destination-endpoint.
  virtual const std::string& endpoint() const = 0;
  // The body to send upstream (the tenant's cache salt may have replaced the client's).
  virtual const std::string& body() const = 0;
  // The upstream's response status (a 5xx counts against the endpoint, as a proxied one).
  virtual void ResponseStatus(int http_status) = 0;
  // The response's next body bytes; `event_stream`: its content type is text/event-stream.
  virtual void ResponseBody(std::string_view chunk, bool event_stream) = 0;
};

// The router's own answer in place of a pick (a refusal: 400, 401, 429, 503 ...).
struct DirectAnswer {
  int http_status = 0;
  net::HeaderList headers;
  std::string body;
};

using PickOutcome = std::variant<std::unique_ptr<PickedRequest>, DirectAnswer>;

class PickBackend {
 public:
  virtual ~PickBackend() = default;
  // Admits and schedules `request` (whole: headers and body); `done` is called at most once:
  // before Pick returns, or later on another thread (from flow control's queue). The cancel
  // returned takes a queued request out, after which `done` is not called unless its dispatch
  // was already under way (the caller drops what it brings then). Any thread.
  virtual std::function<void()> Pick(net::HttpRequest request,
                                     std::function<void(PickOutcome)> done) = 0;
};

}  // namespace switchyard::router::extproc
