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
// Server, Content-Type, Content-Length with up to 20 digits, Connection, the event-stream
// headers, the blank line: 153 at most for a response, 84 for a request), not counting the
// caller's strings, which are added on top. A head's size is bounded up front, so that its
// writer needs no room checks.
constexpr size_t kOwnHeadBytes = 160;

// Room kept past a head for the last sixteen-byte step of a check on its copy.
constexpr size_t kScanSlack = 16;

// A method or a header name: one or more RFC 9110 token characters.
bool IsToken(std::string_view s) {
  return !s.empty() && AllTokenChars(s);
}

// Bit i set: byte i of the sixteen at `p` is a CR, an LF or a NUL, which no header value may
// hold: each would end the line, or the head, early for some reader.
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

// Bit i set: byte i of the sixteen at `p` is not visible ASCII (a space, a control, DEL or
// past ASCII), which would split a request line.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t NonVisibleBytes16(const char* p) {
#if defined(__SSE2__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // Signed: the bytes past ASCII are negative, so below '!' too.
  const __m128i hit =
      _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8('!')), _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
  return static_cast<uint32_t>(_mm_movemask_epi8(hit));
#else
  uint32_t mask = 0;
  for (int i = 0; i < 16; ++i) {
    if (!(p[i] > ' ' && p[i] < 0x7f))
      mask |= uint32_t{1} << i;
  }
  return mask;
#endif
}

// Bit i set: byte i of the sixteen at `p` is none of the usual characters of a header name
// (a letter, a digit, '-'), most of which are. The other token characters are rare in names.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint32_t UnusualNameBytes16(const char* p) {
#if defined(__SSE2__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // Signed compares: the bytes past ASCII are negative, below every range. Setting bit 5
  // makes an upper-case letter lower-case, and a non-letter no letter.
  const __m128i folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
  const __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(folded, _mm_set1_epi8('a' - 1)),
                                       _mm_cmplt_epi8(folded, _mm_set1_epi8('z' + 1)));
  const __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                      _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
  const __m128i usual =
      _mm_or_si128(_mm_or_si128(letter, digit), _mm_cmpeq_epi8(v, _mm_set1_epi8('-')));
  return static_cast<uint32_t>(~_mm_movemask_epi8(usual)) & 0xffff;
#else
  uint32_t mask = 0;
  for (int i = 0; i < 16; ++i) {
    const char c = AsciiLower(p[i]);
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      mask |= uint32_t{1} << i;
  }
  return mask;
#endif
}

// Whether `bytes16` finds any of the `n` bytes at `p`. Sixteen bytes a step: reads up to 15
// initialized bytes past p + n, which do not count.
template <uint32_t (*bytes16)(const char*)>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool AnyByte(const char* p, size_t n) {
  for (; n >= 16; p += 16, n -= 16) {
    if (bytes16(p) != 0)
      return true;
  }
  return n > 0 && (bytes16(p) & ((uint32_t{1} << n) - 1)) != 0;
}

// The headers that say where the message ends and what happens to the connection after it:
// always written by us, never taken from a caller. By length first: each of the three has
// its own, and most names have none of them.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool IsFramingHeader(std::string_view name) {
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
  std::array<char, 20> digits{};  // 2^64 has 20 decimal digits
  const std::to_chars_result result =
      std::to_chars(digits.data(), digits.data() + digits.size(), value, base);
  out->append(digits.data(), result.ptr);
}

// The bytes of `header` as a head carries them: "name: value\r\n".
size_t HeaderBytes(const std::pair<std::string, std::string>& header) {
  return header.first.size() + header.second.size() + 4;
}

// A head's string, zero-filled: `bound` bytes (at least the head's) and the scan slack.
std::string HeadBuffer(size_t bound) {
  return std::string(bound + kScanSlack, '\0');
}

// Writes a head at a cursor into its string (HeadBuffer), with no room checks: the string
// was sized for the whole head up front. Always inlined and holding nothing but the cursor,
// so that the cursor stays in a register across the copies' calls and a literal piece is a
// move or two rather than a memcpy call.
class HeadWriter {
 public:
  explicit HeadWriter(char* start) : cursor_(start) {}

  ABSL_ATTRIBUTE_ALWAYS_INLINE void Put(std::string_view piece) {
    cursor_ = std::copy(piece.begin(), piece.end(), cursor_);
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void PutDecimal(uint64_t value) {
    // 2^64 has 20 decimal digits; the bound counts them.
    cursor_ = std::to_chars(cursor_, cursor_ + 20, value).ptr;
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void PutHeader(std::string_view name, std::string_view value) {
    Put(name);
    Put(": ");
    Put(value);
    Put("\r\n");
  }

  // A piece that must be visible ASCII (a request target): false, with the piece written,
  // when it is not. Checked on its copy (reading into the string's zeroed room past it).
  [[nodiscard]] ABSL_ATTRIBUTE_ALWAYS_INLINE bool PutVisible(std::string_view piece) {
    const char* const start = cursor_;
    Put(piece);
    return !AnyByte<NonVisibleBytes16>(start, piece.size());
  }

  // A caller's header, "name: value\r\n", when it cannot end the line or the head early: a
  // token name and a value without CR, LF or NUL. Else it writes nothing and returns false.
  // Both are checked on their copies, sixteen bytes a step, reading past them into the
  // string's zeroed room (kScanSlack) rather than past the caller's strings.
  [[nodiscard]] ABSL_ATTRIBUTE_ALWAYS_INLINE bool PutSafeHeader(std::string_view name,
                                                                std::string_view value) {
    char* const line = cursor_;
    Put(name);
    // A name of the usual characters needs no lookup per character.
    if (name.empty() || (AnyByte<UnusualNameBytes16>(line, name.size()) && !AllTokenChars(name))) {
      cursor_ = line;
      return false;
    }
    Put(": ");
    const char* const value_start = cursor_;
    Put(value);
    if (AnyByte<LineBreakOrNulBytes16>(value_start, value.size())) {
      cursor_ = line;
      return false;
    }
    Put("\r\n");
    return true;
  }

  char* cursor() const { return cursor_; }
  // Takes back what was written since `mark` (an earlier cursor()).
  void Rewind(char* mark) { cursor_ = mark; }

 private:
  char* cursor_;
};

// Cuts `bytes`, a HeadBuffer, to what `writer` wrote into it.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void Finish(const HeadWriter& writer, std::string* bytes) {
  bytes->resize(static_cast<size_t>(writer.cursor() - bytes->data()));
}

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
  std::string bytes = HeadBuffer(expected_size);
  HeadWriter out(bytes.data());
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
  Finish(out, &bytes);
  return bytes;
}

absl::StatusOr<std::string> EncodeRequestHead(const RequestHead& head) {
  if (!IsToken(head.method))
    return absl::InvalidArgumentError(fmt::format("http: bad request method '{}'", head.method));
  size_t expected_size = kOwnHeadBytes + head.method.size() + head.target.size() + head.host.size();
  if (head.headers != nullptr) {
    for (const auto& header : *head.headers)
      expected_size += HeaderBytes(header);
  }
  std::string bytes = HeadBuffer(expected_size);
  HeadWriter out(bytes.data());
  out.Put(head.method);
  out.Put(" ");
  // The target must be visible ASCII: anything else would split the request line.
  if (head.target.empty() || !out.PutVisible(head.target))
    return absl::InvalidArgumentError(fmt::format("http: bad request target '{}'", head.target));
  out.Put(" HTTP/1.1\r\n");
  out.PutHeader("Host", head.host);
  if (head.headers != nullptr) {
    for (const auto& [name, value] : *head.headers) {
      char* const line = out.cursor();
      if (!out.PutSafeHeader(name, value))
        return absl::InvalidArgumentError(fmt::format("http: bad header '{}'", name));
      // Checked as any other, then left out.
      if (IsFramingHeader(name) || EqualsIgnoreCase(name, "host"))
        out.Rewind(line);
    }
  }
  if (head.content_length.has_value()) {
    out.Put("Content-Length: ");
    out.PutDecimal(*head.content_length);
    out.Put("\r\n");
  }
  out.PutHeader("Connection", "keep-alive");
  out.Put("\r\n");
  Finish(out, &bytes);
  return bytes;
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
