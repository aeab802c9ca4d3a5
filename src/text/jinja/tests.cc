// Jinja's builtin tests (`x is defined`, `x is divisibleby(3)`, ...).
#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/builtins.h"

namespace switchyard::text::jinja {
namespace {

absl::StatusOr<bool> TDefined(Interpreter&, const Value& v, CallArgs&) {
  return !v.is_undefined();
}

absl::StatusOr<bool> TUndefined(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined();
}

absl::StatusOr<bool> TNone(Interpreter&, const Value& v, CallArgs&) {
  return v.is_none();
}

absl::StatusOr<bool> TBoolean(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool();
}

absl::StatusOr<bool> TTrue(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool() && v.as_bool();
}

absl::StatusOr<bool> TFalse(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool() && !v.as_bool();
}

absl::StatusOr<bool> TInteger(Interpreter&, const Value& v, CallArgs&) {
  return v.is_int();
}

absl::StatusOr<bool> TFloat(Interpreter&, const Value& v, CallArgs&) {
  return v.is_float();
}

absl::StatusOr<bool> TNumber(Interpreter&, const Value& v, CallArgs&) {
  return v.is_number();
}

absl::StatusOr<bool> TString(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string();
}

absl::StatusOr<bool> TMapping(Interpreter&, const Value& v, CallArgs&) {
  return v.is_dict();
}

absl::StatusOr<bool> TSequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}

absl::StatusOr<bool> TIterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
}

absl::StatusOr<bool> TCallable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_callable() || (v.is_loop() && v.as_loop().stmt->recursive);
}

absl::StatusOr<bool> TLower(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && ToLower(v.as_string()) == v.as_string();
}

absl::StatusOr<bool> TUpper(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && ToUpper(v.as_string()) == v.as_string();
}

absl::StatusOr<bool> TEscaped(Interpreter&, const Value&, CallArgs&) {
  return false;
}

absl::StatusOr<Value> NeedArg(const CallArgs& args, std::string_view test) {
  const Value* a = Arg(args, 0, "");
  if (a == nullptr)
    return absl::InvalidArgumentError(fmt::format("TypeError: test '{}' needs an argument", test));
  return *a;
}

absl::StatusOr<bool> TOdd(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool())
    return absl::InvalidArgumentError("TypeError: odd needs an integer");
  return (v.as_int() % 2) != 0;
}

absl::StatusOr<bool> TEven(Interpreter&, const Value& v, CallArgs&) {
  if (!v.is_int() && !v.is_bool())
    return absl::InvalidArgumentError("TypeError: even needs an integer");
  return (v.as_int() % 2) == 0;
}

absl::StatusOr<bool> TDivisibleBy(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(Value n, NeedArg(args, "divisibleby"));
  SY_ASSIGN_OR_RETURN(Value m, BinaryOp("%", v, n, in));
  return Equals(m, Value(int64_t{0}));
}

absl::StatusOr<bool> TEq(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(Value x, NeedArg(args, "eq"));
  return Equals(v, x);
}

absl::StatusOr<bool> TNe(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(Value x, NeedArg(args, "ne"));
  return !Equals(v, x);
}

template <int kOp>
absl::StatusOr<bool> TCompare(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(Value x, NeedArg(args, "comparison"));
  constexpr std::string_view kOps[] = {"<", "<=", ">", ">="};
  SY_ASSIGN_OR_RETURN(Value r, BinaryOp(kOps[kOp], v, x, in));
  return r.Truthy();
}

absl::StatusOr<bool> TIn(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(Value x, NeedArg(args, "in"));
  SY_ASSIGN_OR_RETURN(Value r, BinaryOp("in", v, x, in));
  return r.Truthy();
}

absl::StatusOr<bool> TSameAs(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(Value x, NeedArg(args, "sameas"));
  if (v.kind() != x.kind())
    return false;
  if (v.is_none() || v.is_bool() || v.is_undefined())
    return Equals(v, x);
  if (v.is_list())
    return &v.as_list() == &x.as_list();
  if (v.is_dict())
    return &v.as_dict() == &x.as_dict();
  return Equals(v, x);
}

absl::StatusOr<bool> TFilter(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && FindFilter(v.as_string()) != nullptr;
}

absl::StatusOr<bool> TTest(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && FindTest(v.as_string()) != nullptr;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"boolean", TBoolean},
    {"callable", TCallable},
    {"defined", TDefined},
    {"divisibleby", TDivisibleBy},
    {"eq", TEq},
    {"equalto", TEq},
    {"==", TEq},
    {"escaped", TEscaped},
    {"even", TEven},
    {"false", TFalse},
    {"filter", TFilter},
    {"float", TFloat},
    {"ge", TCompare<3>},
    {">=", TCompare<3>},
    {"gt", TCompare<2>},
    {">", TCompare<2>},
    {"greaterthan", TCompare<2>},
    {"in", TIn},
    {"integer", TInteger},
    {"iterable", TIterable},
    {"le", TCompare<1>},
    {"<=", TCompare<1>},
    {"lower", TLower},
    {"lt", TCompare<0>},
    {"<", TCompare<0>},
    {"lessthan", TCompare<0>},
    {"mapping", TMapping},
    {"ne", TNe},
    {"!=", TNe},
    {"none", TNone},
    {"number", TNumber},
    {"odd", TOdd},
    {"sameas", TSameAs},
    {"sequence", TSequence},
    {"string", TString},
    {"test", TTest},
    {"true", TTrue},
    {"undefined", TUndefined},
    {"upper", TUpper},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const auto& t : kTests) {
    if (t.name == name)
      return t.fn;
  }
  return nullptr;
}

}  // namespace switchyard::text::jinja
