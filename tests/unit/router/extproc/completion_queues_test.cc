#include "router/extproc/completion_queues.h"

#include <pthread.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "grpcpp/alarm.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

#include "router/extproc/completion_tag.h"

namespace switchyard::router::extproc {
namespace {

// Records the thread that completed it, and whether ok.
class RecordingTag final : public CompletionTag {
 public:
  void Complete(bool ok) override {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    done_.set_value({ok, name});
  }
  std::future<std::pair<bool, std::string>> done() { return done_.get_future(); }

 private:
  std::promise<std::pair<bool, std::string>> done_;
};

class CompletionQueuesTest : public ::testing::Test {
 protected:
  CompletionQueuesTest() {
    grpc::ServerBuilder builder;
    queues_ = std::make_unique<CompletionQueues>(&builder, 2);
    server_ = builder.BuildAndStart();
  }
  ~CompletionQueuesTest() override {
    server_->Shutdown();
    queues_->Shutdown();
  }

  std::unique_ptr<CompletionQueues> queues_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(CompletionQueuesTest, EachQueueHasAThreadThatCompletesItsTags) {
  ASSERT_NE(server_, nullptr);
  ASSERT_EQ(queues_->size(), 2u);
  queues_->Start("cqtest");
  for (size_t i = 0; i < queues_->size(); ++i) {
    RecordingTag tag;
    auto done = tag.done();
    grpc::Alarm alarm;
    ASSERT_TRUE(queues_->Submit(
        [&] { alarm.Set(queues_->queue(i), std::chrono::system_clock::now(), tag.Handed()); }));
    ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    const auto [ok, thread] = done.get();
    EXPECT_TRUE(ok);
    EXPECT_EQ(thread, "sy-cqtest-" + std::to_string(i));
  }
}

TEST_F(CompletionQueuesTest, NothingIsSubmittedOnceShutDown) {
  queues_->Start("cqtest");
  server_->Shutdown();
  queues_->Shutdown();
  bool ran = false;
  EXPECT_FALSE(queues_->Submit([&] { ran = true; }));
  EXPECT_FALSE(ran);
  queues_->Shutdown();  // idempotent
}

TEST_F(CompletionQueuesTest, QueuesNeverStartedAreDrainedByShutdown) {
  RecordingTag tag;
  auto done = tag.done();
  grpc::Alarm alarm;
  ASSERT_TRUE(queues_->Submit(
      [&] { alarm.Set(queues_->queue(0), std::chrono::system_clock::now(), tag.Handed()); }));
  server_->Shutdown();
  queues_->Shutdown();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_TRUE(done.get().first);
}

}  // namespace
}  // namespace switchyard::router::extproc
