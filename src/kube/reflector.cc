#include "kube/reflector.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"

#include "base/logging.h"
#include "base/thread_name.h"

namespace switchyard::kube {
namespace {

// A watch that the server ends sooner than this after it opened, with no event, counts as a
// failure (backoff), so that a server closing watches at once is not spun on.
constexpr std::chrono::seconds kMinWatchLife{1};

}  // namespace

Reflector::Reflector(std::unique_ptr<ListWatchClient> client, ReflectorOptions options)
    : client_(std::move(client)),
      options_(std::move(options)),
      backoff_(options_.min_backoff),
      random_(std::random_device{}()) {}

Reflector::~Reflector() {
  Stop();
}

void Reflector::Start() {
  thread_ = std::thread([this] {
    base::SetCurrentThreadName(fmt::format("sy-kube-{}", options_.name).substr(0, 15));
    Run();
  });
}

void Reflector::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  client_->Interrupt();
  if (thread_.joinable())
    thread_.join();
}

ReflectorStats Reflector::stats() const {
  return {lists_.load(), watches_.load() > 0 ? watches_.load() - 1 : 0, errors_.load(),
          synced_.load()};
}

void Reflector::Run() {
  bool listed = false;
  for (;;) {
    {
      base::MutexLock lock(&mu_);
      if (stopping_)
        return;
    }
    if (!listed) {
      absl::StatusOr<ObjectList> list = client_->List(options_.query);
      if (list.ok()) {
        store_.clear();
        for (KubeObject& object : list->items)
          store_[object.Key()] = std::move(object);
        resource_version_ = std::move(list->resource_version);
        listed = true;
        backoff_ = options_.min_backoff;
        lists_.fetch_add(1);
        synced_.store(true);
        SY_LOG_DEBUG("kube {}: listed {} objects at resourceVersion {}", options_.name,
                     store_.size(), resource_version_);
        options_.on_change(store_);
      } else if (!absl::IsCancelled(list.status()) && !Backoff(list.status())) {
        return;
      }
      continue;
    }
    watches_.fetch_add(1);
    const auto opened = std::chrono::steady_clock::now();
    bool any_event = false;
    absl::Status watch = client_->Watch(options_.query, resource_version_,
                                        options_.watch_timeout_seconds, [&](WatchEvent event) {
                                          any_event = true;
                                          backoff_ = options_.min_backoff;
                                          return Apply(std::move(event));
                                        });
    if (absl::IsCancelled(watch))
      continue;  // Stop: the loop's check returns
    if (IsGone(watch)) {
      SY_LOG_INFO("kube {}: resourceVersion {} is gone; listing again", options_.name,
                  resource_version_);
      listed = false;
      continue;
    }
    if (watch.ok() && (any_event || std::chrono::steady_clock::now() - opened >= kMinWatchLife))
      continue;  // the server's timeout: resume from the last resourceVersion
    if (watch.ok())
      watch = absl::UnavailableError("the server ended the watch at once");
    if (!Backoff(watch))
      return;
  }
}

absl::Status Reflector::Apply(WatchEvent event) {
  switch (event.type) {
    case WatchEventType::kError:
      if (event.gone())
        return absl::Status(kGoneCode, event.error_message);
      return absl::UnavailableError(
          fmt::format("watch error {}: {}", event.error_code, event.error_message));
    case WatchEventType::kBookmark:
      resource_version_ = std::move(event.object.resource_version);
      return absl::OkStatus();
    case WatchEventType::kAdded:
    case WatchEventType::kModified:
      resource_version_ = event.object.resource_version;
      store_[event.object.Key()] = std::move(event.object);
      break;
    case WatchEventType::kDeleted:
      resource_version_ = event.object.resource_version;
      store_.erase(event.object.Key());
      break;
  }
  options_.on_change(store_);
  return absl::OkStatus();
}

bool Reflector::Backoff(const absl::Status& error) {
  errors_.fetch_add(1);
  // Full jitter over the upper half: never less than half the step, so the retries still
  // spread out when many routers lose the server at once.
  std::uniform_int_distribution<int64_t> jitter(backoff_.count() / 2, backoff_.count());
  const std::chrono::milliseconds wait(jitter(random_));
  SY_LOG_WARN("kube {}: {}; retrying in {} ms", options_.name, std::string(error.message()),
              wait.count());
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  base::MutexLock lock(&mu_);
  return !cv_.WaitUntil(&mu_, std::chrono::steady_clock::now() + wait,
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
}

}  // namespace switchyard::kube
