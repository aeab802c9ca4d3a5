#include "test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "fmt/format.h"

namespace switchyard::net::testing {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::optional<std::string> TestResponse::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name)
      return value;
  }
  return std::nullopt;
}

TestClient::TestClient(int port, int receive_buffer_bytes, const char* source_address) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0)
    return;
  if (receive_buffer_bytes > 0)
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer_bytes, sizeof(receive_buffer_bytes));
  if (source_address != nullptr) {
    sockaddr_in source = {};
    source.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source_address, &source.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<const sockaddr*>(&source), sizeof(source)) != 0) {
      Close();
      return;
    }
  }
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0)
    Close();
}

TestClient::~TestClient() {
  Close();
}

bool TestClient::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

bool TestClient::Fill(Deadline deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    pollfd p = {fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return false;
    char data[16384];
    const ssize_t n = ::recv(fd_, data, sizeof(data), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    buffer_.append(data, static_cast<size_t>(n));
    return true;
  }
}

bool TestClient::ReadLine(Deadline deadline, std::string* line) {
  size_t end;
  while ((end = buffer_.find("\r\n")) == std::string::npos) {
    if (!Fill(deadline))
      return false;
  }
  *line = buffer_.substr(0, end);
  buffer_.erase(0, end + 2);
  return true;
}

bool TestClient::ReadBytes(size_t n, Deadline deadline, std::string* out) {
  while (buffer_.size() < n) {
    if (!Fill(deadline))
      return false;
  }
  *out = buffer_.substr(0, n);
  buffer_.erase(0, n);
  return true;
}

std::optional<TestResponse> TestClient::ReadHead(std::chrono::milliseconds timeout) {
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  if (!ReadLine(deadline, &line) || line.rfind("HTTP/1.", 0) != 0 || line.size() < 12)
    return std::nullopt;
  TestResponse response;
  response.status = std::atoi(line.c_str() + 9);
  while (true) {
    if (!ReadLine(deadline, &line))
      return std::nullopt;
    if (line.empty())
      break;
    const size_t colon = line.find(':');
    if (colon == std::string::npos)
      return std::nullopt;
    const size_t value = line.find_first_not_of(' ', colon + 1);
    response.headers.emplace_back(Lower(line.substr(0, colon)),
                                  value == std::string::npos ? "" : line.substr(value));
  }
  response.chunked = response.Header("transfer-encoding") == "chunked";
  return response;
}

bool TestClient::ReadChunkUntil(Deadline deadline, std::string* chunk, bool* last) {
  std::string line;
  if (!ReadLine(deadline, &line))
    return false;
  const size_t size = std::strtoul(line.c_str(), nullptr, 16);
  *last = size == 0;
  if (*last) {
    // The trailer section, up to the empty line.
    while (true) {
      if (!ReadLine(deadline, &line))
        return false;
      if (line.empty())
        return true;
    }
  }
  std::string crlf;
  return ReadBytes(size, deadline, chunk) && ReadBytes(2, deadline, &crlf) && crlf == "\r\n";
}

std::optional<std::string> TestClient::ReadChunk(std::chrono::milliseconds timeout) {
  std::string chunk;
  bool last = false;
  if (!ReadChunkUntil(std::chrono::steady_clock::now() + timeout, &chunk, &last) || last)
    return std::nullopt;
  return chunk;
}

std::optional<TestResponse> TestClient::ReadResponse(bool head_request,
                                                     std::chrono::milliseconds timeout) {
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<TestResponse> response = ReadHead(timeout);
  if (!response || head_request || response->status / 100 == 1 || response->status == 204 ||
      response->status == 304)
    return response;
  if (response->chunked) {
    while (true) {
      std::string chunk;
      bool last = false;
      if (!ReadChunkUntil(deadline, &chunk, &last))
        return std::nullopt;
      if (last)
        return response;
      response->body += chunk;
      response->chunks.push_back(std::move(chunk));
    }
  }
  if (std::optional<std::string> length = response->Header("content-length")) {
    if (!ReadBytes(std::strtoul(length->c_str(), nullptr, 10), deadline, &response->body))
      return std::nullopt;
    return response;
  }
  while (Fill(deadline)) {
  }
  response->body = std::move(buffer_);
  buffer_.clear();
  return response;
}

bool TestClient::WaitForClose(std::chrono::milliseconds timeout) {
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p = {fd_, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return false;
    char data[1024];
    const ssize_t n = ::recv(fd_, data, sizeof(data), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      return buffer_.empty();
    if (n > 0)
      return false;
  }
  return false;
}

void TestClient::ShutdownWrite() {
  ::shutdown(fd_, SHUT_WR);
}

void TestClient::Close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

std::string Get(std::string_view target, std::string_view extra) {
  return fmt::format("GET {} HTTP/1.1\r\nHost: test\r\n{}\r\n", target, extra);
}

std::string Post(std::string_view target, std::string_view body, std::string_view extra) {
  return fmt::format("POST {} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n{}\r\n{}", target,
                     body.size(), extra, body);
}

void Notification::Notify() {
  std::lock_guard<std::mutex> lock(mu_);
  notified_ = true;
  cv_.notify_all();
}

bool Notification::HasBeenNotified() {
  std::lock_guard<std::mutex> lock(mu_);
  return notified_;
}

bool Notification::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return notified_; });
}

}  // namespace switchyard::net::testing
