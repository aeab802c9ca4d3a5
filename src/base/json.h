// JSON helpers shared by every library: parsing (simdjson DOM) into a document that owns
// its buffers, and writing strings the way Python's json.dumps does. A JsonDocument is
// immutable after parsing and may be read from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "simdjson.h"

namespace switchyard::base {

class JsonDocument {
 public:
  // Parses `text`; `source` names the origin in error messages.
  static absl::StatusOr<std::unique_ptr<JsonDocument>> Parse(std::string_view text,
                                                             std::string_view source);
  static absl::StatusOr<std::unique_ptr<JsonDocument>> ParseFile(const std::string& path);

  simdjson::dom::element root() const { return root_; }

 private:
  JsonDocument() = default;
  simdjson::dom::parser parser_;
  simdjson::dom::element root_;
};

// Appends `s` as a quoted JSON string. With ensure_ascii, every non-ASCII code point is
// written as \uXXXX (surrogate pairs above U+FFFF), as Python's json.dumps does; invalid
// UTF-8 bytes are written as U+FFFD.
void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out);
std::string JsonString(std::string_view s, bool ensure_ascii = false);

}  // namespace switchyard::base
