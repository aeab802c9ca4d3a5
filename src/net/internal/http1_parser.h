// Http1Parser: the framing of one HTTP/1.1 message (RFC 9112), a request or a response, read
// from bytes the caller owns. The start line and the header fields (names lower-cased, values
// trimmed, in order) are copied out once the whole head is in the buffer; the body follows as
// pieces that point into the caller's buffer: a fixed length, chunked, or (a response) up to
// the close.
//
// Strict wherever leniency would let two parsers disagree about where a message ends (request
// smuggling): lines end with CRLF, no obs-fold, at most one Content-Length of digits only, and
// a request with both Content-Length and Transfer-Encoding, or whose last transfer coding is
// not chunked, is refused. Control bytes in a field value, a method that is not a token and a
// target with spaces or controls are refused too.
//
// put() hands back control after the head is complete, after each body piece, at the end of
// the message, or with need_more; the caller consumes the bytes it returns. Errors are Beast's
// http::error codes: need_more (the bytes used are returned; give it what follows them),
// header_limit (head or trailer over the limit), body_limit, partial_message (put_eof before
// the end), and bad_* for malformed input.
//
// One parser per message. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "net/http_message.h"
#include "net/internal/beast.h"

namespace switchyard::net::internal {

class Http1Parser {
 public:
  enum class Kind { kRequest, kResponse };

  explicit Http1Parser(Kind kind) : kind_(kind) {}

  // Limits; set before the first put(). The head limit covers the start line, the fields
  // and the blank line (a chunked body's trailer has a limit of its own of the same size).
  void header_limit(uint32_t bytes) { header_limit_ = bytes; }
  void body_limit(uint64_t bytes) { body_limit_ = bytes; }
  // A response to HEAD: no body, whatever its head says.
  void skip(bool skip_body) { skip_body_ = skip_body; }

  // Parses from `bytes`; returns how many it used.
  size_t put(asio::const_buffer bytes, ErrorCode& ec);
  // The peer closed its side: ends a response body that runs to the close; anything else
  // still unfinished is partial_message.
  void put_eof(ErrorCode& ec);

  bool got_some() const { return got_some_; }
  bool is_header_done() const { return state_ != State::kHead; }
  bool is_done() const { return state_ == State::kDone; }
  // After the head: whether the connection may carry another message after this one.
  bool keep_alive() const;

  // After the head.
  int version() const { return version_; }  // 10 or 11
  int status() const { return status_; }    // responses
  const HeaderList& headers() const { return headers_; }
  std::optional<uint64_t> content_length() const { return content_length_; }
  bool expects_continue() const { return expects_continue_; }  // requests

 protected:
  // The body bytes the last put() used (in the buffer given to it), or empty.
  std::string_view body_piece() const { return piece_; }

  // The request line's parts (requests).
  std::string method_;
  std::string target_;
  HeaderList headers_;

 private:
  enum class State {
    kHead,
    kLength,      // Content-Length bytes left in remaining_
    kChunkSize,   // at a chunk-size line
    kChunkData,   // remaining_ bytes of the chunk left
    kChunkEnd,    // the CRLF after a chunk's data
    kTrailer,     // trailer fields after the last chunk, up to a blank line
    kUntilClose,  // a response body that the close ends
    kDone,
  };

  // Parses a complete head in `in`; returns the bytes used (0 and need_more when the head
  // is not all there yet).
  size_t PutHead(std::string_view in, ErrorCode& ec);
  void ParseRequestLine(std::string_view line, ErrorCode& ec);
  void ParseStatusLine(std::string_view line, ErrorCode& ec);
  // One header field line (no CRLF) into *field; records what the framing needs.
  void ParseField(std::string_view line, HeaderList::value_type* field, ErrorCode& ec);
  // Where the body goes once the head is read.
  void StartBody(ErrorCode& ec);
  // A chunk-size line (no CRLF).
  void ParseChunkSize(std::string_view line, ErrorCode& ec);
  // Takes up to remaining_ bytes of `in` as the piece.
  size_t TakePieceOf(std::string_view in);

  const Kind kind_;
  State state_ = State::kHead;
  uint32_t header_limit_ = 8 << 10;
  uint64_t body_limit_ = UINT64_MAX;
  bool skip_body_ = false;
  bool got_some_ = false;

  int version_ = 11;
  int status_ = 0;
  std::optional<uint64_t> content_length_;
  bool transfer_encoding_ = false;  // a Transfer-Encoding field was present
  bool chunked_ = false;            // ... and its last coding is chunked
  bool close_ = false;              // Connection: close
  bool keep_alive_token_ = false;   // Connection: keep-alive
  bool expects_continue_ = false;
  bool until_close_ = false;  // a response body that the close ends

  uint64_t remaining_ = 0;    // bytes left of the body (kLength) or of a chunk
  uint64_t body_bytes_ = 0;   // chunked and until-close bodies, against body_limit_
  size_t trailer_bytes_ = 0;  // against header_limit_
  std::string_view piece_;
};

}  // namespace switchyard::net::internal
