#include "kvx/kv_event_subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <span>
#include <utility>

#include "fmt/format.h"
#include <zmq.hpp>

#include "base/logging.h"
#include "base/thread_name.h"
#include "kvx/kv_event_codec.h"
#include "kvx/kv_event_seq.h"
#include <zmq_addon.hpp>

namespace switchyard::kvx {
namespace {

using Clock = std::chrono::steady_clock;

// A replay that has not ended by then is abandoned (the engine went away mid-answer).
constexpr auto kReplayTimeout = std::chrono::seconds(5);
// Live batches held during a replay; beyond this the replay is abandoned.
constexpr size_t kMaxHeld = 100'000;

std::optional<uint64_t> ReadSeq(const zmq::message_t& frame) {
  return DecodeKvEventSeq(std::span(frame.data<uint8_t>(), frame.size()));
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
  // The handler got batches since the last AllBlocksCleared it was given for this source.
  bool handed_out = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvEventSubscriber>> KvEventSubscriber::Start(
    KvEventHandler handler) {
  std::unique_ptr<KvEventSubscriber> s(new KvEventSubscriber(std::move(handler)));
  if (s->wake_fd_ < 0)
    return absl::InternalError("KV event subscriber: eventfd failed");
  s->thread_ = std::thread([p = s.get()] {
    base::SetCurrentThreadName("sy-kv-sub");
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

void KvEventSubscriber::Wake() const {
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
}

void KvEventSubscriber::AddSource(KvEventSource source) {
  {
    base::MutexLock lock(&mu_);
    sources_[source.name] = source;
    commands_.push_back({true, std::move(source)});
  }
  Wake();
}

void KvEventSubscriber::RemoveSource(const std::string& name) {
  {
    base::MutexLock lock(&mu_);
    sources_.erase(name);
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

int64_t KvEventSubscriber::restarts() const {
  base::MutexLock lock(&mu_);
  return restarts_;
}

bool KvEventSubscriber::WaitForStop(std::chrono::milliseconds timeout) {
  pollfd fd{wake_fd_, POLLIN, 0};
  if (::poll(&fd, 1, static_cast<int>(timeout.count())) > 0) {
    uint64_t count = 0;
    (void)read(wake_fd_, &count, sizeof(count));
  }
  base::MutexLock lock(&mu_);
  return stopping_;
}

void KvEventSubscriber::Run() {
  std::chrono::milliseconds backoff = kMinBackoff;
  for (;;) {
    const Clock::time_point started = Clock::now();
    const absl::Status status = RunLoop();
    if (status.ok())
      return;
    std::vector<std::string> names;
    {
      base::MutexLock lock(&mu_);
      ++restarts_;
      for (auto& [name, stats] : stats_) {
        if (!stats.stale)
          ++stats.losses;
        stats.stale = true;
        stats.stale_reason =
            fmt::format("subscriber restarting: {}", std::string(status.message()));
        names.push_back(name);
      }
    }
    // A loop that ran a while before it failed starts over from the shortest wait.
    if (Clock::now() - started > 10 * kMaxBackoff)
      backoff = kMinBackoff;
    SY_LOG_ERROR("KV event subscriber failed ({}); restarting in {} ms",
                 std::string(status.message()), backoff.count());
    // What the handler was told may be out of date by the time the loop is back.
    for (const std::string& name : names) {
      KvEventBatch cleared;
      cleared.events.emplace_back(AllBlocksCleared{});
      try {
        handler_(name, cleared);
      } catch (const std::exception& e) {
        SY_LOG_ERROR("KV events: clearing {} failed: {}", name, e.what());
      }
    }
    if (WaitForStop(backoff))
      return;
    backoff = std::min(2 * backoff, kMaxBackoff);
  }
}

absl::Status KvEventSubscriber::RunLoop() {
  try {
    zmq::context_t context(1);
    absl::flat_hash_map<std::string, std::unique_ptr<SourceState>> sources;
    // Sources whose sockets could not be made: when to try again, and the next wait.
    struct Retry {
      Clock::time_point at;
      std::chrono::milliseconds backoff{};
    };
    absl::flat_hash_map<std::string, Retry> retries;

    auto publish_stats = [this](const SourceState& s) {
      base::MutexLock lock(&mu_);
      stats_[s.source.name] = s.stats;
    };
    auto clear = [&](SourceState& s) {
      KvEventBatch cleared;
      cleared.events.emplace_back(AllBlocksCleared{});
      s.handed_out = false;
      handler_(s.source.name, cleared);
    };
    // Events were lost for good: forget what the handler built from the source, and wait
    // for an in-order restart (from seq 0) before it is fresh again.
    auto go_stale = [&](SourceState& s, std::string reason) {
      if (!s.stats.stale) {
        SY_LOG_WARN("KV events from {} are stale: {}", s.source.name, reason);
        ++s.stats.losses;
      }
      s.stats.stale = true;
      s.stats.stale_reason = std::move(reason);
      s.last = -1;
      publish_stats(s);
      if (s.handed_out)
        clear(s);
    };
    auto fresh = [](SourceState& s) {
      s.stats.stale = false;
      s.stats.stale_reason.clear();
    };
    auto apply = [&](SourceState& s, int64_t seq, std::string_view payload, bool replayed) {
      absl::StatusOr<KvEventBatch> batch = DecodeKvEventBatch(payload);
      if (!batch.ok()) {
        ++s.stats.decode_errors;
        go_stale(s,
                 fmt::format("seq {} undecodable: {}", seq, std::string(batch.status().message())));
        s.last = seq;
        return;
      }
      s.last = seq;
      ++s.stats.batches;
      s.stats.replayed += replayed ? 1 : 0;
      s.stats.last_seq = seq;
      if (!s.replaying)
        fresh(s);
      // Stats first: whoever the handler wakes sees them current.
      publish_stats(s);
      s.handed_out = true;
      handler_(s.source.name, *batch);
    };
    auto request_replay = [](SourceState& s, int64_t from) {
      const auto start = EncodeKvEventSeq(static_cast<uint64_t>(from));
      const zmq::const_buffer frames[] = {zmq::const_buffer(), zmq::buffer(start)};
      (void)s.dealer->send(frames[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      (void)s.dealer->send(frames[1], zmq::send_flags::dontwait);
      s.replaying = true;
      s.replay_deadline = Clock::now() + kReplayTimeout;
    };
    auto end_replay = [&](SourceState& s) {
      s.replaying = false;
      fresh(s);
      while (!s.held.empty()) {
        Held h = std::move(s.held.front());
        s.held.pop_front();
        if (h.seq > s.last)
          apply(s, h.seq, h.payload, false);
      }
    };
    // A replay that cannot finish: what it was to fill in is lost; start over from seq 0.
    auto abandon_replay = [&](SourceState& s, std::string reason) {
      s.replaying = false;
      s.held.clear();
      go_stale(s, std::move(reason));
      request_replay(s, 0);
    };
    auto on_live = [&](SourceState& s, int64_t seq, std::string payload) {
      if (s.replaying) {
        s.held.push_back({seq, std::move(payload)});
        if (s.held.size() > kMaxHeld)
          abandon_replay(s, "too many live batches held during a replay");
        return;
      }
      if (s.last >= 0 && seq < s.last) {
        // The engine restarted: what we knew of its cache is gone.
        ++s.stats.restarts;
        publish_stats(s);
        clear(s);
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
        if (s.last >= 0)
          go_stale(s, fmt::format("seq {} to {} lost (no replay endpoint)", s.last + 1, seq - 1));
      }
      apply(s, seq, payload, false);
    };
    // Makes a source's sockets; false (the source stale, retried later) when they cannot
    // be made.
    auto make_source = [&](const KvEventSource& source, bool resync) {
      auto s = std::make_unique<SourceState>(source, zmq::socket_t());
      {
        base::MutexLock lock(&mu_);
        auto it = stats_.find(source.name);
        if (it != stats_.end() && it->second.stale)
          s->stats = it->second;  // keeps its counts and its staleness
      }
      try {
        s->sub = zmq::socket_t(context, zmq::socket_type::sub);
        s->sub.set(zmq::sockopt::linger, 0);
        s->sub.set(zmq::sockopt::subscribe, source.topic);
        s->sub.connect(source.endpoint);
        if (!source.replay_endpoint.empty()) {
          s->dealer.emplace(context, zmq::socket_type::dealer);
          s->dealer->set(zmq::sockopt::linger, 0);
          s->dealer->connect(source.replay_endpoint);
        }
      } catch (const zmq::error_t& e) {
        s->stats.stale_reason =
            fmt::format("cannot subscribe to {}: {}", source.endpoint, e.what());
        if (!s->stats.stale) {  // said once, not at every retry
          ++s->stats.losses;
          SY_LOG_WARN("KV events: {}: {}", source.name, s->stats.stale_reason);
        }
        s->stats.stale = true;
        publish_stats(*s);
        return false;
      }
      // Back after a failure: rebuild from the engine's replay buffer right away.
      if ((resync || s->stats.stale) && s->dealer.has_value())
        request_replay(*s, 0);
      publish_stats(*s);
      sources[source.name] = std::move(s);
      return true;
    };

    {
      // A restarted loop makes every source again; their stats say stale until resynced.
      base::MutexLock lock(&mu_);
      commands_.clear();
      for (const auto& [name, source] : sources_)
        commands_.push_back({true, source});
    }

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
      auto timeout = std::chrono::milliseconds(1000);
      for (const auto& [name, r] : retries) {
        timeout = std::min(timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::max(r.at - Clock::now(), Clock::duration::zero())));
      }
      zmq::poll(items, timeout);
      if (items[0].revents & ZMQ_POLLIN) {
        uint64_t count = 0;
        (void)read(wake_fd_, &count, sizeof(count));
      }
      std::deque<Command> commands;
      {
        base::MutexLock lock(&mu_);
        if (stopping_)
          return absl::OkStatus();
        commands.swap(commands_);
      }
      for (Command& c : commands) {
        sources.erase(c.source.name);
        retries.erase(c.source.name);
        dirty = true;
        if (!c.add) {
          base::MutexLock lock(&mu_);
          stats_.erase(c.source.name);
          continue;
        }
        if (!make_source(c.source, false))
          retries[c.source.name] = {Clock::now() + kMinBackoff, kMinBackoff};
      }
      for (auto it = retries.begin(); it != retries.end();) {
        auto next = std::next(it);
        if (Clock::now() >= it->second.at) {
          std::optional<KvEventSource> source;
          {
            base::MutexLock lock(&mu_);
            auto found = sources_.find(it->first);
            if (found != sources_.end())
              source = found->second;
          }
          if (source.has_value() && !make_source(*source, true)) {
            it->second.backoff = std::min(2 * it->second.backoff, kMaxBackoff);
            it->second.at = Clock::now() + it->second.backoff;
          } else {
            dirty = dirty || source.has_value();
            retries.erase(it);
          }
        }
        it = next;
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
            // ["", seq, payload]; seq = END_SEQ (all ones) closes the replay, as any seq past
            // int64 does.
            std::optional<uint64_t> seq = frames.size() == 3 ? ReadSeq(frames[1]) : std::nullopt;
            if (!seq.has_value()) {
              ++s->stats.decode_errors;
              continue;
            }
            if (*seq > static_cast<uint64_t>(INT64_MAX)) {
              end_replay(*s);
            } else if (static_cast<int64_t>(*seq) > s->last) {
              apply(*s, static_cast<int64_t>(*seq), frames[2].to_string_view(), true);
            }
          }
        }
        publish_stats(*s);
      }
      for (auto& [name, s] : sources) {
        if (s->replaying && Clock::now() > s->replay_deadline)
          abandon_replay(*s, "replay timed out");
      }
    }
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

}  // namespace switchyard::kvx
