#include "kvx/kv_event_subscriber.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <exception>
#include <optional>
#include <utility>

#include "fmt/format.h"
#include <zmq.hpp>

#include "base/logging.h"
#include "kvx/kv_event_codec.h"
#include <zmq_addon.hpp>

namespace switchyard::kvx {
namespace {

using Clock = std::chrono::steady_clock;

// A replay that has not ended by then is abandoned (the engine went away mid-answer).
constexpr auto kReplayTimeout = std::chrono::seconds(5);
// Live batches held during a replay; beyond this the replay is abandoned.
constexpr size_t kMaxHeld = 100'000;
constexpr uint64_t kEndSeq = ~uint64_t{0};

std::optional<uint64_t> ReadSeq(const zmq::message_t& frame) {
  if (frame.size() != 8)
    return std::nullopt;
  uint64_t v = 0;
  for (uint8_t b : std::span(frame.data<uint8_t>(), 8))
    v = v << 8 | b;
  return v;
}

std::array<uint8_t, 8> BigEndian(uint64_t value) {
  std::array<uint8_t, 8> out;
  for (int i = 7; i >= 0; --i) {
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(value & 0xff);
    value >>= 8;
  }
  return out;
}

struct Held {
  int64_t seq;
  std::string payload;
};

// One source's sockets and stream position. Subscriber thread only.
struct SourceState {
  SourceState(KvEventSource src, zmq::socket_t socket)
      : source(std::move(src)), sub(std::move(socket)) {}

  KvEventSource source;
  zmq::socket_t sub;
  std::optional<zmq::socket_t> dealer;
  int64_t last = -1;
  bool replaying = false;
  Clock::time_point replay_deadline;
  std::deque<Held> held;
  KvEventSourceStats stats;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvEventSubscriber>> KvEventSubscriber::Start(
    KvEventHandler handler) {
  std::unique_ptr<KvEventSubscriber> s(new KvEventSubscriber(std::move(handler)));
  if (s->wake_fd_ < 0)
    return absl::InternalError("KV event subscriber: eventfd failed");
  s->thread_ = std::thread([p = s.get()] {
    pthread_setname_np(pthread_self(), "sy-kv-sub");
    p->Run();
  });
  return s;
}

KvEventSubscriber::KvEventSubscriber(KvEventHandler handler)
    : handler_(std::move(handler)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

KvEventSubscriber::~KvEventSubscriber() {
  Stop();
  if (wake_fd_ >= 0)
    close(wake_fd_);
}

void KvEventSubscriber::Wake() {
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
}

void KvEventSubscriber::AddSource(KvEventSource source) {
  {
    base::MutexLock lock(&mu_);
    commands_.push_back({true, std::move(source)});
  }
  Wake();
}

void KvEventSubscriber::RemoveSource(const std::string& name) {
  {
    base::MutexLock lock(&mu_);
    KvEventSource source;
    source.name = name;
    commands_.push_back({false, std::move(source)});
  }
  Wake();
}

void KvEventSubscriber::Stop() {
  {
    base::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable())
    thread_.join();
}

KvEventSourceStats KvEventSubscriber::stats(const std::string& name) const {
  base::MutexLock lock(&mu_);
  auto it = stats_.find(name);
  return it == stats_.end() ? KvEventSourceStats{} : it->second;
}

void KvEventSubscriber::Run() {
  try {
    zmq::context_t context(1);
    absl::flat_hash_map<std::string, std::unique_ptr<SourceState>> sources;

    auto publish_stats = [this](const SourceState& s) {
      base::MutexLock lock(&mu_);
      stats_[s.source.name] = s.stats;
    };
    auto apply = [&](SourceState& s, int64_t seq, std::string_view payload, bool replayed) {
      absl::StatusOr<KvEventBatch> batch = DecodeKvEventBatch(payload);
      s.last = seq;
      if (!batch.ok()) {
        ++s.stats.decode_errors;
        SY_LOG_WARN("KV events from {}: seq {}: {}", s.source.name, seq,
                    std::string(batch.status().message()));
        return;
      }
      ++s.stats.batches;
      s.stats.replayed += replayed ? 1 : 0;
      s.stats.last_seq = seq;
      // Stats first: whoever the handler wakes sees them current.
      publish_stats(s);
      handler_(s.source.name, *batch);
    };
    auto request_replay = [](SourceState& s, int64_t from) {
      const auto start = BigEndian(static_cast<uint64_t>(from));
      const zmq::const_buffer frames[] = {zmq::const_buffer(), zmq::buffer(start)};
      (void)s.dealer->send(frames[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      (void)s.dealer->send(frames[1], zmq::send_flags::dontwait);
      s.replaying = true;
      s.replay_deadline = Clock::now() + kReplayTimeout;
    };
    auto end_replay = [&](SourceState& s) {
      s.replaying = false;
      while (!s.held.empty()) {
        Held h = std::move(s.held.front());
        s.held.pop_front();
        if (h.seq > s.last)
          apply(s, h.seq, h.payload, false);
      }
    };
    auto on_live = [&](SourceState& s, int64_t seq, std::string payload) {
      if (s.replaying) {
        s.held.push_back({seq, std::move(payload)});
        if (s.held.size() > kMaxHeld)
          end_replay(s);
        return;
      }
      if (s.last >= 0 && seq < s.last) {
        // The engine restarted: what we knew of its cache is gone.
        ++s.stats.restarts;
        publish_stats(s);
        KvEventBatch cleared;
        cleared.events.push_back(AllBlocksCleared{});
        handler_(s.source.name, cleared);
        s.last = -1;
      }
      if (seq <= s.last)
        return;  // a duplicate
      if (seq > s.last + 1) {
        ++s.stats.gaps;
        if (s.dealer.has_value()) {
          s.held.push_back({seq, std::move(payload)});
          request_replay(s, s.last + 1);
          return;
        }
      }
      apply(s, seq, payload, false);
    };

    std::vector<zmq::pollitem_t> items;
    std::vector<std::pair<SourceState*, bool>>
        owners;  // per item after the first: (source, is_dealer)
    bool dirty = true;
    for (;;) {
      if (dirty) {
        items.assign(1, {nullptr, wake_fd_, ZMQ_POLLIN, 0});
        owners.assign(1, {nullptr, false});
        for (auto& [name, s] : sources) {
          items.push_back({s->sub.handle(), 0, ZMQ_POLLIN, 0});
          owners.emplace_back(s.get(), false);
          if (s->dealer.has_value()) {
            items.push_back({s->dealer->handle(), 0, ZMQ_POLLIN, 0});
            owners.emplace_back(s.get(), true);
          }
        }
        dirty = false;
      }
      zmq::poll(items, std::chrono::milliseconds(1000));
      if (items[0].revents & ZMQ_POLLIN) {
        uint64_t count = 0;
        (void)read(wake_fd_, &count, sizeof(count));
      }
      std::deque<Command> commands;
      {
        base::MutexLock lock(&mu_);
        if (stopping_)
          return;
        commands.swap(commands_);
      }
      for (Command& c : commands) {
        sources.erase(c.source.name);
        dirty = true;
        if (!c.add) {
          base::MutexLock lock(&mu_);
          stats_.erase(c.source.name);
          continue;
        }
        auto s =
            std::make_unique<SourceState>(c.source, zmq::socket_t(context, zmq::socket_type::sub));
        s->sub.set(zmq::sockopt::linger, 0);
        s->sub.set(zmq::sockopt::subscribe, c.source.topic);
        try {
          s->sub.connect(c.source.endpoint);
          if (!c.source.replay_endpoint.empty()) {
            s->dealer.emplace(context, zmq::socket_type::dealer);
            s->dealer->set(zmq::sockopt::linger, 0);
            s->dealer->connect(c.source.replay_endpoint);
          }
        } catch (const zmq::error_t& e) {
          SY_LOG_WARN("KV events: cannot connect to {} ({}): {}", c.source.name, c.source.endpoint,
                      e.what());
          continue;
        }
        publish_stats(*s);
        sources[c.source.name] = std::move(s);
      }
      if (dirty)
        continue;  // item pointers changed; poll again

      std::vector<zmq::message_t> frames;
      for (size_t i = 1; i < items.size(); ++i) {
        if (!(items[i].revents & ZMQ_POLLIN))
          continue;
        auto [s, is_dealer] = owners[i];
        zmq::socket_t& socket = is_dealer ? *s->dealer : s->sub;
        for (;;) {
          frames.clear();
          if (!zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait))
            break;
          if (!is_dealer) {
            // [topic, seq, payload]
            std::optional<uint64_t> seq = frames.size() == 3 ? ReadSeq(frames[1]) : std::nullopt;
            if (!seq.has_value() || *seq > static_cast<uint64_t>(INT64_MAX)) {
              ++s->stats.decode_errors;
              continue;
            }
            on_live(*s, static_cast<int64_t>(*seq), frames[2].to_string());
          } else {
            // ["", seq, payload]; seq = END_SEQ closes the replay.
            std::optional<uint64_t> seq = frames.size() == 3 ? ReadSeq(frames[1]) : std::nullopt;
            if (!seq.has_value()) {
              ++s->stats.decode_errors;
              continue;
            }
            if (*seq == kEndSeq || *seq > static_cast<uint64_t>(INT64_MAX)) {
              end_replay(*s);
            } else if (static_cast<int64_t>(*seq) > s->last) {
              apply(*s, static_cast<int64_t>(*seq), frames[2].to_string_view(), true);
            }
          }
        }
        publish_stats(*s);
      }
      for (auto& [name, s] : sources) {
        if (s->replaying && Clock::now() > s->replay_deadline) {
          SY_LOG_WARN("KV events: replay from {} timed out", name);
          end_replay(*s);
          publish_stats(*s);
        }
      }
    }
  } catch (const std::exception& e) {
    SY_LOG_ERROR("KV event subscriber stopped: {}", e.what());
  }
}

}  // namespace switchyard::kvx
