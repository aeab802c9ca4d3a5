#include "net/internal/http1_parser.h"

#include <algorithm>
#include <array>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/container/inlined_vector.h"

#include "net/internal/http_chars.h"

namespace switchyard::net::internal {
namespace {

constexpr std::string_view kCrlf = "\r\n";
// A chunk-size line longer than this (the size, extensions) is refused.
constexpr size_t kMaxChunkLineBytes = 4 << 10;
bool IsOws(char c) {
  return c == ' ' || c == '\t';
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && IsOws(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back()))
    s.remove_suffix(1);
  return s;
}

// Calls `element` with each trimmed, non-empty element of a comma-separated field value.
template <typename F>
void ForEachListElement(std::string_view value, F element) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view item = TrimOws(value.substr(0, comma));
    if (!item.empty())
      element(item);
    if (comma == std::string_view::npos)
      return;
    value.remove_prefix(comma + 1);
  }
}

// "HTTP/1.0" or "HTTP/1.1" (any minor digit): 10 + the minor version; -1 otherwise.
int ParseVersion(std::string_view s) {
  if (s.size() != 8 || s.substr(0, 7) != "HTTP/1." || s[7] < '0' || s[7] > '9')
    return -1;
  return 10 + (s[7] - '0');
}

// A bare LF (one not after a CR) anywhere in `s`.
bool HasBareLf(std::string_view s) {
  for (size_t i = s.find('\n'); i != std::string_view::npos; i = s.find('\n', i + 1)) {
    if (i == 0 || s[i - 1] != '\r')
      return true;
  }
  return false;
}

// Offsets of the CR of each line of a head, the start line's first.
using LineEnds = absl::InlinedVector<uint32_t, 24>;

// Bit i set: p[i] is a byte that no head holds outside a CRLF line end (one that is not a
// field-value character: a control other than HTAB, or DEL). Sixteen bytes from `p`.
uint32_t SpecialBytes16(const char* p) {
#if defined(__SSE2__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);  // v <= 0x1f
  const __m128i tab = _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'));
  const __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
  return static_cast<uint32_t>(
      _mm_movemask_epi8(_mm_or_si128(_mm_andnot_si128(tab, control), del)));
#else
  uint32_t mask = 0;
  for (int i = 0; i < 16; ++i) {
    if (!IsFieldValueChar(p[i]))
      mask |= uint32_t{1} << i;
  }
  return mask;
#endif
}

// Finds the lines of the head that starts at `start` in `in`: true, with each line's end
// in *ends and the bytes up to the blank line's end in *used, once the blank line that ends
// the head is there; false when it is not there yet, or (ec set) at the first byte that cannot
// be part of a head: a CR without LF, a bare LF, another control.
bool ScanHead(std::string_view in, size_t start, LineEnds* ends, size_t* used, ErrorCode& ec) {
  size_t line_start = start;
  // Handles the special byte at `i`; true once the blank line is found.
  const auto special = [&](size_t i, bool* incomplete) {
    if (in[i] == '\n') {
      if (i == 0 || in[i - 1] != '\r')
        ec = http::error::bad_line_ending;
      return false;  // else the LF of a CRLF already taken
    }
    if (in[i] != '\r') {
      ec = http::error::bad_value;
      return false;
    }
    if (i + 1 == in.size()) {
      *incomplete = true;
      return false;
    }
    if (in[i + 1] != '\n') {
      ec = http::error::bad_line_ending;
      return false;
    }
    if (i == line_start && !ends->empty()) {
      *used = i + 2;
      return true;
    }
    ends->push_back(static_cast<uint32_t>(i));
    line_start = i + 2;
    return false;
  };
  bool incomplete = false;
  size_t block = start;
  for (; block + 16 <= in.size(); block += 16) {
    for (uint32_t mask = SpecialBytes16(in.data() + block); mask != 0; mask &= mask - 1) {
      if (special(block + static_cast<size_t>(__builtin_ctz(mask)), &incomplete))
        return true;
      if (ec || incomplete)
        return false;
    }
  }
  for (size_t i = block; i < in.size(); ++i) {
    if (!IsFieldValueChar(in[i])) {
      if (special(i, &incomplete))
        return true;
      if (ec || incomplete)
        return false;
    }
  }
  return false;
}

}  // namespace

size_t Http1Parser::put(asio::const_buffer bytes, ErrorCode& ec) {
  ec = {};
  piece_ = {};
  const std::string_view in(static_cast<const char*>(bytes.data()), bytes.size());
  got_some_ = got_some_ || !in.empty();
  size_t used = 0;
  while (true) {
    const std::string_view rest = in.substr(used);
    if (state_ == State::kDone)
      return used;
    if (state_ == State::kHead)
      return PutHead(rest, ec);
    if (rest.empty()) {
      ec = http::error::need_more;
      return used;
    }
    switch (state_) {
      case State::kLength:
      case State::kChunkData:
        return used + TakePieceOf(rest);
      case State::kUntilClose:
        body_bytes_ += rest.size();
        if (body_bytes_ > body_limit_) {
          ec = http::error::body_limit;
          return used;
        }
        piece_ = rest;
        return used + rest.size();
      case State::kChunkEnd:
        if (rest.size() < kCrlf.size()) {
          ec = http::error::need_more;
          return used;
        }
        if (rest.substr(0, kCrlf.size()) != kCrlf) {
          ec = http::error::bad_chunk;
          return used;
        }
        used += kCrlf.size();
        state_ = State::kChunkSize;
        break;
      case State::kChunkSize:
      case State::kTrailer: {
        const size_t eol = rest.find(kCrlf);
        const size_t line_limit =
            state_ == State::kChunkSize ? kMaxChunkLineBytes : header_limit_ - trailer_bytes_;
        if (eol == std::string_view::npos || eol + kCrlf.size() > line_limit) {
          if (rest.size() >= line_limit) {
            ec = state_ == State::kChunkSize ? http::error::bad_chunk : http::error::header_limit;
          } else {
            ec = HasBareLf(rest) ? http::error::bad_line_ending : http::error::need_more;
          }
          return used;
        }
        const std::string_view line = rest.substr(0, eol);
        used += eol + kCrlf.size();
        if (state_ == State::kChunkSize) {
          ParseChunkSize(line, ec);
        } else if (line.empty()) {
          state_ = State::kDone;
        } else {
          // Trailer fields are checked as header fields are, and dropped.
          trailer_bytes_ += eol + kCrlf.size();
          const size_t colon = line.find(':');
          if (colon == 0 || colon == std::string_view::npos ||
              !AllTokenChars(line.substr(0, colon)) ||
              !AllFieldValueChars(line.substr(colon + 1))) {
            ec = http::error::bad_field;
          }
        }
        if (ec)
          return used;
        break;
      }
      case State::kHead:
      case State::kDone:
        break;
    }
  }
}

void Http1Parser::put_eof(ErrorCode& ec) {
  ec = {};
  if (state_ == State::kUntilClose) {
    state_ = State::kDone;
    return;
  }
  if (state_ != State::kDone)
    ec = http::error::partial_message;
}

bool Http1Parser::keep_alive() const {
  if (until_close_ || close_)
    return false;
  return version_ >= 11 || keep_alive_token_;
}

size_t Http1Parser::PutHead(std::string_view in, ErrorCode& ec) {
  // RFC 9112 2.2: a server ignores empty lines before the request line.
  size_t start = 0;
  if (kind_ == Kind::kRequest) {
    while (in.substr(start, kCrlf.size()) == kCrlf)
      start += kCrlf.size();
  }
  LineEnds line_ends;
  size_t used = 0;
  const std::string_view window = in.substr(0, header_limit_);
  if (!ScanHead(window, start, &line_ends, &used, ec)) {
    if (!ec)
      ec = in.size() >= header_limit_ ? http::error::header_limit : http::error::need_more;
    return 0;
  }
  const std::string_view start_line = in.substr(start, line_ends[0] - start);
  if (kind_ == Kind::kRequest) {
    ParseRequestLine(start_line, ec);
  } else {
    ParseStatusLine(start_line, ec);
  }
  if (ec)
    return 0;
  // Each field is written into its place, no temporary strings moved in; into the strings
  // already there when headers_ is an earlier message's list, which keep their room.
  const size_t fields = line_ends.size() - 1;
  headers_.reserve(fields);
  for (size_t i = 0; i < fields; ++i) {
    if (i == headers_.size())
      headers_.emplace_back();
    const size_t begin = line_ends[i] + kCrlf.size();
    ParseField(in.substr(begin, line_ends[i + 1] - begin), &headers_[i], ec);
    if (ec)
      return 0;
  }
  headers_.resize(fields);
  StartBody(ec);
  return ec ? 0 : used;
}

void Http1Parser::ParseRequestLine(std::string_view line, ErrorCode& ec) {
  // method SP request-target SP HTTP-version
  size_t i = 0;
  while (i < line.size() && IsTokenChar(line[i]))
    ++i;
  if (i == 0 || i == line.size() || line[i] != ' ') {
    ec = http::error::bad_method;
    return;
  }
  method_.assign(line.data(), i);
  const size_t target_begin = ++i;
  while (i < line.size() && line[i] > ' ' && line[i] < 0x7f)
    ++i;
  if (i == target_begin || i == line.size() || line[i] != ' ') {
    ec = http::error::bad_target;
    return;
  }
  target_.assign(line.data() + target_begin, i - target_begin);
  version_ = ParseVersion(line.substr(i + 1));
  if (version_ < 0)
    ec = http::error::bad_version;
}

void Http1Parser::ParseStatusLine(std::string_view line, ErrorCode& ec) {
  // HTTP-version SP 3DIGIT [SP reason-phrase]
  version_ = ParseVersion(line.substr(0, 8));
  if (version_ < 0) {
    ec = http::error::bad_version;
    return;
  }
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (i >= line.size() || line[i] < '0' || line[i] > '9')
      break;
    status = status * 10 + (line[i] - '0');
  }
  if (line.size() < 12 || line[8] != ' ' || status < 100) {
    ec = http::error::bad_status;
    return;
  }
  status_ = status;
  const std::string_view reason = line.substr(12);
  // ScanHead has ruled out controls in the reason.
  if (!reason.empty() && reason[0] != ' ')
    ec = http::error::bad_reason;
}

void Http1Parser::ParseField(std::string_view line, HeaderList::value_type* field, ErrorCode& ec) {
  // field-name ":" OWS field-value OWS; a line that starts with a space is obs-fold.
  // The name up to the first colon, lower-cased and checked in one pass.
  const size_t colon = line.find(':');
  if (colon == 0 || colon == std::string_view::npos) {
    ec = http::error::bad_field;
    return;
  }
  // clear and append: cheaper than assign, which allows for overlapping bytes.
  std::string& name = field->first;
  name.clear();
  name.append(line.data(), colon);
  for (char& c : name) {
    c = kLowerTokenChars[static_cast<unsigned char>(c)];
    if (c == 0) {
      ec = http::error::bad_field;
      return;
    }
  }
  // ScanHead has ruled out controls in the value.
  const std::string_view value = TrimOws(line.substr(colon + 1));
  // The fields the framing depends on. Names are lower-case now; lengths rule most out.
  switch (name.size()) {
    case 6:  // expect
      if (name == "expect" && EqualsIgnoreCase(value, "100-continue"))
        expects_continue_ = true;
      break;
    case 10:  // connection
      if (name == "connection") {
        ForEachListElement(value, [this](std::string_view token) {
          close_ = close_ || EqualsIgnoreCase(token, "close");
          keep_alive_token_ = keep_alive_token_ || EqualsIgnoreCase(token, "keep-alive");
        });
      }
      break;
    case 14:  // content-length
      if (name == "content-length") {
        uint64_t length = 0;
        const bool digits =
            !value.empty() && value.size() <= 18 &&
            std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!digits || content_length_.has_value()) {
          ec = http::error::bad_content_length;
          return;
        }
        for (const char c : value)
          length = length * 10 + static_cast<uint64_t>(c - '0');
        content_length_ = length;
      }
      break;
    case 17:  // transfer-encoding
      if (name == "transfer-encoding") {
        transfer_encoding_ = true;
        bool bad = false;
        ForEachListElement(value, [this, &bad](std::string_view coding) {
          // chunked must be the last coding, and there only once.
          bad = bad || chunked_;
          chunked_ = EqualsIgnoreCase(coding, "chunked");
        });
        if (bad) {
          ec = http::error::bad_transfer_encoding;
          return;
        }
      }
      break;
    default:
      break;
  }
  field->second.clear();
  field->second.append(value.data(), value.size());
}

void Http1Parser::StartBody(ErrorCode& ec) {
  if (kind_ == Kind::kRequest) {
    // RFC 9112 6.1, 6.3: a request whose length the last coding does not give, or that has
    // both a Content-Length and a Transfer-Encoding, is refused.
    if (transfer_encoding_ && (!chunked_ || content_length_.has_value())) {
      ec = http::error::bad_transfer_encoding;
      return;
    }
  } else if (skip_body_ || status_ < 200 || status_ == 204 || status_ == 304) {
    state_ = State::kDone;  // no body, whatever the fields say
    return;
  }
  if (chunked_) {
    state_ = State::kChunkSize;
    return;
  }
  if (transfer_encoding_) {
    until_close_ = true;  // a response with codings we do not decode
    state_ = State::kUntilClose;
    return;
  }
  if (content_length_.has_value()) {
    if (*content_length_ > body_limit_) {
      ec = http::error::body_limit;
      return;
    }
    remaining_ = *content_length_;
    state_ = remaining_ == 0 ? State::kDone : State::kLength;
    return;
  }
  until_close_ = kind_ == Kind::kResponse;
  state_ = until_close_ ? State::kUntilClose : State::kDone;
}

void Http1Parser::ParseChunkSize(std::string_view line, ErrorCode& ec) {
  // chunk-size [BWS ";" chunk-ext]; extensions are ignored, but must be visible text.
  uint64_t size = 0;
  size_t i = 0;
  for (; i < line.size(); ++i) {
    const char c = line[i];
    int digit = -1;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    }
    if (digit < 0)
      break;
    if (size >> 60 != 0) {
      ec = http::error::bad_chunk;  // over 2^64
      return;
    }
    size = size * 16 + static_cast<uint64_t>(digit);
  }
  if (i == 0) {
    ec = http::error::bad_chunk;
    return;
  }
  const std::string_view ext = TrimOws(line.substr(i));
  if (!ext.empty() && (ext[0] != ';' || !AllFieldValueChars(ext))) {
    ec = http::error::bad_chunk_extension;
    return;
  }
  if (size == 0) {
    state_ = State::kTrailer;
    return;
  }
  if (size > body_limit_ - body_bytes_) {
    ec = http::error::body_limit;
    return;
  }
  body_bytes_ += size;
  remaining_ = size;
  state_ = State::kChunkData;
}

size_t Http1Parser::TakePieceOf(std::string_view in) {
  const size_t take = static_cast<size_t>(std::min<uint64_t>(in.size(), remaining_));
  piece_ = in.substr(0, take);
  remaining_ -= take;
  if (remaining_ == 0)
    state_ = state_ == State::kLength ? State::kDone : State::kChunkEnd;
  return take;
}

}  // namespace switchyard::net::internal
