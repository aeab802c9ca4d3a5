#include "kvx/kv_event_publisher.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include <zmq.hpp>

#include "kv_event_wire_support.h"
#include "kvx/kv_event_codec.h"
#include <zmq_addon.hpp>

namespace switchyard::kvx {
namespace {

constexpr char kTopic[] = "kv@127.0.0.1:8000@tiny";

KvEventBatch Batch(double ts) {
  BlockStored stored;
  stored.block_hashes = {EventHash::FromInt(static_cast<uint64_t>(ts + 1000))};
  stored.token_ids = {1, 2, 3, 4};
  stored.block_size = 4;
  stored.medium = kMediumGpu;
  return {ts, {stored, AllBlocksCleared{}}, 0};
}

// A SUB socket connected to `endpoint`. PUB/SUB drops what is sent before the subscription
// reaches the publisher, so this publishes probe batches until one arrives, and returns the
// sequence number the next published batch will carry.
uint64_t Subscribe(zmq::socket_t& sub, KvEventPublisher& pub, const std::string& endpoint) {
  sub.set(zmq::sockopt::subscribe, kTopic);
  sub.set(zmq::sockopt::rcvtimeo, 50);
  sub.connect(endpoint);
  for (int attempt = 0; attempt < 200; ++attempt) {
    EXPECT_TRUE(pub.Publish(Batch(-1)));
    std::vector<zmq::message_t> frames;
    if (zmq::recv_multipart(sub, std::back_inserter(frames)).has_value()) {
      // Drain probes still in flight so the caller starts at a clean boundary.
      uint64_t last = SeqFromFrame(frames[1]);
      sub.set(zmq::sockopt::rcvtimeo, 200);
      while (last + 1 < static_cast<uint64_t>(attempt + 1)) {
        frames.clear();
        if (!zmq::recv_multipart(sub, std::back_inserter(frames)).has_value())
          break;
        last = SeqFromFrame(frames[1]);
      }
      sub.set(zmq::sockopt::rcvtimeo, 5000);
      return static_cast<uint64_t>(attempt + 1);
    }
  }
  ADD_FAILURE() << "no probe batch arrived";
  return 0;
}

void ExpectBatches(zmq::socket_t& sub, uint64_t first_seq, int count,
                   const KvEventEncoding& encoding) {
  for (int i = 0; i < count; ++i) {
    std::vector<zmq::message_t> frames;
    ASSERT_TRUE(zmq::recv_multipart(sub, std::back_inserter(frames)).has_value()) << i;
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].to_string(), kTopic);
    EXPECT_EQ(SeqFromFrame(frames[1]), first_seq + i);
    EXPECT_EQ(frames[2].to_string(), EncodeKvEventBatch(Batch(i), encoding));
    auto decoded = DecodeKvEventBatch(frames[2].to_string_view());
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, Batch(i));
  }
}

TEST(KvEventPublisherTest, PublishesThreeFrameMessagesInSequence) {
  KvEventPublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.topic = kTopic;
  options.encoding.layout = EventLayout::kArray;
  auto pub = KvEventPublisher::Start(options);
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_TRUE((*pub)->endpoint().starts_with("tcp://127.0.0.1:"));
  EXPECT_TRUE((*pub)->replay_endpoint().empty());

  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  const uint64_t first = Subscribe(sub, **pub, (*pub)->endpoint());
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE((*pub)->Publish(Batch(i)));
  ExpectBatches(sub, first, 20, options.encoding);
  (*pub)->Stop();
  EXPECT_FALSE((*pub)->Publish(Batch(0)));
  EXPECT_EQ((*pub)->num_dropped(), 1);
}

TEST(KvEventPublisherTest, PublishesOverIpc) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("sy_kv_events_" + std::to_string(getpid()) + ".sock"))
                               .string();
  KvEventPublisherOptions options;
  options.endpoint = "ipc://" + path;
  options.topic = kTopic;
  auto pub = KvEventPublisher::Start(options);
  ASSERT_TRUE(pub.ok()) << pub.status();
  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  const uint64_t first = Subscribe(sub, **pub, options.endpoint);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE((*pub)->Publish(Batch(i)));
  ExpectBatches(sub, first, 3, options.encoding);
  pub->reset();
  std::filesystem::remove(path);
}

TEST(KvEventPublisherTest, ReplaysBufferedBatchesThenEndMarker) {
  KvEventPublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.replay_endpoint = "tcp://127.0.0.1:*";
  options.topic = kTopic;
  options.buffer_steps = 5;
  auto pub = KvEventPublisher::Start(options);
  ASSERT_TRUE(pub.ok()) << pub.status();
  ASSERT_TRUE((*pub)->replay_endpoint().starts_with("tcp://127.0.0.1:"));
  // The SUB confirms the batches went out before the replay is asked for.
  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  const uint64_t first = Subscribe(sub, **pub, (*pub)->endpoint());
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE((*pub)->Publish(Batch(i)));
  ExpectBatches(sub, first, 8, options.encoding);
  const uint64_t last = first + 7;

  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect((*pub)->replay_endpoint());
  // Only the last buffer_steps batches are kept.
  auto replayed = RequestReplay(dealer, 0);
  ASSERT_EQ(replayed.size(), 5u);
  for (size_t i = 0; i < replayed.size(); ++i) {
    EXPECT_EQ(replayed[i].first, last - 4 + i);
    EXPECT_EQ(replayed[i].second, EncodeKvEventBatch(Batch(3 + static_cast<double>(i)), {}));
  }
  replayed = RequestReplay(dealer, last - 1);
  ASSERT_EQ(replayed.size(), 2u);
  EXPECT_EQ(replayed[0].first, last - 1);
  EXPECT_TRUE(RequestReplay(dealer, last + 1).empty());
}

TEST(KvEventPublisherTest, ReportsBindFailures) {
  KvEventPublisherOptions options;
  options.endpoint = "tcp://256.0.0.1:*";
  auto pub = KvEventPublisher::Start(options);
  ASSERT_FALSE(pub.ok());
  EXPECT_NE(std::string(pub.status().message()).find("cannot bind PUB socket"), std::string::npos)
      << pub.status();

  options.endpoint = "tcp://127.0.0.1:*";
  options.replay_endpoint = "bogus://x";
  pub = KvEventPublisher::Start(options);
  ASSERT_FALSE(pub.ok());
  EXPECT_NE(std::string(pub.status().message()).find("replay ROUTER"), std::string::npos)
      << pub.status();
}

TEST(KvEventPublisherTest, DropsWhenTheQueueIsFull) {
  KvEventPublisherOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.max_queue_size = 1;
  auto pub = KvEventPublisher::Start(options);
  ASSERT_TRUE(pub.ok()) << pub.status();
  // The thread may or may not have taken the first batch yet; Publish never blocks either way.
  int accepted = 0;
  for (int i = 0; i < 1000; ++i)
    accepted += (*pub)->Publish(Batch(i)) ? 1 : 0;
  EXPECT_EQ(accepted + (*pub)->num_dropped(), 1000);
  EXPECT_GE(accepted, 1);
}

}  // namespace
}  // namespace switchyard::kvx
