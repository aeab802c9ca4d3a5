#include "kvx/redis_connection.h"

#include <sys/time.h>

#include <vector>

#include "fmt/format.h"
#include <hiredis/hiredis.h>

namespace switchyard::kvx {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000),
          static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

}  // namespace

void RedisReplyDeleter::operator()(redisReply* reply) const {
  freeReplyObject(reply);
}

void RedisConnection::ContextDeleter::operator()(redisContext* c) const {
  redisFree(c);
}

SigpipeBlock::SigpipeBlock() {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
}

SigpipeBlock::~SigpipeBlock() {
  const timespec no_wait{};
  while (sigtimedwait(&pipe_, nullptr, &no_wait) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

absl::StatusOr<RedisConnection> RedisConnection::Connect(const std::string& host, int port,
                                                         std::chrono::milliseconds timeout,
                                                         std::string who) {
  const timeval tv = ToTimeval(timeout);
  std::unique_ptr<redisContext, ContextDeleter> context(
      redisConnectWithTimeout(host.c_str(), port, tv));
  if (context == nullptr)
    return absl::ResourceExhaustedError(fmt::format("{}: cannot allocate a connection", who));
  if (context->err != 0) {
    return absl::UnavailableError(
        fmt::format("{}: cannot reach {}:{}: {}", who, host, port, context->errstr));
  }
  redisSetTimeout(context.get(), tv);
  return RedisConnection(std::move(context), std::move(who));
}

void RedisConnection::Append(std::span<const std::string_view> argv) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  args.reserve(argv.size());
  lengths.reserve(argv.size());
  for (std::string_view a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  redisAppendCommandArgv(context_.get(), static_cast<int>(args.size()), args.data(),
                         lengths.data());
}

RedisReply RedisConnection::NextReply() {
  void* reply = nullptr;
  if (redisGetReply(context_.get(), &reply) != REDIS_OK)
    return nullptr;
  return RedisReply(static_cast<redisReply*>(reply));
}

absl::StatusOr<RedisReply> RedisConnection::Command(std::span<const std::string_view> argv) {
  Append(argv);
  RedisReply reply = NextReply();
  if (reply == nullptr)
    return Lost();
  return reply;
}

absl::Status RedisConnection::Lost() const {
  return absl::UnavailableError(fmt::format("{}: {}", who_, context_->errstr));
}

std::string_view ReplyText(const redisReply& reply) {
  return reply.str == nullptr ? std::string_view() : std::string_view(reply.str, reply.len);
}

}  // namespace switchyard::kvx
