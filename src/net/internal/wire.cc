#include "net/internal/wire.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/base/attributes.h"
#include "fmt/format.h"

#include "base/json.h"
#include "net/internal/http_chars.h"

namespace switchyard::net::internal {
namespace {

// At least the bytes of the lines a head writer writes itself (status or request line,
// Server, Content-Type, Content-Length, Connection, the event-stream headers, the blank line),
// not counting the caller's strings, which are added on top.
constexpr size_t kOwnHeadBytes = 160;

// A method or a header name: one or more RFC 9110 token characters.
bool IsToken(std::string_view s) {
  return !s.empty() && AllTokenChars(s);
}

// Bit i set: byte i of the sixteen at `p` is a CR, an LF or a NUL.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t LineBreakOrNulBytes16(const char* p) {
#if defined(__SSE2__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i hit = _mm_or_si128(
      _mm_cmpeq_epi8(v, _mm_setzero_si128()),
      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))));
  return static_cast<uint32_t>(_mm_movemask_epi8(hit));
#else
  uint32_t mask = 0;
  for (int i = 0; i < 16; ++i) {
    if (p[i] == '\0' || p[i] == '\r' || p[i] == '\n')
      mask |= uint32_t{1} << i;
  }
  return mask;
#endif
}

// Whether any of the `n` bytes at `p` is a CR, an LF or a NUL, which no header value may hold:
// each would end the line, or the head, early for some reader. Sixteen bytes a step: reads
// up to 15 initialized bytes past p + n, which do not count.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool HasLineBreakOrNul(const char* p, size_t n) {
  for (; n >= 16; p += 16, n -= 16) {
    if (LineBreakOrNulBytes16(p) != 0)
      return true;
  }
  return n > 0 && (LineBreakOrNulBytes16(p) & ((uint32_t{1} << n) - 1)) != 0;
}

// The headers that say where the message ends and what happens to the connection after it:
// always written by us, never taken from a caller. By length first: each of the three has
// its own, and most names have none of them.
bool IsFramingHeader(std::string_view name) {
  switch (name.size()) {
    case std::string_view("connection").size():
      return EqualsIgnoreCase(name, "connection");
    case std::string_view("content-length").size():
      return EqualsIgnoreCase(name, "content-length");
    case std::string_view("transfer-encoding").size():
      return EqualsIgnoreCase(name, "transfer-encoding");
    default:
      return false;
  }
}

bool HasHeader(const HeaderList* headers, std::string_view name) {
  if (headers == nullptr)
    return false;
  return std::any_of(headers->begin(), headers->end(),
                     [&](const auto& header) { return EqualsIgnoreCase(header.first, name); });
}

// `value` in `base` (10 or 16), without the cost of a format string.
void AppendNumber(uint64_t value, int base, std::string* out) {
  std::array<char, 20> digits;  // 2^64 has 20 decimal digits
  const std::to_chars_result result =
      std::to_chars(digits.data(), digits.data() + digits.size(), value, base);
  out->append(digits.data(), result.ptr);
}

// The bytes of `header` as a head carries them: "name: value\r\n".
size_t HeaderBytes(const std::pair<std::string, std::string>& header) {
  return header.first.size() + header.second.size() + 4;
}

// Writes a head into a string sized once, up front: each piece is a copy at a cursor rather
// than an append (a call, a capacity check and a terminator each). Always inlined, so that a
// literal piece is a move or two rather than a memcpy call. Grows only when `expected_size`
// fell short.
class HeadWriter {
 public:
  explicit HeadWriter(size_t expected_size)
      : out_(expected_size + kScanSlack, '\0'), cursor_(out_.data()), end_(cursor_ + out_.size()) {}

  ABSL_ATTRIBUTE_ALWAYS_INLINE void Put(std::string_view piece) {
    if (piece.size() > static_cast<size_t>(end_ - cursor_))
      Grow(piece.size());
    cursor_ = std::copy(piece.begin(), piece.end(), cursor_);
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void PutDecimal(uint64_t value) {
    std::array<char, 20> digits;  // 2^64 has 20 decimal digits
    const std::to_chars_result result =
        std::to_chars(digits.data(), digits.data() + digits.size(), value);
    Put(std::string_view(digits.data(), result.ptr - digits.data()));
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void PutHeader(std::string_view name, std::string_view value) {
    Put(name);
    Put(": ");
    Put(value);
    Put("\r\n");
  }

  // A caller's header, "name: value\r\n", when it cannot end the line or the head early: a
  // token name and a value without CR, LF or NUL. Else it writes nothing and returns false.
  // The value is checked on its copy, sixteen bytes a step, reading past it into the writer's
  // own zeroed room (kScanSlack) rather than past the caller's string.
  [[nodiscard]] ABSL_ATTRIBUTE_ALWAYS_INLINE bool PutSafeHeader(std::string_view name,
                                                                std::string_view value) {
    if (!IsToken(name))
      return false;
    const size_t line_size = name.size() + value.size() + 4;
    if (line_size + kScanSlack > static_cast<size_t>(end_ - cursor_))
      Grow(line_size + kScanSlack);
    // No further room checks: there is room for the line.
    char* const line = cursor_;
    cursor_ = std::copy(name.begin(), name.end(), cursor_);
    *cursor_++ = ':';
    *cursor_++ = ' ';
    const char* const value_start = cursor_;
    cursor_ = std::copy(value.begin(), value.end(), cursor_);
    if (HasLineBreakOrNul(value_start, value.size())) {
      cursor_ = line;
      return false;
    }
    *cursor_++ = '\r';
    *cursor_++ = '\n';
    return true;
  }

  // Bytes written so far; Truncate(size()) later takes back what was written in between.
  size_t size() const { return static_cast<size_t>(cursor_ - out_.data()); }
  void Truncate(size_t size) { cursor_ = out_.data() + size; }

  // The head written so far; the writer is spent.
  std::string Finish() && {
    out_.resize(cursor_ - out_.data());
    return std::move(out_);
  }

 private:
  // Grows the string, zero-filled, to take at least `piece_size` more bytes.
  void Grow(size_t piece_size) {
    const size_t used = cursor_ - out_.data();
    out_.resize(std::max(2 * out_.size(), used + piece_size));
    cursor_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }

  // Room PutSafeHeader keeps past a line, for its last sixteen-byte step.
  static constexpr size_t kScanSlack = 16;

  std::string out_;
  char* cursor_;
  char* end_;
};

}  // namespace

std::string EncodeHead(const ResponseHead& head) {
  // A status the handler made up is sent as is when it has three digits, else as 500.
  const int status = head.status >= 100 && head.status <= 999 ? head.status : 500;
  const http::status known = http::int_to_status(static_cast<unsigned>(status));
  const beast::string_view reason =
      known == http::status::unknown ? "Unknown" : http::obsolete_reason(known);
  size_t expected_size =
      kOwnHeadBytes + reason.size() + head.server_name.size() + head.content_type.size();
  if (head.extra_headers != nullptr) {
    for (const auto& header : *head.extra_headers)
      expected_size += HeaderBytes(header);
  }
  HeadWriter out(expected_size);
  out.Put("HTTP/1.1 ");
  out.PutDecimal(static_cast<uint64_t>(status));
  out.Put(" ");
  out.Put(std::string_view(reason.data(), reason.size()));
  out.Put("\r\n");
  if (!head.server_name.empty())
    out.PutHeader("Server", head.server_name);
  if (!head.content_type.empty())
    out.PutHeader("Content-Type", head.content_type);
  if (head.content_length.has_value()) {
    out.Put("Content-Length: ");
    out.PutDecimal(*head.content_length);
    out.Put("\r\n");
  } else if (head.chunked) {
    out.PutHeader("Transfer-Encoding", "chunked");
  }
  if (head.persistence == Persistence::kKeepAlive) {
    out.PutHeader("Connection", "keep-alive");
  } else if (head.persistence == Persistence::kClose) {
    out.PutHeader("Connection", "close");
  }
  if (head.content_type.substr(0, head.content_type.find(';')) == "text/event-stream") {
    if (!HasHeader(head.extra_headers, "cache-control"))
      out.PutHeader("Cache-Control", "no-cache");
    out.PutHeader("X-Accel-Buffering", "no");
  }
  if (head.extra_headers != nullptr) {
    for (const auto& [name, value] : *head.extra_headers) {
      // An unsafe one is left out.
      if (!IsFramingHeader(name))
        static_cast<void>(out.PutSafeHeader(name, value));
    }
  }
  out.Put("\r\n");
  return std::move(out).Finish();
}

absl::StatusOr<std::string> EncodeRequestHead(const RequestHead& head) {
  if (!IsToken(head.method))
    return absl::InvalidArgumentError(fmt::format("http: bad request method '{}'", head.method));
  // The target must be visible ASCII: anything else would split the request line.
  const bool target_ok =
      !head.target.empty() && std::all_of(head.target.begin(), head.target.end(),
                                          [](char c) { return c > ' ' && c < 0x7f; });
  if (!target_ok)
    return absl::InvalidArgumentError(fmt::format("http: bad request target '{}'", head.target));
  size_t expected_size = kOwnHeadBytes + head.method.size() + head.target.size() + head.host.size();
  if (head.headers != nullptr) {
    for (const auto& header : *head.headers)
      expected_size += HeaderBytes(header);
  }
  HeadWriter out(expected_size);
  out.Put(head.method);
  out.Put(" ");
  out.Put(head.target);
  out.Put(" HTTP/1.1\r\n");
  out.PutHeader("Host", head.host);
  if (head.headers != nullptr) {
    for (const auto& [name, value] : *head.headers) {
      const size_t line = out.size();
      if (!out.PutSafeHeader(name, value))
        return absl::InvalidArgumentError(fmt::format("http: bad header '{}'", name));
      // Checked as any other, then left out.
      if (IsFramingHeader(name) || EqualsIgnoreCase(name, "host"))
        out.Truncate(line);
    }
  }
  if (head.content_length.has_value()) {
    out.Put("Content-Length: ");
    out.PutDecimal(*head.content_length);
    out.Put("\r\n");
  }
  out.PutHeader("Connection", "keep-alive");
  out.Put("\r\n");
  return std::move(out).Finish();
}

std::string ChunkPrefix(size_t data_size) {
  std::string prefix;
  AppendNumber(data_size, 16, &prefix);
  prefix.append("\r\n");
  return prefix;
}

std::pair<std::string, std::string> DefaultErrorBody(int http_status, std::string_view message) {
  // The type names follow api/error.h's table (openai-python's exception classes).
  std::string_view type = "BadRequestError";
  switch (http_status) {
    case 408:
      type = "RequestTimeoutError";
      break;
    case 413:
      type = "RequestEntityTooLargeError";
      break;
    case 431:
      type = "RequestHeaderFieldsTooLargeError";
      break;
    default:
      break;
  }
  std::string body = "{\"error\":{\"message\":";
  base::AppendJsonString(message, false, &body);
  body += ",\"type\":";
  base::AppendJsonString(type, false, &body);
  body += fmt::format(",\"param\":null,\"code\":{}}}}}", http_status);
  return {"application/json", std::move(body)};
}

}  // namespace switchyard::net::internal
