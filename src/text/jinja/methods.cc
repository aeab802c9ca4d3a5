// Python methods of str, dict and list that templates call, and the global functions.
#include <cstdlib>
#include <ctime>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "base/utf8.h"
#include "text/jinja/builtins.h"

namespace switchyard::text::jinja {
namespace {

// Sandbox limit on range() length, as jinja2.sandbox.MAX_RANGE.
constexpr int64_t kMaxRange = 100000;

absl::Status ArgError(std::string_view method, std::string_view want) {
  return absl::InvalidArgumentError(
      fmt::format("TypeError: {}() argument must be {}", method, want));
}

absl::StatusOr<const std::string*> OptString(const CallArgs& args, size_t i, std::string_view name,
                                             std::string_view method) {
  const Value* v = Arg(args, i, name);
  if (v == nullptr || v->is_none())
    return nullptr;
  if (!v->is_string())
    return ArgError(method, "str or None");
  return &v->as_string();
}

absl::StatusOr<Value> Split(const std::string& s, const CallArgs& args, bool from_right) {
  SY_ASSIGN_OR_RETURN(const std::string* sep, OptString(args, 0, "sep", "split"));
  int64_t maxsplit = -1;
  if (const Value* m = Arg(args, 1, "maxsplit"); m != nullptr) {
    if (!m->is_int())
      return ArgError("split", "int");
    maxsplit = m->as_int();
  }
  std::vector<std::string> parts;
  if (sep == nullptr) {
    std::vector<std::string_view> cps = SplitCodePoints(s);
    auto is_ws = [&](size_t i) {
      base::Utf8Decoded d = base::DecodeUtf8(cps[i]);
      return d.valid && IsPyWhitespace(d.code_point);
    };
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_ws(i))
        ++i;
      if (i >= cps.size())
        break;
      size_t start = i;
      while (i < cps.size() && !is_ws(i))
        ++i;
      words.emplace_back(start, i);
    }
    auto join = [&](size_t a, size_t b) {
      std::string out;
      for (size_t k = a; k < b; ++k)
        out.append(cps[k]);
      return out;
    };
    if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
      for (auto [a, b] : words)
        parts.push_back(join(a, b));
    } else if (!from_right) {
      for (int64_t k = 0; k < maxsplit; ++k)
        parts.push_back(join(words[k].first, words[k].second));
      size_t rest = words[maxsplit].first;
      std::string tail = join(rest, cps.size());
      while (!tail.empty() && IsPyWhitespace(static_cast<unsigned char>(tail.back())))
        tail.pop_back();
      parts.push_back(tail);
    } else {
      size_t first = words.size() - maxsplit;
      std::string head = join(0, words[first - 1].second);
      size_t lead = 0;
      while (lead < head.size() && IsPyWhitespace(static_cast<unsigned char>(head[lead])))
        ++lead;
      parts.push_back(head.substr(lead));
      for (size_t k = first; k < words.size(); ++k)
        parts.push_back(join(words[k].first, words[k].second));
    }
  } else {
    if (sep->empty())
      return absl::InvalidArgumentError("ValueError: empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string::npos)
          break;
        parts.push_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.push_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep->size())
          break;
        size_t hit = s.rfind(*sep, end - sep->size());
        if (hit == std::string::npos)
          break;
        rev.push_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts)
    items.emplace_back(std::move(p));
  return Value::MakeList(std::move(items));
}

absl::StatusOr<Value> AffixTest(const std::string& s, const CallArgs& args, bool prefix) {
  const Value* a = Arg(args, 0, "");
  if (a == nullptr)
    return absl::InvalidArgumentError("TypeError: startswith/endswith needs an argument");
  std::vector<const std::string*> options;
  if (a->is_string()) {
    options.push_back(&a->as_string());
  } else if (a->is_list() && a->as_list().is_tuple) {
    for (const Value& v : a->as_list().items) {
      if (!v.is_string())
        return ArgError(prefix ? "startswith" : "endswith", "str or a tuple of str");
      options.push_back(&v.as_string());
    }
  } else {
    return ArgError(prefix ? "startswith" : "endswith", "str or a tuple of str");
  }
  for (const std::string* o : options) {
    if (o->size() <= s.size() && (prefix ? s.compare(0, o->size(), *o) == 0
                                         : s.compare(s.size() - o->size(), o->size(), *o) == 0)) {
      return Value(true);
    }
  }
  return Value(false);
}

absl::StatusOr<Value> StringMethod(Interpreter& in, const std::string& s, std::string_view name,
                                   CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    SY_ASSIGN_OR_RETURN(const std::string* chars, OptString(args, 0, "chars", name));
    return Value(Strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "format")
    return PyStrFormat(in, s, args);
  if (name == "split")
    return Split(s, args, false);
  if (name == "rsplit")
    return Split(s, args, true);
  if (name == "startswith")
    return AffixTest(s, args, true);
  if (name == "endswith")
    return AffixTest(s, args, false);
  if (name == "upper")
    return Value(ToUpper(s));
  if (name == "lower")
    return Value(ToLower(s));
  if (name == "title")
    return Value(Title(s));
  if (name == "capitalize")
    return Value(Capitalize(s));
  if (name == "replace") {
    const Value* old_v = Arg(args, 0, "old");
    const Value* new_v = Arg(args, 1, "new");
    if (old_v == nullptr || new_v == nullptr || !old_v->is_string() || !new_v->is_string()) {
      return ArgError("replace", "str");
    }
    int64_t count = -1;
    if (const Value* c = Arg(args, 2, "count"); c != nullptr && c->is_int())
      count = c->as_int();
    const std::string& from = old_v->as_string();
    const std::string& to = new_v->as_string();
    std::string out;
    if (from.empty()) {
      auto cps = SplitCodePoints(s);
      int64_t done = 0;
      for (size_t i = 0; i <= cps.size(); ++i) {
        if (count < 0 || done < count) {
          out += to;
          ++done;
        }
        if (i < cps.size())
          out.append(cps[i]);
      }
    } else {
      size_t pos = 0;
      int64_t done = 0;
      while (count < 0 || done < count) {
        size_t hit = s.find(from, pos);
        if (hit == std::string::npos)
          break;
        out.append(s, pos, hit - pos);
        out += to;
        pos = hit + from.size();
        ++done;
        SY_RETURN_IF_ERROR(in.CheckSize(out.size()));
      }
      out.append(s, pos);
    }
    SY_RETURN_IF_ERROR(in.CheckSize(out.size()));
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    const Value* sub = Arg(args, 0, "sub");
    if (sub == nullptr || !sub->is_string())
      return ArgError(name, "str");
    const std::string& needle = sub->as_string();
    auto cp_index = [&](size_t byte) {
      return static_cast<int64_t>(SplitCodePoints(std::string_view(s).substr(0, byte)).size());
    };
    if (name == "count") {
      if (needle.empty())
        return Value(static_cast<int64_t>(SplitCodePoints(s).size()) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(needle); pos != std::string::npos;
           pos = s.find(needle, pos + needle.size()))
        ++n;
      return Value(n);
    }
    size_t hit = name == "rfind" ? s.rfind(needle) : s.find(needle);
    if (hit == std::string::npos) {
      if (name == "index")
        return absl::InvalidArgumentError("ValueError: substring not found");
      return Value(int64_t{-1});
    }
    return Value(cp_index(hit));
  }
  if (name == "join") {
    const Value* seq = Arg(args, 0, "iterable");
    if (seq == nullptr)
      return ArgError("join", "an iterable");
    SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*seq));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return absl::InvalidArgumentError(
            fmt::format("TypeError: sequence item {}: expected str instance, {} found", i,
                        items[i].TypeName()));
      }
      if (i > 0)
        out += s;
      out += items[i].as_string();
      SY_RETURN_IF_ERROR(in.CheckSize(out.size()));
    }
    return Value(std::move(out));
  }
  if (name == "splitlines") {
    std::vector<Value> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.emplace_back(s.substr(start, i - start));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')
          ++i;
        start = i + 1;
      }
    }
    if (start < s.size())
      lines.emplace_back(s.substr(start));
    return Value::MakeList(std::move(lines));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower") {
    if (s.empty())
      return Value(false);
    bool any_cased = false;
    for (std::string_view cp : SplitCodePoints(s)) {
      base::Utf8Decoded d = base::DecodeUtf8(cp);
      uint32_t c = d.valid ? d.code_point : 0xfffd;
      bool digit = c >= '0' && c <= '9';
      bool alpha = IsCased(c) || c >= 0x80;
      if (name == "isdigit" && !digit)
        return Value(false);
      if (name == "isalpha" && !alpha)
        return Value(false);
      if (name == "isalnum" && !alpha && !digit)
        return Value(false);
      if (name == "isspace" && !IsPyWhitespace(c))
        return Value(false);
      // As CPython: no cased character of the other case, and at least one of this case.
      if (name == "isupper" && (IsLowercase(c) || IsTitlecase(c)))
        return Value(false);
      if (name == "islower" && (IsUppercase(c) || IsTitlecase(c)))
        return Value(false);
      any_cased = any_cased || (name == "isupper" ? IsUppercase(c) : IsLowercase(c));
    }
    if (name == "isupper" || name == "islower")
      return Value(any_cased);
    return Value(true);
  }
  return absl::InvalidArgumentError(fmt::format("'str' object has no method '{}'", name));
}

constexpr std::string_view kStringMethods[] = {
    "strip",   "lstrip",  "rstrip",  "split",      "rsplit",  "startswith", "endswith",
    "upper",   "lower",   "title",   "capitalize", "replace", "find",       "rfind",
    "count",   "index",   "join",    "splitlines", "isdigit", "isalpha",    "isalnum",
    "isspace", "isupper", "islower", "format"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get"};
constexpr std::string_view kListMethods[] = {"index", "count"};
constexpr std::string_view kUnsafeMethods[] = {"append", "extend",     "insert",  "pop",
                                               "remove", "clear",      "sort",    "reverse",
                                               "update", "setdefault", "popitem", "copy"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  for (auto n : names) {
    if (n == name)
      return true;
  }
  return false;
}

}  // namespace

std::string Strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<std::string_view> cps = SplitCodePoints(s);
  std::vector<std::string_view> set;
  if (chars != nullptr)
    set = SplitCodePoints(*chars);
  auto strip = [&](std::string_view cp) {
    if (chars == nullptr) {
      base::Utf8Decoded d = base::DecodeUtf8(cp);
      return d.valid && IsPyWhitespace(d.code_point);
    }
    for (auto c : set) {
      if (c == cp)
        return true;
    }
    return false;
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strip(cps[begin]))
      ++begin;
  }
  if (right) {
    while (end > begin && strip(cps[end - 1]))
      --end;
  }
  std::string out;
  for (size_t i = begin; i < end; ++i)
    out.append(cps[i]);
  return out;
}

bool IsPyWhitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

const Value* Arg(const CallArgs& args, size_t index, std::string_view name) {
  if (index < args.positional.size())
    return &args.positional[index];
  if (name.empty())
    return nullptr;
  return args.Keyword(name);
}

bool HasMethod(const Value& obj, std::string_view name) {
  if (obj.is_string())
    return In(kStringMethods, name);
  if (obj.is_dict())
    return In(kDictMethods, name) || In(kUnsafeMethods, name);
  if (obj.is_list())
    return In(kListMethods, name) || In(kUnsafeMethods, name);
  return false;
}

absl::StatusOr<Value> CallMethod(Interpreter& in, const Value& obj, std::string_view name,
                                 CallArgs& args) {
  SY_RETURN_IF_ERROR(in.Step());
  if (obj.is_string())
    return StringMethod(in, obj.as_string(), name, args);
  if (In(kUnsafeMethods, name)) {
    return absl::PermissionDeniedError(fmt::format(
        "SecurityError: access to attribute '{}' of '{}' object is unsafe.", name, obj.TypeName()));
  }
  if (obj.is_dict()) {
    const Dict& d = obj.as_dict();
    if (name == "get") {
      const Value* key = Arg(args, 0, "");
      if (key == nullptr)
        return absl::InvalidArgumentError("TypeError: get expected at least 1 argument");
      const Value* v = d.Find(*key);
      if (v != nullptr)
        return *v;
      const Value* dflt = Arg(args, 1, "");
      return dflt != nullptr ? *dflt : Value::None();
    }
    std::vector<Value> items;
    for (const auto& [k, v] : d.entries) {
      if (name == "keys") {
        items.push_back(k);
      } else if (name == "values") {
        items.push_back(v);
      } else {
        SY_ASSIGN_OR_RETURN(Value pair, Value::MakeList({k, v}, true));
        items.push_back(std::move(pair));
      }
    }
    return Value::MakeList(std::move(items));
  }
  const auto& items = obj.as_list().items;
  const Value* x = Arg(args, 0, "");
  if (x == nullptr)
    return absl::InvalidArgumentError(fmt::format("TypeError: {} expected 1 argument", name));
  int64_t n = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!Equals(items[i], *x))
      continue;
    if (name == "index")
      return Value(static_cast<int64_t>(i));
    ++n;
  }
  if (name == "index")
    return absl::InvalidArgumentError("ValueError: value is not in list");
  return Value(n);
}

namespace {

Value Builtin(std::string name, std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return Value(std::shared_ptr<const Callable>(std::move(c)));
}

absl::StatusOr<Value> Range(Interpreter&, CallArgs& args) {
  int64_t v[3] = {0, 0, 1};
  size_t n = args.positional.size();
  if (n < 1 || n > 3 || !args.keyword.empty()) {
    return absl::InvalidArgumentError("TypeError: range expected 1 to 3 integer arguments");
  }
  for (size_t i = 0; i < n; ++i) {
    if (!args.positional[i].is_int() && !args.positional[i].is_bool()) {
      return absl::InvalidArgumentError(
          fmt::format("TypeError: '{}' object cannot be interpreted as an integer",
                      args.positional[i].TypeName()));
    }
  }
  if (n == 1) {
    v[1] = args.positional[0].as_int();
  } else {
    v[0] = args.positional[0].as_int();
    v[1] = args.positional[1].as_int();
    if (n == 3)
      v[2] = args.positional[2].as_int();
  }
  if (v[2] == 0)
    return absl::InvalidArgumentError("ValueError: range() arg 3 must not be zero");
  // Unsigned arithmetic: the span of two int64 and |INT64_MIN| both fit in uint64.
  int64_t lo = v[2] > 0 ? v[0] : v[1];
  int64_t hi = v[2] > 0 ? v[1] : v[0];
  uint64_t span = hi > lo ? static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) : 0;
  uint64_t step = v[2] > 0 ? static_cast<uint64_t>(v[2]) : 0 - static_cast<uint64_t>(v[2]);
  uint64_t count = span == 0 ? 0 : (span - 1) / step + 1;
  if (count > static_cast<uint64_t>(kMaxRange)) {
    return absl::ResourceExhaustedError(fmt::format(
        "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
        kMaxRange));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    items.emplace_back(v[0] + i * v[2]);
  return Value::MakeList(std::move(items));
}

// dict(...) and namespace(...) both take a mapping or pairs plus keyword arguments.
absl::StatusOr<Dict> DictArgs(const CallArgs& args, std::string_view fn) {
  Dict d;
  if (args.positional.size() > 1) {
    return absl::InvalidArgumentError(fmt::format("TypeError: {} expected at most 1 argument", fn));
  }
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else if (src.is_namespace()) {
      for (const auto& [k, v] : src.as_namespace().attrs)
        d.Set(Value(k), v);
    } else {
      SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(src));
      for (const Value& item : items) {
        SY_ASSIGN_OR_RETURN(std::vector<Value> pair, Iterate(item));
        if (pair.size() != 2) {
          return absl::InvalidArgumentError(
              fmt::format("ValueError: {} update sequence element has length {}; 2 is required", fn,
                          pair.size()));
        }
        d.Set(pair[0], pair[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword)
    d.Set(Value(k), v);
  return d;
}

}  // namespace

std::vector<std::pair<std::string, Value>> MakeGlobals() {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Builtin("range", Range));
  g.emplace_back("dict", Builtin("dict", [](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
                   SY_ASSIGN_OR_RETURN(Dict d, DictArgs(args, "dict"));
                   return Value::MakeDict(std::move(d));
                 }));
  g.emplace_back(
      "namespace",
      Builtin("namespace", [](Interpreter& in, CallArgs& args) -> absl::StatusOr<Value> {
        SY_ASSIGN_OR_RETURN(Dict d, DictArgs(args, "namespace"));
        auto ns = in.NewNamespace();
        for (auto& [k, v] : d.entries) {
          if (!k.is_string()) {
            return absl::InvalidArgumentError("TypeError: namespace keys must be strings");
          }
          if (!k.as_string().empty() && k.as_string()[0] == '_') {
            return absl::PermissionDeniedError(
                fmt::format("SecurityError: cannot store underscore-prefixed attribute '{}' on a "
                            "namespace",
                            k.as_string()));
          }
          ns->Set(k.as_string(), std::move(v));
        }
        return Value(ns);
      }));
  g.emplace_back(
      "raise_exception",
      Builtin("raise_exception", [](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
        std::string msg;
        if (const Value* m = Arg(args, 0, "message"); m != nullptr) {
          SY_ASSIGN_OR_RETURN(msg, ToStr(*m));
        }
        return absl::FailedPreconditionError(fmt::format("TemplateError: {}", msg));
      }));
  g.emplace_back(
      "strftime_now",
      Builtin("strftime_now", [](Interpreter&, CallArgs& args) -> absl::StatusOr<Value> {
        const Value* f = Arg(args, 0, "format");
        if (f == nullptr || !f->is_string()) {
          return absl::InvalidArgumentError("TypeError: strftime_now() needs a format string");
        }
        // SY_FAKE_NOW_UNIX freezes the clock so that tests can compare output.
        std::time_t now = std::time(nullptr);
        if (const char* fake = std::getenv("SY_FAKE_NOW_UNIX"); fake != nullptr) {
          now = static_cast<std::time_t>(std::atoll(fake));
        }
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[512];
        size_t n = std::strftime(buf, sizeof(buf), f->as_string().c_str(), &tm);
        return Value(std::string(buf, n));
      }));
  return g;
}

}  // namespace switchyard::text::jinja
