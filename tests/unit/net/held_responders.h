// Test helpers for tests that run an HttpServer: a handler that keeps every request and
// responder for the test to answer from its own threads, and a Start that fails the test
// instead of returning an error.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "net/http_server.h"
#include "test_client.h"

namespace switchyard::net::testing {

// A handler that keeps every responder for the test to answer from its own threads.
class HeldResponders {
 public:
  HttpHandler Handler() {
    return [this](HttpRequest request, std::shared_ptr<HttpResponder> responder) {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(std::move(request));
      responders_.push_back(std::move(responder));
      cv_.notify_all();
    };
  }

  // The n-th responder (from 0), once its request arrived; nullptr after kTimeout.
  std::shared_ptr<HttpResponder> Wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kTimeout, [&] { return responders_.size() > n; }))
      return nullptr;
    return responders_[n];
  }

  HttpRequest request(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_[n];
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    responders_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<HttpRequest> requests_;
  std::vector<std::shared_ptr<HttpResponder>> responders_;
};

inline std::unique_ptr<HttpServer> StartOrDie(const HttpServerOptions& options,
                                              HttpHandler handler) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

}  // namespace switchyard::net::testing
