// A real redis-server for tests, on a free loopback port, persisting nothing: Start waits
// for its "Ready to accept connections" line (no polling, no sleeps); Kill, Pause and Resume
// let a test take it away. Redis is a test requirement (scripts/setup_test.sh installs it):
// Start fails, it does not skip, when redis-server is not on PATH.
//
// One thread (the test's) uses it. The server dies with the test process (PR_SET_PDEATHSIG).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace switchyard::kvx {

class RedisTestServer {
 public:
  RedisTestServer() = default;
  ~RedisTestServer() { Kill(); }
  RedisTestServer(const RedisTestServer&) = delete;
  RedisTestServer& operator=(const RedisTestServer&) = delete;

  // A loopback port nothing listens on now.
  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    int port = 0;
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    if (fd >= 0)
      ::close(fd);
    return port;
  }

  // Starts the server on `port` (0: a free one, retried should another process take it
  // first) and returns once it accepts connections.
  absl::Status Start(int port = 0) {
    const std::string binary = FindOnPath("redis-server");
    if (binary.empty()) {
      return absl::FailedPreconditionError(
          "redis-server is not on PATH: run scripts/setup_test.sh (it installs Debian's "
          "redis-server, which these tests need)");
    }
    absl::Status status;
    for (int attempt = 0; attempt < (port == 0 ? 3 : 1); ++attempt) {
      status = StartOn(binary, port != 0 ? port : FreePort());
      if (status.ok())
        return status;
    }
    return status;
  }

  // SIGKILLs the server and reaps it; nothing without one.
  void Kill() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGCONT);  // a paused server dies too
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    ::close(output_fd_);
    output_fd_ = -1;
  }

  // Stops the server (SIGSTOP): connections are still accepted by the kernel, but nothing
  // answers, as a hung server. Resume continues it.
  void Pause() { ::kill(pid_, SIGSTOP); }
  void Resume() { ::kill(pid_, SIGCONT); }

  int port() const { return port_; }

 private:
  static std::string FindOnPath(const std::string& name) {
    const char* path = std::getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "", ':')) {
      std::string candidate = std::string(dir) + "/" + name;
      if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0)
        return candidate;
    }
    return "";
  }

  absl::Status StartOn(const std::string& binary, int port) {
    const std::string port_text = std::to_string(port);
    const std::string dir = ::testing::TempDir();
    std::vector<std::string> args = {binary,      "--port", port_text, "--bind",
                                     "127.0.0.1", "--save", "",        "--appendonly",
                                     "no",        "--dir",  dir};
    std::vector<char*> argv;
    for (std::string& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
      return absl::InternalError("pipe2 failed");
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child == 0) {
      // Only async-signal-safe calls until exec.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent)
        ::_exit(1);
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    if (child < 0) {
      ::close(pipe_fds[0]);
      return absl::InternalError("fork failed");
    }
    pid_ = child;
    output_fd_ = pipe_fds[0];
    port_ = port;
    // Reads its log until it is ready or exits.
    std::string output;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (output.find("Ready to accept connections") == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd pfd{output_fd_, POLLIN, 0};
      char buffer[4096];
      ssize_t n = 0;
      if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0 ||
          (n = ::read(output_fd_, buffer, sizeof(buffer))) <= 0) {
        Kill();
        return absl::UnavailableError("redis-server on port " + port_text +
                                      " did not start: " + output);
      }
      output.append(buffer, static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  pid_t pid_ = -1;
  // The server's stdout, kept open (and unread past startup) while it runs.
  int output_fd_ = -1;
  int port_ = 0;
};

}  // namespace switchyard::kvx
