#include "kvx/redis_block_store.h"

#include <signal.h>
#include <sys/time.h>

#include <cstring>
#include <utility>

#include "fmt/format.h"
#include <hiredis/hiredis.h>

namespace switchyard::kvx {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000),
          static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// The next reply on `c`; null when the connection failed (c->errstr says why).
Reply NextReply(redisContext* c) {
  void* reply = nullptr;
  if (redisGetReply(c, &reply) != REDIS_OK)
    return nullptr;
  return Reply(static_cast<redisReply*>(reply));
}

absl::Status Lost(redisContext* c) {
  return absl::UnavailableError(fmt::format("KV Redis tier: {}", c->errstr));
}

// hiredis 0.14 sends with write(2), so writing to a connection Redis has reset raises
// SIGPIPE, whose default action ends the process. While one of these lives, the calling
// thread has SIGPIPE blocked, so such a write fails with EPIPE (a lost connection like any
// other); a SIGPIPE it raised is taken off the thread before the mask is restored.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~SigpipeBlock() {
    const timespec no_wait{};
    while (sigtimedwait(&pipe_, nullptr, &no_wait) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t previous_{};
};

}  // namespace

void RedisBlockStore::ContextDeleter::operator()(redisContext* c) const {
  redisFree(c);
}

absl::StatusOr<std::unique_ptr<RedisBlockStore>> RedisBlockStore::Open(
    RedisBlockStoreOptions options, MemoryRegion pool) {
  std::unique_ptr<RedisBlockStore> store(new RedisBlockStore(std::move(options), std::move(pool)));
  const SigpipeBlock sigpipe_block;
  bool pooled = false;
  absl::StatusOr<Context> context = store->Acquire(&pooled);
  if (!context.ok())
    return context.status();
  Reply pong(static_cast<redisReply*>(redisCommand(context->get(), "PING")));
  if (pong == nullptr)
    return Lost(context->get());
  if (pong->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(fmt::format("KV Redis tier: {}:{} answers PING with {}",
                                              store->options_.host, store->options_.port,
                                              std::string(pong->str, pong->len)));
  }
  store->Return(*std::move(context));
  return store;
}

RedisBlockStore::RedisBlockStore(RedisBlockStoreOptions options, MemoryRegion pool)
    : options_(std::move(options)),
      pool_(std::move(pool)),
      threads_(std::make_unique<base::ThreadPool>(static_cast<size_t>(options_.num_threads),
                                                  "sy-kvredis")) {}

RedisBlockStore::~RedisBlockStore() {
  threads_.reset();  // runs what is queued, then joins
}

std::string RedisBlockStore::KeyName(const KvBlockKey& key) const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = options_.key_prefix;
  for (uint8_t b : key) {
    name.push_back(kHex[b >> 4]);
    name.push_back(kHex[b & 15]);
  }
  return name;
}

absl::StatusOr<RedisBlockStore::Context> RedisBlockStore::Acquire(bool* pooled) {
  {
    base::MutexLock lock(&mu_);
    *pooled = !idle_.empty();
    if (*pooled) {
      Context context = std::move(idle_.back());
      idle_.pop_back();
      return context;
    }
  }
  const timeval tv = ToTimeval(options_.timeout);
  Context context(redisConnectWithTimeout(options_.host.c_str(), options_.port, tv));
  if (context == nullptr)
    return absl::ResourceExhaustedError("KV Redis tier: cannot allocate a connection");
  if (context->err != 0) {
    return absl::UnavailableError(fmt::format("KV Redis tier: cannot reach {}:{}: {}",
                                              options_.host, options_.port, context->errstr));
  }
  redisSetTimeout(context.get(), tv);
  return context;
}

void RedisBlockStore::Return(Context context) {
  base::MutexLock lock(&mu_);
  idle_.push_back(std::move(context));
}

void RedisBlockStore::Write(std::vector<Op> ops, Callback done) {
  threads_->Submit(
      [this, ops = std::move(ops), done = std::make_shared<Callback>(std::move(done))] {
        (*done)(RunBatch(ops, [this](redisContext* c, const std::vector<Op>& batch, Loss* loss) {
          return WriteOn(c, batch, loss);
        }));
      });
}

void RedisBlockStore::Read(std::vector<Op> ops, Callback done) {
  threads_->Submit(
      [this, ops = std::move(ops), done = std::make_shared<Callback>(std::move(done))] {
        (*done)(RunBatch(ops, [this](redisContext* c, const std::vector<Op>& batch, Loss* loss) {
          return ReadOn(c, batch, loss);
        }));
      });
}

std::vector<absl::Status> RedisBlockStore::RunBatch(const std::vector<Op>& ops,
                                                    const Batch& batch) {
  const SigpipeBlock sigpipe_block;
  for (int attempt = 0;; ++attempt) {
    bool pooled = false;
    absl::StatusOr<Context> context = Acquire(&pooled);
    if (!context.ok())
      return std::vector<absl::Status>(ops.size(), context.status());
    Loss loss;
    std::vector<absl::Status> results = batch(context->get(), ops, &loss);
    if (!loss.lost) {
      Return(*std::move(context));
      return results;
    }
    // The server closed a pooled connection before answering anything: it restarted or
    // timed it out, and the other idle ones are as stale. Once more on a new connection
    // (SET and GET may be repeated).
    if (!loss.before_any_reply || !pooled || attempt > 0)
      return results;
    base::MutexLock lock(&mu_);
    idle_.clear();
  }
}

std::vector<absl::Status> RedisBlockStore::WriteOn(redisContext* c, const std::vector<Op>& ops,
                                                   Loss* loss) {
  const size_t block_bytes = pool_.layout().block_bytes();
  std::string value(kKvBlockEntryHeaderBytes + block_bytes, '\0');
  for (const Op& op : ops) {
    const KvBlockEntryHeader header =
        MakeKvBlockEntryHeader(op.key, options_.compatibility, pool_, op.block);
    std::memcpy(value.data(), header.data(), header.size());
    size_t offset = header.size();
    for (size_t s = 0; s < pool_.layout().num_segments(); ++s) {
      std::memcpy(value.data() + offset, pool_.addr(op.block, s), pool_.layout().segment_bytes(s));
      offset += pool_.layout().segment_bytes(s);
    }
    const std::string key = KeyName(op.key);
    const char* argv[] = {"SET", key.data(), value.data()};
    const size_t lengths[] = {3, key.size(), value.size()};
    // hiredis copies the command into its output buffer.
    redisAppendCommandArgv(c, 3, argv, lengths);
  }
  std::vector<absl::Status> results;
  for (size_t i = 0; i < ops.size(); ++i) {
    Reply reply = NextReply(c);
    if (reply == nullptr) {
      *loss = {.lost = true, .before_any_reply = i == 0};
      results.resize(ops.size(), Lost(c));
      return results;
    }
    results.push_back(reply->type == REDIS_REPLY_ERROR
                          ? absl::InternalError(fmt::format("KV Redis tier: SET: {}",
                                                            std::string(reply->str, reply->len)))
                          : absl::OkStatus());
  }
  return results;
}

std::vector<absl::Status> RedisBlockStore::ReadOn(redisContext* c, const std::vector<Op>& ops,
                                                  Loss* loss) {
  std::vector<std::string> keys;
  keys.reserve(ops.size());
  for (const Op& op : ops) {
    keys.push_back(KeyName(op.key));
    const char* argv[] = {"GET", keys.back().data()};
    const size_t lengths[] = {3, keys.back().size()};
    redisAppendCommandArgv(c, 2, argv, lengths);
  }
  const size_t block_bytes = pool_.layout().block_bytes();
  std::vector<absl::Status> results;
  absl::Status stop;  // the first failure, which every later op gets too
  for (size_t i = 0; i < ops.size(); ++i) {
    Reply reply = NextReply(c);
    if (reply == nullptr) {
      *loss = {.lost = true, .before_any_reply = i == 0};
      if (stop.ok())
        stop = Lost(c);
      results.resize(ops.size(), stop);
      return results;
    }
    if (!stop.ok()) {
      results.push_back(stop);  // read past only to keep the connection in step
      continue;
    }
    const Op& op = ops[i];
    if (reply->type == REDIS_REPLY_NIL) {
      stop = absl::NotFoundError(fmt::format("KV Redis tier: no {}", keys[i]));
    } else if (reply->type != REDIS_REPLY_STRING ||
               reply->len != kKvBlockEntryHeaderBytes + block_bytes) {
      stop = absl::DataLossError(fmt::format("KV Redis tier: {} is not a whole entry", keys[i]));
    } else {
      KvBlockEntryHeader header{};
      std::memcpy(header.data(), reply->str, header.size());
      size_t offset = header.size();
      for (size_t s = 0; s < pool_.layout().num_segments(); ++s) {
        std::memcpy(pool_.addr(op.block, s), reply->str + offset, pool_.layout().segment_bytes(s));
        offset += pool_.layout().segment_bytes(s);
      }
      stop = CheckKvBlockEntry(header, op.key, options_.compatibility, pool_, op.block, keys[i]);
      if (stop.ok()) {
        results.push_back(absl::OkStatus());
        continue;
      }
    }
    results.push_back(stop);
  }
  return results;
}

}  // namespace switchyard::kvx
