// Number filters: int, float, abs, round.
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/filter_helpers.h"

namespace switchyard::text::jinja {
namespace {

absl::StatusOr<Value> FInt(Interpreter&, const Value& v, CallArgs& args) {
  const Value* dflt = Arg(args, 0, "default");
  Value fallback = dflt != nullptr ? *dflt : Value(int64_t{0});
  if (v.is_bool() || v.is_int())
    return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double()))
      return fallback;
    return Value(static_cast<int64_t>(v.as_double()));
  }
  if (v.is_string()) {
    std::string s = Strip(v.as_string(), nullptr, true, true);
    std::string digits;
    for (char c : s) {
      if (c != '_')
        digits += c;
    }
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(digits.c_str(), &end, 10);
    if (!digits.empty() && *end == '\0' && errno == 0)
      return Value(static_cast<int64_t>(n));
    double d = std::strtod(digits.c_str(), &end);
    if (!digits.empty() && *end == '\0' && std::isfinite(d))
      return Value(static_cast<int64_t>(d));
  }
  return fallback;
}

absl::StatusOr<Value> FFloat(Interpreter&, const Value& v, CallArgs& args) {
  const Value* dflt = Arg(args, 0, "default");
  Value fallback = dflt != nullptr ? *dflt : Value(0.0);
  if (v.is_number())
    return Value(v.as_double());
  if (v.is_string()) {
    std::string s = Strip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0')
      return Value(d);
  }
  return fallback;
}

absl::StatusOr<Value> FAbs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_float())
    return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN)
      return absl::OutOfRangeError("OverflowError: integer overflow");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  return WantType("abs", "a number", v);
}

absl::StatusOr<Value> FRound(Interpreter&, const Value& v, CallArgs& args) {
  if (!v.is_number())
    return WantType("round", "a number", v);
  int64_t precision = 0;
  if (const Value* p = Arg(args, 0, "precision"); p != nullptr && p->is_int())
    precision = p->as_int();
  std::string method = "common";
  if (const Value* m = Arg(args, 1, "method"); m != nullptr && m->is_string())
    method = m->as_string();
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  if (method == "common") {
    x = std::nearbyint(x);  // Python rounds halves to even.
  } else if (method == "ceil") {
    x = std::ceil(x);
  } else if (method == "floor") {
    x = std::floor(x);
  } else {
    return absl::InvalidArgumentError("FilterArgumentError: method must be common, ceil or floor");
  }
  return Value(x / scale);
}

}  // namespace

std::span<const FilterEntry> NumberFilters() {
  static constexpr FilterEntry kTable[] = {
      {"abs", FAbs},
      {"float", FFloat},
      {"int", FInt},
      {"round", FRound},
  };
  return kTable;
}

}  // namespace switchyard::text::jinja
