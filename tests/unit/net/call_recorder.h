// Test helper for the HTTP client: records one request's callbacks, which run on a client
// loop, for the test thread to wait on and check. Callbacks() may outlive the recorder
// (they share its state), so a client stopped after the test body still has somewhere to
// report.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "net/http_client.h"
#include "test_client.h"

namespace switchyard::net::testing {

class CallRecorder {
 public:
  CallRecorder();

  // on_body keeps each piece and returns what `accept_body` says (default: true).
  HttpClientCallbacks Callbacks();
  void set_accept_body(std::function<bool(const std::string& body_so_far)> accept_body);

  // Wait until on_done ran / the body holds at least `bytes` / on_head ran. False on timeout.
  bool WaitDone(std::chrono::milliseconds timeout = kTimeout);
  bool WaitBody(size_t bytes, std::chrono::milliseconds timeout = kTimeout);
  bool WaitHead(std::chrono::milliseconds timeout = kTimeout);
  // Until more than `pieces` body pieces arrived or on_done ran.
  bool WaitPiecesOrDone(size_t pieces, std::chrono::milliseconds timeout = kTimeout);

  absl::Status status();  // on_done's status; Unknown before it ran
  int head_status();      // 0 before on_head
  HeaderList headers();
  std::optional<std::string> Header(const std::string& lower_name);
  std::string body();
  size_t pieces();
  int done_calls();
  int head_calls();
  // Callbacks that ran out of order: on_body before on_head, anything after on_done.
  int out_of_order();

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::function<bool(const std::string&)> accept_body;
    int head_status = 0;
    HeaderList headers;
    std::string body;
    size_t pieces = 0;
    int head_calls = 0;
    int done_calls = 0;
    int out_of_order = 0;
    absl::Status status = absl::UnknownError("not done");
  };

  template <typename Pred>
  bool WaitFor(std::chrono::milliseconds timeout, Pred pred);

  std::shared_ptr<State> state_;
};

// Starts a client or fails the test (nullptr).
std::unique_ptr<HttpClient> StartClientOrDie(const HttpClientOptions& options = {});

}  // namespace switchyard::net::testing
