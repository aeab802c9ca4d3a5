// Test support for the disk and Redis block stores: a scratch directory, and a way to wait
// for a batch's callback (which runs on a store thread) without sleeping.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "gtest/gtest.h"

#include "base/mutex.h"

namespace switchyard::kvx {

// A fresh directory under the test's temporary directory, removed with what it holds.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    std::string name = ::testing::TempDir() + "sy_store_XXXXXX";
    if (::mkdtemp(name.data()) == nullptr)
      ADD_FAILURE() << "mkdtemp " << name;
    path_ = name;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// One batch's results, filled by the store's callback on its thread.
class BatchResult {
 public:
  using Callback = absl::AnyInvocable<void(std::vector<absl::Status> results)>;

  // The callback to give the store; it must run once.
  static std::pair<std::shared_ptr<BatchResult>, Callback> Make() {
    auto result = std::make_shared<BatchResult>();
    return {result, [result](std::vector<absl::Status> results) {
              base::MutexLock lock(&result->mu_);
              EXPECT_FALSE(result->results_.has_value()) << "a batch's callback ran twice";
              result->results_ = std::move(results);
              result->cv_.NotifyAll();
            }};
  }

  // The results, once the callback has run (empty, failing the test, after a generous
  // deadline).
  std::vector<absl::Status> Wait() {
    base::MutexLock lock(&mu_);
    const bool done =
        cv_.WaitUntil(&mu_, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return results_.has_value(); });
    EXPECT_TRUE(done) << "a batch's callback did not run";
    return done ? *results_ : std::vector<absl::Status>{};
  }

  // Whether the callback has run (no waiting).
  bool done() {
    base::MutexLock lock(&mu_);
    return results_.has_value();
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  std::optional<std::vector<absl::Status>> results_ ABSL_GUARDED_BY(mu_);
};

// Each status's code, for comparing a batch's results at a glance.
// A store's (DiskBlockStore's, RedisBlockStore's) Write or Read of `ops`, waited for.
template <typename Store>
std::vector<absl::Status> Write(Store& store, std::vector<typename Store::Op> ops) {
  auto [result, done] = BatchResult::Make();
  store.Write(std::move(ops), std::move(done));
  return result->Wait();
}
template <typename Store>
std::vector<absl::Status> Read(Store& store, std::vector<typename Store::Op> ops) {
  auto [result, done] = BatchResult::Make();
  store.Read(std::move(ops), std::move(done));
  return result->Wait();
}

inline std::vector<absl::StatusCode> Codes(const std::vector<absl::Status>& results) {
  std::vector<absl::StatusCode> codes;
  for (const absl::Status& status : results)
    codes.push_back(status.code());
  return codes;
}

}  // namespace switchyard::kvx
