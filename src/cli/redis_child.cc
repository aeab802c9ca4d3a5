#include "cli/redis_child.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fmt/format.h"

namespace switchyard::cli {
namespace {

// A loopback port nobody listens on now (the kernel's pick for a socket bound to port 0).
absl::StatusOr<int> FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!ok)
    return absl::InternalError("cannot find a free loopback port");
  return static_cast<int>(ntohs(addr.sin_port));
}

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisChild>> RedisChild::Start(int64_t max_memory_bytes) {
  absl::StatusOr<int> port = FreePort();
  if (!port.ok())
    return port.status();
  std::vector<std::string> args = {"redis-server",
                                   "--bind",
                                   "127.0.0.1",
                                   "--port",
                                   std::to_string(*port),
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--maxmemory",
                                   std::to_string(max_memory_bytes),
                                   "--maxmemory-policy",
                                   "allkeys-lru"};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    return absl::InternalError("fork() failed");
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      ::_exit(1);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
    ::execvp("redis-server", argv.data());
    ::_exit(127);
  }
  std::unique_ptr<RedisChild> child(new RedisChild(pid, *port));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!Accepts(*port)) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      child->pid_ = -1;
      return absl::FailedPreconditionError(
          fmt::format("--kv-redis: redis-server {} (install Debian's redis-server)",
                      WIFEXITED(status) && WEXITSTATUS(status) == 127 ? "was not found"
                                                                      : "exited before it served"));
    }
    if (std::chrono::steady_clock::now() > deadline)
      return absl::DeadlineExceededError("--kv-redis: redis-server did not start in 10 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return child;
}

RedisChild::~RedisChild() {
  if (pid_ <= 0)
    return;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace switchyard::cli
