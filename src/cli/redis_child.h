// RedisChild: a redis-server (Debian's, from PATH) that `switchyard up --kv-redis` runs for
// its engines' shared KV tier: bound to 127.0.0.1 on a free port, without persistence,
// its memory capped with an LRU policy so that it evicts old blocks instead of refusing new
// ones. It dies with this process (PR_SET_PDEATHSIG) and is stopped (SIGTERM, then SIGKILL
// after a few seconds) and reaped by the destructor.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace switchyard::cli {

class RedisChild {
 public:
  // Starts it and waits (up to 10 s) until it accepts connections. FailedPrecondition when
  // redis-server is not installed or exits early.
  static absl::StatusOr<std::unique_ptr<RedisChild>> Start(int64_t max_memory_bytes);
  ~RedisChild();
  RedisChild(const RedisChild&) = delete;
  RedisChild& operator=(const RedisChild&) = delete;

  int port() const { return port_; }

 private:
  RedisChild(pid_t pid, int port) : pid_(pid), port_(port) {}

  pid_t pid_;
  int port_;
};

}  // namespace switchyard::cli
