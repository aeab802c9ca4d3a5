// RedisConnection: one blocking hiredis connection, with a timeout on connecting and on each
// reply, for code that talks to Redis from threads of its own (the KV tier's store threads,
// the router's shared-state thread). Commands are argument vectors of bytes (binary safe);
// they may be pipelined (Append several, then read their replies in order). A connection
// whose read or write failed is dead: drop it and connect again.
//
// SIGPIPE: hiredis 0.14 writes with write(2), so writing to a connection the server reset
// raises SIGPIPE, whose default action ends the process. Hold a SigpipeBlock on the calling
// thread around any use.
#pragma once

#include <signal.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct redisContext;
struct redisReply;

namespace switchyard::kvx {

struct RedisReplyDeleter {
  void operator()(redisReply* reply) const;
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

// While one lives, the calling thread has SIGPIPE blocked, so a write to a reset connection
// fails with EPIPE (a lost connection like any other); a SIGPIPE it raised is taken off the
// thread before the previous mask is restored.
class SigpipeBlock {
 public:
  SigpipeBlock();
  ~SigpipeBlock();
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t previous_{};
};

class RedisConnection {
 public:
  // Connects with `timeout`, which then bounds each reply too. Unavailable when the server
  // cannot be reached. `who` starts every error message ("KV Redis tier").
  static absl::StatusOr<RedisConnection> Connect(const std::string& host, int port,
                                                 std::chrono::milliseconds timeout,
                                                 std::string who);

  // Queues a command (copied into the output buffer); sent by the next NextReply.
  void Append(std::span<const std::string_view> argv);
  // The next reply in order; null when the connection is lost (then Lost() says why).
  RedisReply NextReply();
  // Append and NextReply: the reply (which may be a Redis error reply), or Unavailable.
  absl::StatusOr<RedisReply> Command(std::span<const std::string_view> argv);
  // Why the connection failed.
  absl::Status Lost() const;

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  RedisConnection(std::unique_ptr<redisContext, ContextDeleter> context, std::string who)
      : context_(std::move(context)), who_(std::move(who)) {}

  std::unique_ptr<redisContext, ContextDeleter> context_;
  std::string who_;
};

// A reply's bytes (string, status or error replies).
std::string_view ReplyText(const redisReply& reply);

}  // namespace switchyard::kvx
