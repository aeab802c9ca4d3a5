#include "kube/reflector.h"

#include <chrono>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#include "base/mutex.h"
#include "base/status_macros.h"

namespace switchyard::kube {
namespace {

using std::chrono::milliseconds;

// A ListWatchClient that plays a script: each List or Watch takes the next step; with none
// left it blocks until Interrupt.
class ScriptedClient : public ListWatchClient {
 public:
  struct Step {
    bool list = false;
    absl::Status status;             // a failed list, or how a watch ends after its lines
    std::string list_body;           // list: the response body
    std::vector<std::string> lines;  // watch: its events
  };

  // Shared with the test, which keeps a pointer after the reflector takes ownership.
  struct Log {
    base::Mutex mu;
    base::CondVar cv;
    std::deque<Step> steps ABSL_GUARDED_BY(mu);
    // "list" or "watch@<resourceVersion>", in order.
    std::vector<std::string> calls ABSL_GUARDED_BY(mu);
    bool idle ABSL_GUARDED_BY(mu) = false;  // blocked with the script played
    bool interrupted ABSL_GUARDED_BY(mu) = false;
  };

  explicit ScriptedClient(Log* log) : log_(log) {}

  absl::StatusOr<ObjectList> List(const ResourceQuery&) override {
    SY_ASSIGN_OR_RETURN(Step step, Next("list"));
    EXPECT_TRUE(step.list);
    if (!step.status.ok())
      return step.status;
    return DecodeObjectList(step.list_body);
  }

  absl::Status Watch(const ResourceQuery&, const std::string& resource_version, int,
                     const EventFn& on_event) override {
    SY_ASSIGN_OR_RETURN(Step step, Next("watch@" + resource_version));
    EXPECT_FALSE(step.list);
    for (const std::string& line : step.lines) {
      absl::StatusOr<WatchEvent> event = DecodeWatchEvent(line);
      EXPECT_TRUE(event.ok()) << line;
      if (absl::Status s = on_event(*std::move(event)); !s.ok())
        return s;
    }
    return step.status;
  }

  void Interrupt() override {
    base::MutexLock lock(&log_->mu);
    log_->interrupted = true;
    log_->cv.NotifyAll();
  }

 private:
  absl::StatusOr<Step> Next(std::string call) {
    base::MutexLock lock(&log_->mu);
    log_->calls.push_back(std::move(call));
    if (log_->steps.empty()) {
      log_->idle = true;
      log_->cv.NotifyAll();
      log_->cv.Wait(&log_->mu,
                    [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(log_->mu) { return log_->interrupted; });
    }
    if (log_->interrupted)
      return absl::CancelledError("interrupted");
    Step step = std::move(log_->steps.front());
    log_->steps.pop_front();
    return step;
  }

  Log* const log_;
};

ScriptedClient::Step ListOf(const std::string& rv, const std::vector<std::string>& names) {
  std::string items;
  for (const std::string& name : names) {
    items += (items.empty() ? "" : ",") + std::string(R"({"metadata":{"name":")") + name +
             R"(","namespace":"ns","resourceVersion":")" + rv + R"("}})";
  }
  ScriptedClient::Step step;
  step.list = true;
  step.list_body = R"({"metadata":{"resourceVersion":")" + rv + R"("},"items":[)" + items + "]}";
  return step;
}

std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return R"({"type":")" + type + R"(","object":{"metadata":{"name":")" + name +
         R"(","namespace":"ns","resourceVersion":")" + rv + R"("}}})";
}

ScriptedClient::Step WatchOf(std::vector<std::string> lines, absl::Status end = absl::OkStatus()) {
  ScriptedClient::Step step;
  step.lines = std::move(lines);
  step.status = std::move(end);
  return step;
}

struct Harness {
  ScriptedClient::Log log;
  base::Mutex mu;
  std::vector<std::string> stores ABSL_GUARDED_BY(mu);  // each on_change: the keys, joined
  std::unique_ptr<Reflector> reflector;

  void Start(std::deque<ScriptedClient::Step> steps) {
    {
      base::MutexLock lock(&log.mu);
      log.steps = std::move(steps);
    }
    ReflectorOptions options;
    options.name = "test";
    options.min_backoff = milliseconds(1);
    options.max_backoff = milliseconds(4);
    options.on_change = [this](const ObjectStore& objects) {
      std::string keys;
      for (const auto& [key, object] : objects)
        keys += (keys.empty() ? "" : ",") + key;
      base::MutexLock lock(&mu);
      stores.push_back(keys);
    };
    reflector = std::make_unique<Reflector>(std::make_unique<ScriptedClient>(&log), options);
    reflector->Start();
  }

  // Waits until the script is played and the reflector waits for more.
  void WaitIdle() {
    base::MutexLock lock(&log.mu);
    log.cv.Wait(&log.mu, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(log.mu) { return log.idle; });
  }
};

TEST(ReflectorTest, ListsThenAppliesWatchEventsAndResumesFromTheLastVersion) {
  Harness h;
  h.Start({ListOf("10", {"a", "b"}),
           WatchOf({Event("ADDED", "c", "11"), Event("MODIFIED", "a", "12"),
                    Event("DELETED", "b", "13"),
                    R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"20"}}})"}),
           // The server's timeout ended that watch; this one resumes from the bookmark.
           WatchOf({Event("ADDED", "d", "21")})});
  h.WaitIdle();
  h.reflector->Stop();
  {
    base::MutexLock lock(&h.log.mu);
    EXPECT_EQ(h.log.calls, (std::vector<std::string>{"list", "watch@10", "watch@20", "watch@21"}));
  }
  base::MutexLock lock(&h.mu);
  EXPECT_EQ(h.stores, (std::vector<std::string>{"ns/a,ns/b", "ns/a,ns/b,ns/c", "ns/a,ns/b,ns/c",
                                                "ns/a,ns/c", "ns/a,ns/c,ns/d"}));
  const ReflectorStats stats = h.reflector->stats();
  EXPECT_EQ(stats.lists, 1u);
  EXPECT_EQ(stats.watch_restarts, 2u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_TRUE(stats.synced);
}

TEST(ReflectorTest, RelistsWhenTheVersionIsGone) {
  Harness h;
  h.Start(
      {ListOf("10", {"a"}),
       WatchOf({R"({"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old"}})"}),
       ListOf("30", {"b"}),
       // A 410 answered to the watch request itself (HTTP 410).
       WatchOf({}, absl::Status(kGoneCode, "gone")), ListOf("40", {"c"})});
  h.WaitIdle();
  h.reflector->Stop();
  {
    base::MutexLock lock(&h.log.mu);
    EXPECT_EQ(h.log.calls, (std::vector<std::string>{"list", "watch@10", "list", "watch@30", "list",
                                                     "watch@40"}));
  }
  base::MutexLock lock(&h.mu);
  EXPECT_EQ(h.stores, (std::vector<std::string>{"ns/a", "ns/b", "ns/c"}));
  EXPECT_EQ(h.reflector->stats().lists, 3u);
  EXPECT_EQ(h.reflector->stats().errors, 0u);
}

TEST(ReflectorTest, BacksOffOnErrorsThenResumes) {
  Harness h;
  ScriptedClient::Step refused;
  refused.list = true;
  refused.status = absl::UnauthenticatedError("HTTP 401: Unauthorized");
  h.Start({refused, refused, ListOf("10", {"a"}),
           WatchOf({Event("ADDED", "b", "11")}, absl::UnavailableError("connection reset")),
           // After the backoff the watch resumes from what it saw, without a list.
           WatchOf({Event("ADDED", "c", "12")}),
           // A watch ended by an ERROR event other than 410 is a failure too.
           WatchOf({R"({"type":"ERROR","object":{"kind":"Status","code":500,"message":"x"}})"})});
  h.WaitIdle();
  h.reflector->Stop();
  {
    base::MutexLock lock(&h.log.mu);
    EXPECT_EQ(h.log.calls, (std::vector<std::string>{"list", "list", "list", "watch@10", "watch@11",
                                                     "watch@12", "watch@12"}));
  }
  const ReflectorStats stats = h.reflector->stats();
  EXPECT_EQ(stats.errors, 4u);
  EXPECT_EQ(stats.lists, 1u);
  base::MutexLock lock(&h.mu);
  EXPECT_EQ(h.stores.back(), "ns/a,ns/b,ns/c");
}

TEST(ReflectorTest, StopInterruptsABlockedWatchAndABackoff) {
  Harness h;
  h.Start({ListOf("1", {})});
  h.WaitIdle();  // blocked in its watch
  const auto start = std::chrono::steady_clock::now();
  h.reflector->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
  EXPECT_TRUE(h.reflector->stats().synced);

  // A reflector waiting out a long backoff stops at once too.
  ScriptedClient::Log log;
  ScriptedClient::Step refused;
  refused.list = true;
  refused.status = absl::UnavailableError("down");
  {
    base::MutexLock lock(&log.mu);
    log.steps = {refused};
  }
  ReflectorOptions options;
  options.name = "backoff";
  options.min_backoff = std::chrono::hours(1);
  options.max_backoff = std::chrono::hours(1);
  options.on_change = [](const ObjectStore&) {};
  Reflector reflector(std::make_unique<ScriptedClient>(&log), options);
  reflector.Start();
  while (reflector.stats().errors == 0)
    std::this_thread::yield();
  const auto backoff_start = std::chrono::steady_clock::now();
  reflector.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - backoff_start, milliseconds(500));
  EXPECT_FALSE(reflector.stats().synced);
}

}  // namespace
}  // namespace switchyard::kube
