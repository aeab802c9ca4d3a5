// Scanning of model output that is still being generated: JSON values and tool-call objects
// that may be cut short, and text that may end in the first bytes of a marker. What the
// scanners report about a prefix of a text stays true of the whole text, which is what lets
// a stream send a tool call's name and argument fragments before the call is complete.
// Never trusts its input: garbage is reported as malformed, never read past its end.
// Stateless functions; any thread.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "api/tool_parser.h"

namespace switchyard::api::internal {

size_t SkipSpace(std::string_view text, size_t pos);

// Where text up to a possible `marker` ends: the marker's position when the text holds it,
// else the text's size less a tail that could be the marker's first bytes.
size_t HeldBackEnd(std::string_view text, std::string_view marker);

struct ValueScan {
  size_t end = 0;         // past the value (complete), or the text's size
  bool complete = false;  // a scalar that ends the text may go on: not complete
  bool malformed = false;
};

// The JSON value whose first byte is text[pos] (strings, objects and arrays by their
// brackets, scalars up to a delimiter). Checks nesting only, not the grammar inside.
ValueScan ScanValue(std::string_view text, size_t pos);

// A tool call object {"name": "...", <args key>: {...}, ...} as far as the text holds it.
struct CallScan {
  bool name_done = false;
  std::string name;  // unescaped, once name_done
  bool has_args = false;
  size_t args_begin = 0;  // the arguments value's span in the text, so far
  size_t args_end = 0;
  bool object_done = false;
  size_t end = 0;  // past the closing brace, once object_done
  bool malformed = false;
};

// Scans the object whose '{' is text[pos]. The arguments are the value of the first key
// present among `args_keys`.
CallScan ScanCallObject(std::string_view text, size_t pos,
                        std::initializer_list<std::string_view> args_keys);

// True when text[begin, end) parses as one JSON object with a string "name" and, when
// `args_keys` is not empty, one of them: what vLLM's json.loads of a finished call demands.
bool IsCompleteCall(std::string_view object_text,
                    std::initializer_list<std::string_view> args_keys);

// The call `scan` found in `text` (its name and its arguments so far).
ParsedToolCall ToParsedToolCall(std::string_view text, const CallScan& scan);

// Scans a JSON array of call objects whose '[' is text[pos], appending each call whose name is
// known. `final`: the text is complete, so a cut-short or invalid call fails the array. False
// when the array is malformed (or, when final, incomplete).
bool ScanCallArray(std::string_view text, size_t pos,
                   std::initializer_list<std::string_view> args_keys, bool final,
                   std::vector<ParsedToolCall>* calls);

}  // namespace switchyard::api::internal
