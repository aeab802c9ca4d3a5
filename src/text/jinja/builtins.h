// Jinja's builtin filters, tests, global functions and the Python methods templates call on
// str, dict and list values. All are stateless functions, safe to share across threads.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "text/jinja/case_map.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace switchyard::text::jinja {

using FilterFn = absl::StatusOr<Value> (*)(Interpreter&, const Value&, CallArgs&);
using TestFn = absl::StatusOr<bool> (*)(Interpreter&, const Value&, CallArgs&);

// nullptr when there is no such filter or test.
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);

// True when `obj` (a str, dict or list) has a method `name`.
bool HasMethod(const Value& obj, std::string_view name);
// Calls obj.name(args). REQUIRES: HasMethod(obj, name).
absl::StatusOr<Value> CallMethod(Interpreter& in, const Value& obj, std::string_view name,
                                 CallArgs& args);

// The globals transformers gives templates: range, dict, namespace, raise_exception,
// strftime_now, cycler, joiner.
std::vector<std::pair<std::string, Value>> MakeGlobals();

// Python str.isspace() of one code point (what str.split() and re's \s split on).
bool IsPyWhitespace(uint32_t cp);
// str.strip / lstrip / rstrip; `chars` null strips whitespace.
std::string Strip(std::string_view s, const std::string* chars, bool left, bool right);

// Python's str.format(*args, **kwargs) on `s` (string_format.cc).
absl::StatusOr<Value> PyStrFormat(Interpreter& in, const std::string& s, CallArgs& args);

// Argument helper: positional `index`, else keyword `name`, else nullptr.
const Value* Arg(const CallArgs& args, size_t index, std::string_view name);

}  // namespace switchyard::text::jinja
