#include "kvx/kv_event_subscriber.h"

#include <chrono>
#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include <zmq.hpp>

#include "base/mutex.h"
#include "kvx/kv_event_codec.h"
#include "kvx/kv_event_publisher.h"

namespace switchyard::kvx {
namespace {

// Records what the handler got; Wait blocks (with a deadline) until n batches arrived.
class Received {
 public:
  KvEventHandler Handler() {
    return [this](const std::string&, const KvEventBatch& b) {
      base::MutexLock lock(&mu_);
      batches_.push_back(b);
      cv_.NotifyAll();
    };
  }
  bool Wait(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    base::MutexLock lock(&mu_);
    return cv_.WaitUntil(&mu_, std::chrono::steady_clock::now() + timeout,
                         [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return batches_.size() >= n; });
  }
  std::vector<KvEventBatch> batches() {
    base::MutexLock lock(&mu_);
    return batches_;
  }

 private:
  base::Mutex mu_;
  base::CondVar cv_;
  std::vector<KvEventBatch> batches_ ABSL_GUARDED_BY(mu_);
};

KvEventBatch Batch(double ts) {
  KvEventBatch b;
  b.ts = ts;
  BlockStored s;
  s.block_hashes.push_back(EventHash::FromInt(static_cast<uint64_t>(ts)));
  s.token_ids = {1, 2};
  s.block_size = 2;
  b.events.push_back(s);
  return b;
}

TEST(KvEventSubscriberTest, LateJoinerReplaysFromTheStart) {
  KvEventPublisherOptions po;
  po.endpoint = "tcp://127.0.0.1:*";
  po.replay_endpoint = "tcp://127.0.0.1:*";
  auto pub = KvEventPublisher::Start(po);
  ASSERT_TRUE(pub.ok()) << pub.status();
  // Published before anyone subscribed: only the replay can deliver these.
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE((*pub)->Publish(Batch(i)));
  Received got;
  auto sub = KvEventSubscriber::Start(got.Handler());
  ASSERT_TRUE(sub.ok());
  (*sub)->AddSource({"e1", (*pub)->endpoint(), (*pub)->replay_endpoint(), ""});
  // The subscription takes effect asynchronously; keep publishing until the stream is
  // seen live, which makes the subscriber notice the gap and replay 0..k.
  for (int i = 5; i < 200 && (*sub)->stats("e1").batches == 0; ++i) {
    (*pub)->Publish(Batch(i));
    got.Wait(1, std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(got.Wait(6));
  std::vector<KvEventBatch> b = got.batches();
  for (size_t i = 0; i < b.size(); ++i)
    EXPECT_EQ(b[i].ts, static_cast<double>(i)) << i;  // every seq once, in order
  KvEventSourceStats stats = (*sub)->stats("e1");
  EXPECT_GE(stats.replayed, 5);
  EXPECT_EQ(stats.decode_errors, 0);
  (*sub)->Stop();
  (*pub)->Stop();
}

// A hand-driven PUB socket, for sequences a real publisher never makes.
class RawPublisher {
 public:
  RawPublisher() : pub_(ctx_, zmq::socket_type::pub) {
    pub_.bind("tcp://127.0.0.1:*");
    endpoint_ = pub_.get(zmq::sockopt::last_endpoint);
  }
  void Send(uint64_t seq, const std::string& payload) {
    std::array<uint8_t, 8> be;
    for (int i = 7; i >= 0; --i, seq >>= 8)
      be[static_cast<size_t>(i)] = static_cast<uint8_t>(seq & 0xff);
    pub_.send(zmq::str_buffer("t"), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(be), zmq::send_flags::sndmore);
    pub_.send(zmq::buffer(payload), zmq::send_flags::none);
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  zmq::context_t ctx_;
  zmq::socket_t pub_;
  std::string endpoint_;
};

// One source may switch layouts (an engine restarted with another event_layout): the
// subscriber reads each batch by its msgpack types, with no setting.
TEST(KvEventSubscriberTest, DecodesEveryLayout) {
  RawPublisher raw;
  Received got;
  auto sub = KvEventSubscriber::Start(got.Handler());
  ASSERT_TRUE(sub.ok());
  (*sub)->AddSource({"e", raw.endpoint(), "", "t"});
  while ((*sub)->stats("e").batches == 0) {
    raw.Send(0, EncodeKvEventBatch(Batch(0), {EventLayout::kArray}));
    got.Wait(1, std::chrono::milliseconds(50));
  }
  raw.Send(1, EncodeKvEventBatch(Batch(1), {EventLayout::kMap}));
  raw.Send(2, EncodeKvEventBatch(Batch(2), {EventLayout::kMapBatch}));
  std::vector<KvEventBatch> b;
  ASSERT_TRUE(got.Wait(3));
  b = got.batches();
  while (!b.empty() && b.front().ts == 0 && b.size() > 3)
    b.erase(b.begin());
  ASSERT_EQ(b.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(b[i], Batch(static_cast<double>(i))) << i;
  EXPECT_EQ((*sub)->stats("e").decode_errors, 0);
  (*sub)->Stop();
}

TEST(KvEventSubscriberTest, GapsRestartsAndGarbageWithoutReplay) {
  RawPublisher raw;
  Received got;
  auto sub = KvEventSubscriber::Start(got.Handler());
  ASSERT_TRUE(sub.ok());
  (*sub)->AddSource({"e", raw.endpoint(), "", "t"});
  const KvEventEncoding enc;
  // Seq 0 until it is seen (slow joiner), then the interesting ones.
  while ((*sub)->stats("e").batches == 0) {
    raw.Send(0, EncodeKvEventBatch(Batch(0), enc));
    got.Wait(1, std::chrono::milliseconds(50));
  }
  raw.Send(1, "not msgpack");                        // decode error
  raw.Send(3, EncodeKvEventBatch(Batch(3), enc));    // gap (no replay: applied anyway)
  raw.Send(3, EncodeKvEventBatch(Batch(3), enc));    // duplicate: dropped
  raw.Send(0, EncodeKvEventBatch(Batch(100), enc));  // restart
  ASSERT_TRUE(got.Wait(4));
  std::vector<KvEventBatch> b = got.batches();
  size_t i = 0;
  while (i < b.size() && b[i].ts == 0)
    ++i;
  ASSERT_EQ(b.size(), i + 3);
  EXPECT_EQ(b[i].ts, 3);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(b[i + 1].events.at(0)));
  EXPECT_EQ(b[i + 2].ts, 100);
  KvEventSourceStats s = (*sub)->stats("e");
  EXPECT_EQ(s.decode_errors, 1);
  EXPECT_EQ(s.gaps, 1);
  EXPECT_EQ(s.restarts, 1);
  (*sub)->RemoveSource("e");
  (*sub)->Stop();
}

}  // namespace
}  // namespace switchyard::kvx
