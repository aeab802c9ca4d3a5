#include "api/internal/partial_json.h"

#include <algorithm>

#include "simdjson.h"

namespace switchyard::api::internal {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// A complete JSON string token (quotes included) as text.
std::string Unescape(std::string_view token) {
  if (token.find('\\') == std::string_view::npos)
    return std::string(token.substr(1, token.size() - 2));
  simdjson::dom::parser parser;
  std::string_view value;
  if (parser.parse(std::string(token)).get(value) != simdjson::SUCCESS)
    return std::string(token.substr(1, token.size() - 2));
  return std::string(value);
}

}  // namespace

size_t SkipSpace(std::string_view text, size_t pos) {
  while (pos < text.size() && IsSpace(text[pos]))
    ++pos;
  return pos;
}

size_t HeldBackEnd(std::string_view text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at != std::string_view::npos)
    return at;
  for (size_t keep = std::min(text.size(), marker.size() - 1); keep > 0; --keep) {
    if (text.substr(text.size() - keep) == marker.substr(0, keep))
      return text.size() - keep;
  }
  return text.size();
}

ValueScan ScanValue(std::string_view text, size_t pos) {
  ValueScan scan;
  scan.end = text.size();
  if (pos >= text.size())
    return scan;
  const char first = text[pos];
  if (first == '"' || first == '{' || first == '[') {
    std::string open;  // the brackets still open, innermost last
    bool in_string = false;
    for (size_t i = pos; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          in_string = false;
          if (open.empty()) {
            scan.end = i + 1;
            scan.complete = true;
            return scan;
          }
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        open.push_back(c);
      } else if (c == '}' || c == ']') {
        if (open.empty() || open.back() != (c == '}' ? '{' : '[')) {
          scan.malformed = true;
          return scan;
        }
        open.pop_back();
        if (open.empty()) {
          scan.end = i + 1;
          scan.complete = true;
          return scan;
        }
      }
    }
    return scan;
  }
  size_t i = pos;
  while (i < text.size() && !IsSpace(text[i]) && text[i] != ',' && text[i] != '}' &&
         text[i] != ']') {
    ++i;
  }
  if (i == pos) {
    scan.malformed = true;
    return scan;
  }
  scan.end = i;
  scan.complete = i < text.size();
  return scan;
}

CallScan ScanCallObject(std::string_view text, size_t pos,
                        std::initializer_list<std::string_view> args_keys) {
  CallScan scan;
  if (pos >= text.size() || text[pos] != '{') {
    scan.malformed = true;
    return scan;
  }
  size_t i = pos + 1;
  while (true) {
    i = SkipSpace(text, i);
    if (i >= text.size())
      return scan;
    if (text[i] == '}') {
      scan.object_done = true;
      scan.end = i + 1;
      return scan;
    }
    if (text[i] != '"') {
      scan.malformed = true;
      return scan;
    }
    const ValueScan key_scan = ScanValue(text, i);
    if (!key_scan.complete)
      return scan;
    const std::string_view key = text.substr(i + 1, key_scan.end - i - 2);
    i = SkipSpace(text, key_scan.end);
    if (i >= text.size())
      return scan;
    if (text[i] != ':') {
      scan.malformed = true;
      return scan;
    }
    i = SkipSpace(text, i + 1);
    if (i >= text.size())
      return scan;
    const ValueScan value = ScanValue(text, i);
    if (value.malformed) {
      scan.malformed = true;
      return scan;
    }
    const bool is_args =
        !scan.has_args && std::find(args_keys.begin(), args_keys.end(), key) != args_keys.end();
    if (is_args) {
      scan.has_args = true;
      scan.args_begin = i;
      scan.args_end = value.end;
    }
    if (!value.complete)
      return scan;
    if (key == "name" && !scan.name_done) {
      if (text[i] != '"') {
        scan.malformed = true;
        return scan;
      }
      scan.name = Unescape(text.substr(i, value.end - i));
      scan.name_done = true;
    }
    i = SkipSpace(text, value.end);
    if (i >= text.size())
      return scan;
    if (text[i] == '}') {
      scan.object_done = true;
      scan.end = i + 1;
      return scan;
    }
    if (text[i] != ',') {
      scan.malformed = true;
      return scan;
    }
    ++i;
  }
}

ParsedToolCall ToParsedToolCall(std::string_view text, const CallScan& scan) {
  ParsedToolCall call{scan.name, ""};
  if (scan.has_args)
    call.arguments = std::string(text.substr(scan.args_begin, scan.args_end - scan.args_begin));
  return call;
}

bool IsCompleteCall(std::string_view object_text,
                    std::initializer_list<std::string_view> args_keys) {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  if (parser.parse(std::string(object_text)).get(object) != simdjson::SUCCESS)
    return false;
  std::string_view name;
  if (object["name"].get(name) != simdjson::SUCCESS)
    return false;
  if (args_keys.size() == 0)
    return true;
  for (std::string_view key : args_keys) {
    if (object[key].error() == simdjson::SUCCESS)
      return true;
  }
  return false;
}

bool ScanCallArray(std::string_view text, size_t pos,
                   std::initializer_list<std::string_view> args_keys, bool final,
                   std::vector<ParsedToolCall>* calls) {
  if (pos >= text.size() || text[pos] != '[')
    return false;
  size_t i = pos + 1;
  while (true) {
    i = SkipSpace(text, i);
    if (i >= text.size())
      return !final;
    if (text[i] == ']')
      return true;
    const CallScan scan = ScanCallObject(text, i, args_keys);
    if (scan.malformed)
      return false;
    if (scan.name_done)
      calls->push_back(ToParsedToolCall(text, scan));
    if (!scan.object_done)
      return !final;
    if (final && !IsCompleteCall(text.substr(i, scan.end - i), args_keys))
      return false;
    i = SkipSpace(text, scan.end);
    if (i >= text.size())
      return !final;
    if (text[i] == ',') {
      ++i;
    } else if (text[i] != ']') {
      return false;
    }
  }
}

}  // namespace switchyard::api::internal
