// A request body handed to a parser, with how many readable bytes follow it in its buffer. The
// JSON parser reads up to kPaddingBytes past the text's end; a body followed by that much spare
// room is parsed where it lies, any other is first copied into the parser's padded buffer
// (a second copy of a large prompt). A plain value; it borrows the caller's bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace switchyard::api {

class RequestBody {
 public:
  // Spare room that lets a body be parsed in place (simdjson's SIMDJSON_PADDING; checked where
  // the parser is called). A buffer owner that wants in-place parses reserves
  // size + kPaddingBytes before it fills the body.
  static constexpr size_t kPaddingBytes = 64;

  // No spare room known: the parser copies.
  RequestBody(std::string_view text) : text_(text) {}  // NOLINT(google-explicit-constructor)
  RequestBody(const char* text) : text_(text) {}       // NOLINT(google-explicit-constructor)
  // The string's unused capacity is spare room. REQUIRES: `text` is not changed while the
  // body is parsed.
  RequestBody(const std::string& text)  // NOLINT(google-explicit-constructor)
      : text_(text), spare_bytes_(text.capacity() - text.size()) {}

  std::string_view text() const { return text_; }
  // Readable bytes after text().end(), owned by the same buffer.
  size_t spare_bytes() const { return spare_bytes_; }

 private:
  std::string_view text_;
  size_t spare_bytes_ = 0;
};

}  // namespace switchyard::api
