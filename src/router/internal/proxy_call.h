// ProxyCall: one client request proxied to the engines, with retries on the next-best
// endpoint while nothing has reached the client. Owned by shared_ptr: the upstream
// callbacks and the client's close callback hold it until the exchange ends.
//
// Threads: Start on the HTTP server loop; upstream callbacks on an HTTP client loop; the
// client's close callback on the server loop. A mutex orders them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "router/endpoint_table.h"

namespace switchyard::router::internal {

struct ProxyTarget {
  std::string name;
  std::string address;
};

struct ProxyRequest {
  std::string method;
  std::string target;
  net::HeaderList headers;  // already filtered for forwarding
  std::string body;
  int64_t prompt_tokens = 0;
  // The client asked for SSE: the response streams through, and a failure after the first
  // byte ends it with an error event. Otherwise the response is buffered, so any upstream
  // failure can still be retried or answered with a proper error.
  bool stream = false;
};

class ProxyCall : public std::enable_shared_from_this<ProxyCall> {
 public:
  // `next_target(tried)` returns the next endpoint to try, excluding those already tried,
  // or nullopt when none is left. `issue_token(endpoint)` makes the x-session-token.
  ProxyCall(
      ProxyRequest request, std::shared_ptr<net::HttpResponder> responder, net::HttpClient* client,
      EndpointTable* table, int max_retries,
      std::function<std::optional<ProxyTarget>(const std::vector<std::string>& tried)> next_target,
      std::function<std::string(const std::string& endpoint)> issue_token,
      std::function<void(const ProxyTarget&)> on_picked);

  // Tries the first target.
  void Start();

 private:
  void TryNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnHead(int status, const net::HeaderList& headers);
  bool OnBody(std::string_view chunk);
  void OnDone(const absl::Status& status);
  void FinishAttempt() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ProxyRequest request_;
  const std::shared_ptr<net::HttpResponder> responder_;
  net::HttpClient* const client_;
  EndpointTable* const table_;
  const int max_retries_;
  const std::function<std::optional<ProxyTarget>(const std::vector<std::string>&)> next_target_;
  const std::function<std::string(const std::string&)> issue_token_;
  const std::function<void(const ProxyTarget&)> on_picked_;

  base::Mutex mu_;
  std::vector<std::string> tried_ ABSL_GUARDED_BY(mu_);
  std::optional<ProxyTarget> current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<net::HttpRequestHandle> handle_ ABSL_GUARDED_BY(mu_);
  bool started_downstream_ ABSL_GUARDED_BY(mu_) = false;
  // Non-streaming: the upstream response, sent whole at the end.
  int head_status_ ABSL_GUARDED_BY(mu_) = 0;
  net::HeaderList head_headers_ ABSL_GUARDED_BY(mu_);
  std::string buffered_ ABSL_GUARDED_BY(mu_);
  bool retry_this_attempt_ ABSL_GUARDED_BY(mu_) = false;  // a 502/503 head to skip
  bool prefill_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard::router::internal
