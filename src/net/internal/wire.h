// The bytes of HTTP/1.1 messages: the server's status line and headers, chunk framing and
// the default body of its transport errors; the client's request line and headers. Stateless; any
// thread may call these.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

#include "net/http_message.h"
#include "net/internal/beast.h"

namespace switchyard::net::internal {

inline constexpr std::string_view kChunkEnd = "\r\n";
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// What the Connection header says about the connection after this response.
enum class Persistence {
  kKeepAliveImplied,  // HTTP/1.1 keep-alive: no Connection header
  kKeepAlive,         // HTTP/1.0 that asked for keep-alive: "Connection: keep-alive"
  kClose,             // "Connection: close"
};

struct ResponseHead {
  int status = 200;
  std::string_view content_type;
  const HeaderList* extra_headers = nullptr;
  // Set: Content-Length. Unset: chunked when `chunked`, else the body runs to the close.
  std::optional<size_t> content_length;
  bool chunked = false;
  Persistence persistence = Persistence::kKeepAliveImplied;
  std::string_view server_name;  // empty: no Server header
};

// The status line and headers, ending with the blank line. Extra headers that would
// break the framing (Content-Length, Transfer-Encoding, Connection) or that carry CR, LF
// or an empty name are left out. A text/event-stream response gets Cache-Control:
// no-cache (unless given) and X-Accel-Buffering: no, so that proxies do not buffer it.
std::string EncodeHead(const ResponseHead& head);

// "<size in hex>\r\n"; the chunk's data and kChunkEnd follow it.
std::string ChunkPrefix(size_t data_size);

// The default HttpServerOptions::error_body: application/json,
// {"error": {"message", "type", "param": null, "code": <status>}} as api/error.h writes it.
std::pair<std::string, std::string> DefaultErrorBody(int http_status, std::string_view message);

struct RequestHead {
  std::string_view method;  // a token: "GET", "POST"
  std::string_view target;  // "/v1/completions?x=1"
  std::string_view host;    // the Host header: "127.0.0.1:8000"
  const HeaderList* headers = nullptr;
  // Set: Content-Length. A request with no body and no Content-Length has no body.
  std::optional<size_t> content_length;
};

// The request line and headers, ending with the blank line, for a keep-alive request
// ("Connection: keep-alive"). The headers that carry the framing (Host, Content-Length,
// Transfer-Encoding, Connection) are the client's: given ones are left out. InvalidArgument
// when the method, the target or a header would break the framing (CR, LF, spaces,
// controls, an empty name).
absl::StatusOr<std::string> EncodeRequestHead(const RequestHead& head);

}  // namespace switchyard::net::internal
