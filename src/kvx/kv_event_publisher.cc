#include "kvx/kv_event_publisher.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <exception>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include <zmq.hpp>

#include "base/logging.h"
#include "base/thread_name.h"
#include "kvx/kv_event_seq.h"
#include <zmq_addon.hpp>

namespace switchyard::kvx {
namespace {

// How long closing sockets may wait to flush queued messages.
constexpr int kLingerMs = 1000;

bool ShouldBind(std::string_view endpoint) {
  return endpoint.find('*') != std::string_view::npos ||
         endpoint.find("::") != std::string_view::npos || endpoint.starts_with("ipc://") ||
         endpoint.starts_with("inproc://");
}

// Sends all frames as one message without blocking; false if ZeroMQ would have blocked.
bool SendFrames(zmq::socket_t& socket, std::span<const zmq::const_buffer> frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore | zmq::send_flags::dontwait
                                             : zmq::send_flags::dontwait;
    if (!socket.send(frames[i], flags).has_value())
      return false;
  }
  return true;
}

struct Buffered {
  uint64_t seq;
  std::string payload;
};

// Answers every pending replay request on `replay` from `buffer`.
void ServeReplays(zmq::socket_t& replay, const std::deque<Buffered>& buffer) {
  std::vector<zmq::message_t> request;
  while (true) {
    request.clear();
    if (!zmq::recv_multipart(replay, std::back_inserter(request), zmq::recv_flags::dontwait))
      return;
    // [client identity, empty delimiter, start seq]
    if (request.size() != 3 || !request[1].empty() || request[2].size() != 8) {
      SY_LOG_WARN("KV events replay: ignoring a malformed request ({} frames)", request.size());
      continue;
    }
    uint64_t start = 0;
    for (uint8_t b : std::span(request[2].data<uint8_t>(), 8))
      start = start << 8 | b;
    const zmq::const_buffer client = zmq::buffer(request[0].data(), request[0].size());
    for (const Buffered& b : buffer) {
      if (b.seq < start)
        continue;
      const auto seq = EncodeKvEventSeq(b.seq);
      const zmq::const_buffer frames[] = {client, zmq::const_buffer(), zmq::buffer(seq),
                                          zmq::buffer(b.payload)};
      if (!SendFrames(replay, frames)) {
        SY_LOG_WARN("KV events replay: client not reading; replay cut short");
        break;
      }
    }
    const zmq::const_buffer end[] = {client, zmq::const_buffer(), zmq::buffer(kKvEventEndSeq),
                                     zmq::const_buffer()};
    SendFrames(replay, end);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvEventPublisher>> KvEventPublisher::Start(
    KvEventPublisherOptions options) {
  std::unique_ptr<KvEventPublisher> publisher(new KvEventPublisher(std::move(options)));
  if (publisher->wake_fd_ < 0)
    return absl::InternalError("KV events: eventfd failed");
  publisher->thread_ = std::thread([p = publisher.get()] { p->Run(); });
  base::SetThreadName(publisher->thread_, publisher->options_.thread_name);
  absl::Status status;
  {
    base::MutexLock lock(&publisher->mu_);
    publisher->started_cv_.Wait(
        &publisher->mu_,
        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(publisher->mu_) { return publisher->started_; });
    status = publisher->start_status_;
  }
  if (!status.ok()) {
    publisher->Stop();
    return status;
  }
  return publisher;
}

KvEventPublisher::KvEventPublisher(KvEventPublisherOptions options)
    : options_(std::move(options)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

KvEventPublisher::~KvEventPublisher() {
  Stop();
  if (wake_fd_ >= 0)
    close(wake_fd_);
}

bool KvEventPublisher::Publish(KvEventBatch batch) {
  {
    base::MutexLock lock(&mu_);
    if (stopping_ || queue_.size() >= static_cast<size_t>(options_.max_queue_size)) {
      ++num_dropped_;
      return false;
    }
    queue_.push_back(std::move(batch));
  }
  const uint64_t one = 1;
  // Can only fail when the counter would overflow, and then the thread is awake anyway.
  (void)write(wake_fd_, &one, sizeof(one));
  return true;
}

void KvEventPublisher::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable())
    thread_.join();
}

int64_t KvEventPublisher::num_dropped() const {
  base::MutexLock lock(&mu_);
  return num_dropped_;
}

void KvEventPublisher::Run() {
  auto report = [this](absl::Status status) {
    base::MutexLock lock(&mu_);
    started_ = true;
    start_status_ = std::move(status);
    started_cv_.NotifyAll();
  };
  bool reported = false;
  try {
    zmq::context_t context(1);
    zmq::socket_t pub(context, zmq::socket_type::pub);
    pub.set(zmq::sockopt::sndhwm, options_.hwm);
    pub.set(zmq::sockopt::linger, kLingerMs);
    std::string stage = "bind";
    try {
      if (ShouldBind(options_.endpoint)) {
        pub.bind(options_.endpoint);
      } else {
        stage = "connect";
        pub.connect(options_.endpoint);
      }
    } catch (const zmq::error_t& e) {
      report(absl::InvalidArgumentError(fmt::format("KV events: cannot {} PUB socket to \"{}\": {}",
                                                    stage, options_.endpoint, e.what())));
      return;
    }
    endpoint_ = pub.get(zmq::sockopt::last_endpoint);
    std::optional<zmq::socket_t> replay;
    if (!options_.replay_endpoint.empty()) {
      replay.emplace(context, zmq::socket_type::router);
      replay->set(zmq::sockopt::linger, 0);
      try {
        replay->bind(options_.replay_endpoint);
      } catch (const zmq::error_t& e) {
        report(absl::InvalidArgumentError(
            fmt::format("KV events: cannot bind replay ROUTER socket to \"{}\": {}",
                        options_.replay_endpoint, e.what())));
        return;
      }
      replay_endpoint_ = replay->get(zmq::sockopt::last_endpoint);
    }
    report(absl::OkStatus());
    reported = true;

    std::deque<Buffered> buffer;
    std::deque<KvEventBatch> batches;
    uint64_t next_seq = 0;
    std::vector<zmq::pollitem_t> items = {{nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    if (replay.has_value())
      items.push_back({replay->handle(), 0, ZMQ_POLLIN, 0});
    bool stopping = false;
    while (!stopping) {
      zmq::poll(items, std::chrono::milliseconds(-1));
      if (items[0].revents & ZMQ_POLLIN) {
        uint64_t count = 0;
        (void)read(wake_fd_, &count, sizeof(count));
      }
      {
        base::MutexLock lock(&mu_);
        batches.swap(queue_);
        stopping = stopping_;
      }
      for (const KvEventBatch& batch : batches) {
        std::string payload = EncodeKvEventBatch(batch, options_.encoding);
        const auto seq = EncodeKvEventSeq(next_seq);
        const zmq::const_buffer frames[] = {zmq::buffer(options_.topic), zmq::buffer(seq),
                                            zmq::buffer(payload)};
        // A PUB socket drops rather than blocks at its high-water mark, as in vLLM.
        SendFrames(pub, frames);
        if (replay.has_value() && options_.buffer_steps > 0) {
          if (buffer.size() == static_cast<size_t>(options_.buffer_steps))
            buffer.pop_front();
          buffer.push_back({next_seq, std::move(payload)});
        }
        ++next_seq;
      }
      batches.clear();
      if (replay.has_value() && (items[1].revents & ZMQ_POLLIN))
        ServeReplays(*replay, buffer);
    }
  } catch (const std::exception& e) {
    // ZeroMQ failed under us (e.g. out of file descriptors); events stop, the engine goes on.
    SY_LOG_ERROR("KV events publisher stopped: {}", e.what());
    if (!reported)
      report(absl::InternalError(fmt::format("KV events: {}", e.what())));
    base::MutexLock lock(&mu_);
    stopping_ = true;
    queue_.clear();
  }
}

}  // namespace switchyard::kvx
