// KvEventPublisher: vLLM's ZmqEventPublisher (vllm/distributed/kv_events.py). Each published
// batch goes out on a ZeroMQ PUB socket as three frames
//
//   [topic, sequence number (8 bytes big-endian, from 0), msgpack batch (kv_event_codec.h)]
//
// and, when a replay endpoint is set, the last `buffer_steps` of them are kept for a ROUTER
// socket that answers a request [start seq (8 bytes BE)] (from a REQ, or a DEALER sending an
// empty delimiter first) with [ "", seq, payload ] for every kept batch with seq >= start,
// then [ "", 0xff * 8 (vLLM's END_SEQ, -1), "" ].
//
// Threading: one owned thread, named `thread_name`, creates the ZeroMQ context and both
// sockets, encodes, sends and serves replays; nothing else touches them. Publish() and
// Stop() may be called from any thread: Publish() only queues the batch and wakes the thread
// through an eventfd, so the engine loop never blocks on the network.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "base/mutex.h"
#include "kvx/kv_event_codec.h"
#include "kvx/kv_events.h"

namespace switchyard::kvx {

// Defaults are vLLM's KVEventsConfig.
struct KvEventPublisherOptions {
  // Bound when it contains "*" or "::" or is ipc:// or inproc://, connected to otherwise
  // (vLLM's rule). "tcp://127.0.0.1:*" binds a free port; endpoint() reports it.
  std::string endpoint = "tcp://*:5557";
  // Empty: no replay socket. Always bound.
  std::string replay_endpoint;
  std::string topic;
  KvEventEncoding encoding;
  int32_t buffer_steps = 10'000;     // batches kept for replay
  int32_t hwm = 100'000;             // PUB send high-water mark, in messages
  int32_t max_queue_size = 100'000;  // batches waiting for the thread; more are dropped
  std::string thread_name = "kv-events";
};

class KvEventPublisher {
 public:
  // Starts the thread and binds (or connects) the sockets; fails if that fails.
  // REQUIRES: buffer_steps >= 0, hwm >= 0, max_queue_size > 0.
  static absl::StatusOr<std::unique_ptr<KvEventPublisher>> Start(KvEventPublisherOptions options);

  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;
  ~KvEventPublisher();

  // Queues `batch` for sending under the next sequence number. Never blocks. Returns false,
  // dropping the batch, when the queue is full or the publisher is stopped.
  bool Publish(KvEventBatch batch);

  // Sends everything queued before the call, closes the sockets and joins the thread. May
  // wait up to a second for slow subscribers to take what was sent. Idempotent.
  void Stop();

  // The endpoints as ZeroMQ resolved them (wildcard ports filled in).
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }
  // Batches dropped by Publish.
  int64_t num_dropped() const;

 private:
  explicit KvEventPublisher(KvEventPublisherOptions options);

  // The thread's body: sets up the sockets, reports through started_/start_status_, then
  // serves until stopped.
  void Run();

  const KvEventPublisherOptions options_;
  int wake_fd_ = -1;  // eventfd: Publish and Stop -> thread
  std::thread thread_;
  // Written by the thread before it reports started_, read-only afterwards.
  std::string endpoint_;
  std::string replay_endpoint_;

  mutable base::Mutex mu_;
  base::CondVar started_cv_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status start_status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<KvEventBatch> queue_ ABSL_GUARDED_BY(mu_);
  int64_t num_dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace switchyard::kvx
