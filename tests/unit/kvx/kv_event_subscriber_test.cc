#include "kvx/kv_event_subscriber.h"

#include <array>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include <zmq.hpp>

#include "base/mutex.h"
#include "kv_event_wire_support.h"
#include "kvx/kv_event_codec.h"
#include "kvx/kv_event_publisher.h"
#include <zmq_addon.hpp>

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

// Waits until the publisher's thread has sent batch `seq`, which its replay buffer then
// holds (Publish only queues it): from then on a subscriber that connects can get it only
// by a replay. Asks the replay socket for `seq` onwards until a batch, not just the end
// marker, comes back.
void WaitUntilSent(const std::string& replay_endpoint, uint64_t seq) {
  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(replay_endpoint);
  for (int attempt = 0; attempt < 400 && !::testing::Test::HasFailure(); ++attempt) {
    if (!RequestReplay(dealer, seq).empty())
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL() << "batch " << seq << " was never sent";
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
  ASSERT_NO_FATAL_FAILURE(WaitUntilSent((*pub)->replay_endpoint(), 4));
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
    const std::array<uint8_t, 8> be = SeqFrame(seq);
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

bool IsCleared(const KvEventBatch& b) {
  return b.events.size() == 1 && std::holds_alternative<AllBlocksCleared>(b.events[0]);
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
  raw.Send(1, "not msgpack");  // its events are lost: stale, what came before is cleared
  ASSERT_TRUE(got.Wait(2));
  // Nothing in order since: still stale.
  EXPECT_TRUE((*sub)->stats("e").stale);
  EXPECT_NE((*sub)->stats("e").stale_reason.find("undecodable"), std::string::npos);
  raw.Send(3, EncodeKvEventBatch(Batch(3), enc));    // gap, no replay: cleared, then applied
  raw.Send(3, EncodeKvEventBatch(Batch(3), enc));    // duplicate: dropped
  raw.Send(0, EncodeKvEventBatch(Batch(100), enc));  // restart
  ASSERT_TRUE(got.Wait(5));
  std::vector<KvEventBatch> b = got.batches();
  size_t i = 0;
  while (i < b.size() && b[i].ts == 0 && !IsCleared(b[i]))
    ++i;
  ASSERT_EQ(b.size(), i + 4);
  EXPECT_TRUE(IsCleared(b[i]));  // the undecodable batch
  // The gap found the source stale already: no second clear, the batch starts it afresh.
  EXPECT_EQ(b[i + 1].ts, 3);
  EXPECT_TRUE(IsCleared(b[i + 2]));  // the restart
  EXPECT_EQ(b[i + 3].ts, 100);
  KvEventSourceStats s = (*sub)->stats("e");
  EXPECT_EQ(s.decode_errors, 1);
  EXPECT_EQ(s.gaps, 1);
  EXPECT_EQ(s.restarts, 1);
  EXPECT_EQ(s.losses, 1);
  EXPECT_FALSE(s.stale);
  (*sub)->RemoveSource("e");
  (*sub)->Stop();
}

TEST(KvEventSubscriberTest, GapWithoutReplayGoesStaleAndClears) {
  RawPublisher raw;
  Received got;
  auto sub = KvEventSubscriber::Start(got.Handler());
  ASSERT_TRUE(sub.ok());
  (*sub)->AddSource({"e", raw.endpoint(), "", "t"});
  const KvEventEncoding enc;
  while ((*sub)->stats("e").batches == 0) {
    raw.Send(0, EncodeKvEventBatch(Batch(0), enc));
    got.Wait(1, std::chrono::milliseconds(50));
  }
  const size_t before = got.batches().size();
  raw.Send(5, EncodeKvEventBatch(Batch(5), enc));  // 1..4 lost for good
  ASSERT_TRUE(got.Wait(before + 2));
  std::vector<KvEventBatch> b = got.batches();
  EXPECT_TRUE(IsCleared(b[before]));  // nothing from before the gap is trusted
  EXPECT_EQ(b[before + 1].ts, 5);
  KvEventSourceStats s = (*sub)->stats("e");
  EXPECT_EQ(s.losses, 1);
  EXPECT_FALSE(s.stale);  // back in order from a clean start
  (*sub)->Stop();
}

// A handler that throws ends the loop's life; the subscriber restarts it (the thread used
// to die silently, and no batch came after), clears what it handed out, marks the source
// stale, and resynchronises from the replay buffer.
TEST(KvEventSubscriberTest, LoopFailureRestartsAndResynchronises) {
  KvEventPublisherOptions po;
  po.endpoint = "tcp://127.0.0.1:*";
  po.replay_endpoint = "tcp://127.0.0.1:*";
  auto pub = KvEventPublisher::Start(po);
  ASSERT_TRUE(pub.ok()) << pub.status();
  base::Mutex mu;
  base::CondVar cv;
  std::vector<KvEventBatch> batches;
  bool thrown = false;
  auto sub = KvEventSubscriber::Start([&](const std::string&, const KvEventBatch& b) {
    base::MutexLock lock(&mu);
    if (!thrown && b.ts == 3) {
      thrown = true;
      throw std::runtime_error("handler failed");
    }
    batches.push_back(b);
    cv.NotifyAll();
  });
  ASSERT_TRUE(sub.ok());
  (*sub)->AddSource({"e1", (*pub)->endpoint(), (*pub)->replay_endpoint(), ""});
  auto wait_for = [&](auto pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    base::MutexLock lock(&mu);
    return cv.WaitUntil(&mu, std::chrono::steady_clock::now() + timeout,
                        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pred(); });
  };
  // Publish until the stream is seen (slow joiner), then past the failing batch.
  int published = 0;
  while (published < 200 && (*sub)->stats("e1").batches == 0) {
    ASSERT_TRUE((*pub)->Publish(Batch(published++)));
    wait_for([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !batches.empty() || thrown; },
             std::chrono::milliseconds(50));
  }
  while (published < 6)
    ASSERT_TRUE((*pub)->Publish(Batch(published++)));
  const double last = published - 1;
  ASSERT_TRUE(wait_for([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return thrown; }));
  // The restart clears, then the replay from seq 0 brings everything back without another
  // batch published.
  ASSERT_TRUE(wait_for([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !batches.empty() && batches.back().ts == last;
  }));
  EXPECT_EQ((*sub)->restarts(), 1);
  std::vector<KvEventBatch> b;
  {
    base::MutexLock lock(&mu);
    b = batches;
  }
  size_t cleared = 0;
  while (cleared < b.size() && !IsCleared(b[cleared]))
    ++cleared;
  ASSERT_LT(cleared, b.size());
  for (size_t i = cleared + 1; i < b.size(); ++i)
    EXPECT_EQ(b[i].ts, static_cast<double>(i - cleared - 1)) << i;  // rebuilt from seq 0
  // Fresh once the replay's end marker is in (just after its last batch).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*sub)->stats("e1").stale && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  KvEventSourceStats s = (*sub)->stats("e1");
  EXPECT_FALSE(s.stale);
  EXPECT_EQ(s.losses, 1);
  // And live batches flow again.
  ASSERT_TRUE((*pub)->Publish(Batch(published)));
  ASSERT_TRUE(
      wait_for([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return batches.back().ts == published; }));
  (*sub)->Stop();
  (*pub)->Stop();
}

// More sources than a ZeroMQ context has sockets (1023): the sockets past the limit cannot
// be made. That used to throw out of the loop and end the thread, silently, for every
// source; now those sources alone are stale (and retried), the others flow on.
TEST(KvEventSubscriberTest, SourcesPastTheSocketLimitAreStaleAlone) {
  RawPublisher raw;
  Received got;
  auto sub = KvEventSubscriber::Start(got.Handler());
  ASSERT_TRUE(sub.ok());
  (*sub)->AddSource({"first", raw.endpoint(), "", "t"});
  const KvEventEncoding enc;
  uint64_t seq = 0;
  while ((*sub)->stats("first").batches == 0 && seq < 400) {
    raw.Send(seq++, EncodeKvEventBatch(Batch(0), enc));
    got.Wait(1, std::chrono::milliseconds(50));
  }
  ASSERT_EQ((*sub)->stats("first").batches, 1);
  constexpr int kMore = 1100;
  for (int i = 0; i < kMore; ++i)
    (*sub)->AddSource({"extra" + std::to_string(i), raw.endpoint(), "", "nothing"});
  // Still flowing once every extra source was tried.
  const KvEventSourceStats last_extra = [&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    KvEventSourceStats s;
    while (!s.stale && std::chrono::steady_clock::now() < deadline)
      s = (*sub)->stats("extra" + std::to_string(kMore - 1));
    return s;
  }();
  EXPECT_TRUE(last_extra.stale);
  EXPECT_NE(last_extra.stale_reason.find("cannot subscribe"), std::string::npos)
      << last_extra.stale_reason;
  EXPECT_FALSE((*sub)->stats("extra0").stale);
  const size_t before = got.batches().size();
  raw.Send(seq, EncodeKvEventBatch(Batch(1), enc));
  ASSERT_TRUE(got.Wait(before + 1));
  EXPECT_EQ(got.batches().back().ts, 1);
  EXPECT_FALSE((*sub)->stats("first").stale);
  (*sub)->Stop();
}

}  // namespace
}  // namespace switchyard::kvx
