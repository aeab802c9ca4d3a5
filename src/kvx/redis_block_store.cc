#include "kvx/redis_block_store.h"

#include <cstring>
#include <utility>

#include "fmt/format.h"
#include <hiredis/hiredis.h>

namespace switchyard::kvx {
namespace {

constexpr std::string_view kWho = "KV Redis tier";

}  // namespace

absl::StatusOr<std::unique_ptr<RedisBlockStore>> RedisBlockStore::Open(
    RedisBlockStoreOptions options, MemoryRegion pool) {
  std::unique_ptr<RedisBlockStore> store(new RedisBlockStore(std::move(options), std::move(pool)));
  const SigpipeBlock sigpipe_block;
  bool pooled = false;
  absl::StatusOr<RedisConnection> connection = store->Acquire(&pooled);
  if (!connection.ok())
    return connection.status();
  const std::string_view ping[] = {"PING"};
  absl::StatusOr<RedisReply> pong = connection->Command(ping);
  if (!pong.ok())
    return pong.status();
  if ((*pong)->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(fmt::format("{}: {}:{} answers PING with {}", kWho,
                                              store->options_.host, store->options_.port,
                                              ReplyText(**pong)));
  }
  store->Return(*std::move(connection));
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

absl::StatusOr<RedisConnection> RedisBlockStore::Acquire(bool* pooled) {
  {
    base::MutexLock lock(&mu_);
    *pooled = !idle_.empty();
    if (*pooled) {
      RedisConnection connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  return RedisConnection::Connect(options_.host, options_.port, options_.timeout,
                                  std::string(kWho));
}

void RedisBlockStore::Return(RedisConnection connection) {
  base::MutexLock lock(&mu_);
  idle_.push_back(std::move(connection));
}

void RedisBlockStore::Write(std::vector<Op> ops, Callback done) {
  threads_->Submit(
      [this, ops = std::move(ops), done = std::make_shared<Callback>(std::move(done))] {
        (*done)(RunBatch(ops, [this](RedisConnection& c, const std::vector<Op>& batch, Loss* loss) {
          return WriteOn(c, batch, loss);
        }));
      });
}

void RedisBlockStore::Read(std::vector<Op> ops, Callback done) {
  threads_->Submit(
      [this, ops = std::move(ops), done = std::make_shared<Callback>(std::move(done))] {
        (*done)(RunBatch(ops, [this](RedisConnection& c, const std::vector<Op>& batch, Loss* loss) {
          return ReadOn(c, batch, loss);
        }));
      });
}

std::vector<absl::Status> RedisBlockStore::RunBatch(const std::vector<Op>& ops,
                                                    const Batch& batch) {
  const SigpipeBlock sigpipe_block;
  for (int attempt = 0;; ++attempt) {
    bool pooled = false;
    absl::StatusOr<RedisConnection> connection = Acquire(&pooled);
    if (!connection.ok())
      return std::vector<absl::Status>(ops.size(), connection.status());
    Loss loss;
    std::vector<absl::Status> results = batch(*connection, ops, &loss);
    if (!loss.lost) {
      Return(*std::move(connection));
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

std::vector<absl::Status> RedisBlockStore::WriteOn(RedisConnection& c, const std::vector<Op>& ops,
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
    const std::string_view argv[] = {"SET", key, value};
    c.Append(argv);  // copied into the output buffer
  }
  std::vector<absl::Status> results;
  for (size_t i = 0; i < ops.size(); ++i) {
    RedisReply reply = c.NextReply();
    if (reply == nullptr) {
      *loss = {.lost = true, .before_any_reply = i == 0};
      results.resize(ops.size(), c.Lost());
      return results;
    }
    results.push_back(reply->type == REDIS_REPLY_ERROR
                          ? absl::InternalError(fmt::format("{}: SET: {}", kWho, ReplyText(*reply)))
                          : absl::OkStatus());
  }
  return results;
}

std::vector<absl::Status> RedisBlockStore::ReadOn(RedisConnection& c, const std::vector<Op>& ops,
                                                  Loss* loss) {
  std::vector<std::string> keys;
  keys.reserve(ops.size());
  for (const Op& op : ops) {
    keys.push_back(KeyName(op.key));
    const std::string_view argv[] = {"GET", keys.back()};
    c.Append(argv);
  }
  const size_t block_bytes = pool_.layout().block_bytes();
  std::vector<absl::Status> results;
  absl::Status stop;  // the first failure, which every later op gets too
  for (size_t i = 0; i < ops.size(); ++i) {
    RedisReply reply = c.NextReply();
    if (reply == nullptr) {
      *loss = {.lost = true, .before_any_reply = i == 0};
      if (stop.ok())
        stop = c.Lost();
      results.resize(ops.size(), stop);
      return results;
    }
    if (!stop.ok()) {
      results.push_back(stop);  // read past only to keep the connection in step
      continue;
    }
    const Op& op = ops[i];
    if (reply->type == REDIS_REPLY_NIL) {
      stop = absl::NotFoundError(fmt::format("{}: no {}", kWho, keys[i]));
    } else if (reply->type != REDIS_REPLY_STRING ||
               reply->len != kKvBlockEntryHeaderBytes + block_bytes) {
      stop = absl::DataLossError(fmt::format("{}: {} is not a whole entry", kWho, keys[i]));
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
