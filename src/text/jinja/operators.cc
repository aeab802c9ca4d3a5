// Python operators, subscripts and attribute lookup as Jinja's sandbox applies them.
#include <cmath>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/builtins.h"
#include "text/jinja/interpreter.h"

namespace switchyard::text::jinja {
namespace {

absl::Status TypeError(std::string_view op, const Value& a, const Value& b) {
  return absl::InvalidArgumentError(
      fmt::format("TypeError: unsupported operand type(s) for {}: '{}' and '{}'", op, a.TypeName(),
                  b.TypeName()));
}

absl::Status Overflow() {
  return absl::OutOfRangeError("OverflowError: integer overflow");
}
absl::Status ZeroDivision() {
  return absl::InvalidArgumentError("ZeroDivisionError: division by zero");
}

absl::StatusOr<Value> Repeat(const Value& seq, int64_t n, const Interpreter& in) {
  if (n < 0)
    n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty())
      SY_RETURN_IF_ERROR(
          in.CheckSize(s.size() * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX))));
    std::string out;
    out.reserve(s.size() * n);
    for (int64_t i = 0; i < n; ++i)
      out += s;
    return Value(std::move(out));
  }
  const List& l = seq.as_list();
  if (!l.items.empty()) {
    SY_RETURN_IF_ERROR(
        in.CheckSize(l.items.size() * 16 * static_cast<size_t>(std::min<int64_t>(n, INT32_MAX))));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < n; ++i)
    items.insert(items.end(), l.items.begin(), l.items.end());
  return Value::MakeList(std::move(items), l.is_tuple);
}

absl::StatusOr<Value> Arith(std::string_view op, const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    double x = a.as_double(), y = b.as_double();
    if (op == "+")
      return Value(x + y);
    if (op == "-")
      return Value(x - y);
    if (op == "*")
      return Value(x * y);
    if (op == "**")
      return Value(std::pow(x, y));
    if (y == 0.0)
      return ZeroDivision();
    if (op == "/")
      return Value(x / y);
    if (op == "//")
      return Value(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0)))
      m += y;
    return Value(m);
  }
  int64_t x = a.as_int(), y = b.as_int(), r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r))
      return Overflow();
    return Value(r);
  }
  if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r))
      return Overflow();
    return Value(r);
  }
  if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r))
      return Overflow();
    return Value(r);
  }
  if (op == "**") {
    if (y < 0)
      return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    r = 1;
    for (int64_t i = 0; i < y; ++i) {
      if (__builtin_mul_overflow(r, x, &r))
        return Overflow();
      if (r == 0 || r == 1)
        break;
    }
    if (r == 1 && x == -1 && (y % 2) == 1)
      r = -1;
    return Value(r);
  }
  if (op == "/") {
    if (y == 0)
      return ZeroDivision();
    return Value(static_cast<double>(x) / static_cast<double>(y));
  }
  if (y == 0)
    return ZeroDivision();
  if (x == INT64_MIN && y == -1)
    return Overflow();
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    --q;
    m += y;
  }
  return op == "//" ? Value(q) : Value(m);
}

// printf-style formatting: "%s" % value or "%s %d" % (a, b).
absl::StatusOr<Value> Percent(const std::string& fmt_str, const Value& args) {
  std::vector<Value> values;
  if (args.is_list() && args.as_list().is_tuple) {
    values = args.as_list().items;
  } else {
    values.push_back(args);
  }
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt_str.size(); ++i) {
    char c = fmt_str[i];
    if (c != '%') {
      out += c;
      continue;
    }
    size_t j = i + 1;
    std::string spec;
    while (j < fmt_str.size() &&
           std::string_view("-+ #0123456789.").find(fmt_str[j]) != std::string_view::npos) {
      spec += fmt_str[j++];
    }
    if (j >= fmt_str.size())
      return absl::InvalidArgumentError("ValueError: incomplete format");
    char conv = fmt_str[j];
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) {
      return absl::InvalidArgumentError("TypeError: not enough arguments for format string");
    }
    const Value& v = values[next++];
    switch (conv) {
      case 's': {
        SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
        out += s;
        break;
      }
      case 'r': {
        SY_ASSIGN_OR_RETURN(std::string s, ToRepr(v));
        out += s;
        break;
      }
      case 'd':
      case 'i':
        if (!v.is_number()) {
          return absl::InvalidArgumentError(
              fmt::format("TypeError: %d format: a real number is required, not {}", v.TypeName()));
        }
        out += fmt::format(fmt::runtime("{:" + spec + "d}"),
                           v.is_float() ? static_cast<int64_t>(v.as_double()) : v.as_int());
        break;
      case 'f':
      case 'e':
      case 'g':
        if (!v.is_number()) {
          return absl::InvalidArgumentError(
              fmt::format("TypeError: must be real number, not {}", v.TypeName()));
        }
        out += fmt::format(
            fmt::runtime("{:" + (spec.find('.') == std::string::npos ? spec + ".6" : spec) + conv +
                         "}"),
            v.as_double());
        break;
      default:
        return absl::InvalidArgumentError(
            fmt::format("ValueError: unsupported format character '{}'", conv));
    }
  }
  if (next < values.size() && args.is_list() && args.as_list().is_tuple) {
    return absl::InvalidArgumentError(
        "TypeError: not all arguments converted during string formatting");
  }
  return Value(std::move(out));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        return absl::InvalidArgumentError(fmt::format(
            "TypeError: 'in <string>' requires string as left operand, not {}", item.TypeName()));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list().items) {
        if (Equals(v, item))
          return true;
      }
      return false;
    case Value::Kind::kDict:
      return container.as_dict().Find(item) != nullptr;
    case Value::Kind::kUndefined:
    case Value::Kind::kNamespace:
      return false;
    default:
      return absl::InvalidArgumentError(
          fmt::format("TypeError: argument of type '{}' is not iterable", container.TypeName()));
  }
}

}  // namespace

absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b,
                               const Interpreter& in) {
  if (op == "==")
    return Value(Equals(a, b));
  if (op == "!=")
    return Value(!Equals(a, b));
  if (op == "in" || op == "not in") {
    SY_ASSIGN_OR_RETURN(bool found, Contains(b, a));
    return Value(op == "in" ? found : !found);
  }
  if (op == "~") {
    SY_ASSIGN_OR_RETURN(std::string x, ToStr(a));
    SY_ASSIGN_OR_RETURN(std::string y, ToStr(b));
    SY_RETURN_IF_ERROR(in.CheckSize(x.size() + y.size()));
    return Value(x + y);
  }
  if (a.is_undefined())
    return UndefinedError(a);
  if (b.is_undefined())
    return UndefinedError(b);
  if (op == "<") {
    SY_ASSIGN_OR_RETURN(bool r, LessThan(a, b));
    return Value(r);
  }
  if (op == ">") {
    SY_ASSIGN_OR_RETURN(bool r, LessThan(b, a));
    return Value(r);
  }
  if (op == "<=") {
    SY_ASSIGN_OR_RETURN(bool r, LessThan(b, a));
    return Value(!r);
  }
  if (op == ">=") {
    SY_ASSIGN_OR_RETURN(bool r, LessThan(a, b));
    return Value(!r);
  }
  if (a.is_number() && b.is_number())
    return Arith(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      SY_RETURN_IF_ERROR(in.CheckSize(a.as_string().size() + b.as_string().size()));
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.as_list().is_tuple == b.as_list().is_tuple) {
      std::vector<Value> items = a.as_list().items;
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return Value::MakeList(std::move(items), a.as_list().is_tuple);
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
      return Repeat(a, b.as_int(), in);
    }
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) {
      return Repeat(b, a.as_int(), in);
    }
  }
  if (op == "%" && a.is_string())
    return Percent(a.as_string(), b);
  return TypeError(op, a, b);
}

absl::StatusOr<Value> SliceValue(const Value& obj, const Value& start_v, const Value& stop_v,
                                 const Value& step_v) {
  if (obj.is_undefined())
    return UndefinedError(obj);
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (!v->is_none() && !v->is_int() && !v->is_bool()) {
      return absl::InvalidArgumentError(
          "TypeError: slice indices must be integers or None or have an __index__ method");
    }
  }
  int64_t step = step_v.is_none() ? 1 : step_v.as_int();
  if (step == 0)
    return absl::InvalidArgumentError("ValueError: slice step cannot be zero");
  std::vector<std::string_view> chars;
  int64_t len = 0;
  if (obj.is_string()) {
    chars = SplitCodePoints(obj.as_string());
    len = static_cast<int64_t>(chars.size());
  } else if (obj.is_list()) {
    len = static_cast<int64_t>(obj.as_list().items.size());
  } else {
    return absl::InvalidArgumentError(
        fmt::format("TypeError: '{}' object is not subscriptable", obj.TypeName()));
  }
  int64_t lower = step > 0 ? 0 : -1;
  int64_t upper = step > 0 ? len : len - 1;
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none())
      return dflt;
    int64_t i = v.as_int();
    if (i < 0) {
      i += len;
      if (i < lower)
        i = lower;
    } else if (i > upper) {
      i = upper;
    }
    return i;
  };
  int64_t start = clamp(start_v, step > 0 ? lower : upper);
  int64_t stop = clamp(stop_v, step > 0 ? upper : lower);
  if (obj.is_string()) {
    std::string out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
      out.append(chars[i]);
    return Value(std::move(out));
  }
  std::vector<Value> items;
  const auto& src = obj.as_list().items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    items.push_back(src[i]);
  return Value::MakeList(std::move(items), obj.as_list().is_tuple);
}

namespace {

Value Missing(const Value& obj, std::string_view name) {
  return Value::MakeUndefined(
      fmt::format("'{}' has no attribute '{}'",
                  obj.is_dict() ? std::string("dict object") : obj.TypeName() + " object", name));
}

Value BoundMethod(const Value& obj, std::string_view name) {
  auto c = std::make_shared<Callable>();
  c->name = std::string(name);
  c->fn = [obj, method = std::string(name)](Interpreter& in, CallArgs& args) {
    return CallMethod(in, obj, method, args);
  };
  return Value(std::shared_ptr<const Callable>(std::move(c)));
}

absl::StatusOr<Value> LoopAttr(const Value& obj, std::string_view name) {
  LoopState& loop = obj.as_loop();
  int64_t n = static_cast<int64_t>(loop.items->size());
  int64_t i = loop.index0;
  if (name == "index")
    return Value(i + 1);
  if (name == "index0")
    return Value(i);
  if (name == "revindex")
    return Value(n - i);
  if (name == "revindex0")
    return Value(n - i - 1);
  if (name == "first")
    return Value(i == 0);
  if (name == "last")
    return Value(i == n - 1);
  if (name == "length")
    return Value(n);
  if (name == "depth")
    return Value(static_cast<int64_t>(loop.depth0 + 1));
  if (name == "depth0")
    return Value(static_cast<int64_t>(loop.depth0));
  if (name == "previtem") {
    if (i == 0)
      return Value::MakeUndefined("there is no previous item");
    return (*loop.items)[i - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= n)
      return Value::MakeUndefined("there is no next item");
    return (*loop.items)[i + 1];
  }
  if (name == "cycle") {
    auto c = std::make_shared<Callable>();
    c->name = "cycle";
    c->fn = [i](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
      if (args.positional.empty())
        return absl::InvalidArgumentError("TypeError: no items for cycling given");
      return args.positional[i % args.positional.size()];
    };
    return Value(std::shared_ptr<const Callable>(std::move(c)));
  }
  if (name == "changed") {
    auto c = std::make_shared<Callable>();
    c->name = "changed";
    c->fn = [obj](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
      SY_ASSIGN_OR_RETURN(Value now, Value::MakeList(args.positional));
      LoopState& l = obj.as_loop();
      if (!l.last_changed.is_undefined() && Equals(l.last_changed, now))
        return Value(false);
      l.last_changed = now;
      return Value(true);
    };
    return Value(std::shared_ptr<const Callable>(std::move(c)));
  }
  return Value::MakeUndefined(fmt::format("'LoopContext object' has no attribute '{}'", name));
}

}  // namespace

absl::StatusOr<Value> Interpreter::GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined())
    return UndefinedError(obj);
  if (!name.empty() && name[0] == '_') {
    return Value::MakeUndefined(fmt::format("access to attribute '{}' is unsafe", name));
  }
  if (HasMethod(obj, name))
    return BoundMethod(obj, name);
  switch (obj.kind()) {
    case Value::Kind::kDict: {
      const Value* v = obj.as_dict().Find(name);
      return v != nullptr ? *v : Missing(obj, name);
    }
    case Value::Kind::kNamespace: {
      const Value* v = obj.as_namespace().Find(name);
      return v != nullptr ? *v : Missing(obj, name);
    }
    case Value::Kind::kLoop:
      return LoopAttr(obj, name);
    case Value::Kind::kList:
      if (obj.as_list().is_group && (name == "grouper" || name == "list"))
        return obj.as_list().items[name == "grouper" ? 0 : 1];
      return Missing(obj, name);
    default:
      return Missing(obj, name);
  }
}

absl::StatusOr<Value> Interpreter::GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined())
    return UndefinedError(obj);
  switch (obj.kind()) {
    case Value::Kind::kDict: {
      const Value* v = obj.as_dict().Find(key);
      if (v != nullptr)
        return *v;
      break;
    }
    case Value::Kind::kList:
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
          const auto& items = obj.as_list().items;
          int64_t n = static_cast<int64_t>(items.size());
          if (i < 0)
            i += n;
          if (i < 0 || i >= n)
            return Value::MakeUndefined(
                fmt::format("{} object has no element {}", obj.TypeName(), key.as_int()));
          return items[i];
        }
        auto chars = SplitCodePoints(obj.as_string());
        int64_t n = static_cast<int64_t>(chars.size());
        if (i < 0)
          i += n;
        if (i < 0 || i >= n)
          return Value::MakeUndefined(fmt::format("str object has no element {}", key.as_int()));
        return Value(std::string(chars[i]));
      }
      break;
    default:
      break;
  }
  if (key.is_string())
    return GetAttr(obj, key.as_string());
  return Value::MakeUndefined(fmt::format("'{}' object has no element", obj.TypeName()));
}

}  // namespace switchyard::text::jinja
