#include "base/json.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "fmt/format.h"

#include "base/file.h"
#include "base/status_macros.h"
#include "base/utf8.h"

namespace switchyard::base {
namespace {

// simdjson's DOM rejects integers beyond 64 bits, which Python writes into configs (e.g.
// model_max_length = 1000000000000000019884624838656). Python reads them as exact big
// integers; the closest we keep is a float, the one change that leaves the rest of the
// document as it is. Only used after a NUMBER_ERROR, so well-formed documents pay nothing.
std::string WidenHugeIntegers(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < json.size()) {
        out += json[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"')
      in_string = true;
    if (c >= '0' && c <= '9' && (i == 0 || !(json[i - 1] >= '0' && json[i - 1] <= '9'))) {
      size_t end = i;
      while (end < json.size() && json[end] >= '0' && json[end] <= '9')
        ++end;
      bool is_integer =
          end >= json.size() || (json[end] != '.' && json[end] != 'e' && json[end] != 'E');
      out.append(json.substr(i, end - i));
      if (is_integer && end - i > 18)
        out += ".0";
      i = end - 1;
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JsonDocument>> JsonDocument::Parse(std::string_view text,
                                                                  std::string_view source) {
  std::unique_ptr<JsonDocument> doc(new JsonDocument());
  simdjson::dom::element root;
  auto error = doc->parser_.parse(text.data(), text.size()).get(root);
  if (error == simdjson::NUMBER_ERROR) {
    const std::string widened = WidenHugeIntegers(text);
    error = doc->parser_.parse(widened.data(), widened.size()).get(root);
  }
  if (error) {
    return absl::InvalidArgumentError(
        fmt::format("{}: invalid JSON: {}", source, simdjson::error_message(error)));
  }
  doc->root_ = root;
  return doc;
}

absl::StatusOr<std::unique_ptr<JsonDocument>> JsonDocument::ParseFile(const std::string& path) {
  SY_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return Parse(text, path);
}

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        default:
          if (c < 0x20) {
            absl::StrAppendFormat(out, "\\u%04x", c);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    const Utf8Decoded d = DecodeUtf8(s.substr(i));
    const uint32_t cp = d.valid ? d.code_point : 0xFFFD;
    if (ensure_ascii) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        absl::StrAppendFormat(out, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        absl::StrAppendFormat(out, "\\u%04x", cp);
      }
    } else if (d.valid) {
      out->append(s.substr(i, d.length));
    } else {
      out->append("\xEF\xBF\xBD");
    }
    i += d.length;
  }
  out->push_back('"');
}

std::string JsonString(std::string_view s, bool ensure_ascii) {
  std::string out;
  AppendJsonString(s, ensure_ascii, &out);
  return out;
}

}  // namespace switchyard::base
