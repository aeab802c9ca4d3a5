// Jinja's builtin filters and tests, with the tojson override transformers installs.
#include <algorithm>
#include <cmath>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/builtins.h"

namespace switchyard::text::jinja {
namespace {

absl::Status WantType(std::string_view filter, std::string_view what, const Value& got) {
  return absl::InvalidArgumentError(
      fmt::format("TypeError: filter '{}' expected {}, got {}", filter, what, got.TypeName()));
}

absl::StatusOr<Value> Str(const Value& v) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  return Value(std::move(s));
}

// Jinja's make_attrgetter: "a.b.0" looked up item by item.
absl::StatusOr<Value> AttrPath(Interpreter& in, const Value& v, const Value& attribute) {
  if (!attribute.is_string())
    return in.GetItem(v, attribute);
  Value cur = v;
  std::string_view path = attribute.as_string();
  while (true) {
    size_t dot = path.find('.');
    std::string_view part = path.substr(0, dot);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    Value key = digits ? Value(static_cast<int64_t>(std::atoll(std::string(part).c_str())))
                       : Value(std::string(part));
    SY_ASSIGN_OR_RETURN(cur, in.GetItem(cur, key));
    if (dot == std::string_view::npos)
      return cur;
    path.remove_prefix(dot + 1);
  }
}

absl::StatusOr<Value> List_(const std::vector<Value>& items) {
  return Value::MakeList(items);
}

absl::StatusOr<Value> FLength(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_namespace())
    return WantType("length", "a sized value", v);
  SY_ASSIGN_OR_RETURN(int64_t n, Length(v));
  return Value(n);
}

absl::StatusOr<Value> FFirst(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::MakeUndefined("No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> FLast(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::MakeUndefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> FJoin(Interpreter& in, const Value& v, CallArgs& args) {
  std::string sep;
  if (const Value* d = Arg(args, 0, "d"); d != nullptr) {
    SY_ASSIGN_OR_RETURN(sep, ToStr(*d));
  }
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* attribute = Arg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0)
      out += sep;
    Value item = items[i];
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(item, AttrPath(in, item, *attribute));
    }
    SY_ASSIGN_OR_RETURN(std::string s, ToStr(item));
    out += s;
    SY_RETURN_IF_ERROR(in.CheckSize(out.size()));
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> FDefault(Interpreter&, const Value& v, CallArgs& args) {
  const Value* dflt = Arg(args, 0, "default_value");
  const Value* boolean = Arg(args, 1, "boolean");
  bool use_default = v.is_undefined() || (boolean != nullptr && boolean->Truthy() && !v.Truthy());
  if (!use_default)
    return v;
  return dflt != nullptr ? *dflt : Value("");
}

absl::StatusOr<Value> FTrim(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  const Value* chars = Arg(args, 0, "chars");
  if (chars != nullptr && !chars->is_none()) {
    if (!chars->is_string())
      return WantType("trim", "str chars", *chars);
    return Value(Strip(s, &chars->as_string(), true, true));
  }
  return Value(Strip(s, nullptr, true, true));
}

absl::StatusOr<Value> FUpper(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  return Value(ToUpper(s));
}
absl::StatusOr<Value> FLower(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  return Value(ToLower(s));
}
absl::StatusOr<Value> FCapitalize(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  return Value(Capitalize(s));
}

// Jinja's title: words start after whitespace, '-', and opening brackets.
absl::StatusOr<Value> FTitle(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  std::string out;
  std::string word;
  auto flush = [&] {
    out += Capitalize(word);
    word.clear();
  };
  for (std::string_view cp : SplitCodePoints(s)) {
    char c = cp.size() == 1 ? cp[0] : 'x';
    if (c == '-' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
        c == '(' || c == '{' || c == '[' || c == '<') {
      flush();
      out.append(cp);
    } else {
      word.append(cp);
    }
  }
  flush();
  return Value(std::move(out));
}

absl::StatusOr<Value> FReplace(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  CallArgs margs;
  for (size_t i = 0; i < 2; ++i) {
    const Value* a = Arg(args, i, i == 0 ? "old" : "new");
    if (a == nullptr)
      return absl::InvalidArgumentError("TypeError: replace() missing argument");
    SY_ASSIGN_OR_RETURN(std::string as, ToStr(*a));
    margs.positional.emplace_back(std::move(as));
  }
  if (const Value* c = Arg(args, 2, "count"); c != nullptr && !c->is_none())
    margs.positional.push_back(*c);
  return CallMethod(in, Value(std::move(s)), "replace", margs);
}

absl::StatusOr<Value> FItems(Interpreter& in, const Value& v, CallArgs&) {
  if (v.is_undefined())
    return Value::MakeList({});
  if (!v.is_dict())
    return WantType("items", "a mapping", v);
  CallArgs none;
  return CallMethod(in, v, "items", none);
}

absl::StatusOr<Value> FList(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  return List_(items);
}

absl::StatusOr<Value> FString(Interpreter&, const Value& v, CallArgs&) {
  return Str(v);
}
absl::StatusOr<Value> FSafe(Interpreter&, const Value& v, CallArgs&) {
  return Str(v);
}

absl::StatusOr<Value> FEscape(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(std::move(out));
}

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

absl::StatusOr<Value> FIndent(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  std::string pad = "    ";
  if (const Value* w = Arg(args, 0, "width"); w != nullptr) {
    if (w->is_string()) {
      pad = w->as_string();
    } else if (w->is_int()) {
      pad = std::string(std::max<int64_t>(0, std::min<int64_t>(w->as_int(), 4096)), ' ');
    }
  }
  const Value* first = Arg(args, 1, "first");
  const Value* blank = Arg(args, 2, "blank");
  // As Jinja: every line after the first is indented, blank ones only when asked.
  std::vector<std::string_view> lines;
  std::string_view rest = s;
  while (true) {
    size_t nl = rest.find('\n');
    lines.push_back(rest.substr(0, nl));
    if (nl == std::string_view::npos)
      break;
    rest.remove_prefix(nl + 1);
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if ((blank != nullptr && blank->Truthy()) || !lines[i].empty())
        out += pad;
    }
    out.append(lines[i]);
  }
  if (first != nullptr && first->Truthy())
    out = pad + out;
  return Value(std::move(out));
}

absl::StatusOr<Value> FToJson(Interpreter& in, const Value& v, CallArgs& args) {
  JsonOptions o;
  if (const Value* a = Arg(args, 0, "ensure_ascii"); a != nullptr)
    o.ensure_ascii = a->Truthy();
  if (const Value* i = Arg(args, 1, "indent"); i != nullptr && !i->is_none()) {
    o.has_indent = true;
    if (i->is_string()) {
      o.indent = i->as_string();
    } else if (i->is_int() || i->is_bool()) {
      o.indent = std::string(std::clamp<int64_t>(i->as_int(), 0, 4096), ' ');
    } else {
      return WantType("tojson", "an int or str indent", *i);
    }
    o.item_separator = ",";
  }
  if (const Value* sep = Arg(args, 2, "separators"); sep != nullptr && !sep->is_none()) {
    SY_ASSIGN_OR_RETURN(std::vector<Value> parts, Iterate(*sep));
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) {
      return WantType("tojson", "a pair of separator strings", *sep);
    }
    o.item_separator = parts[0].as_string();
    o.key_separator = parts[1].as_string();
  }
  if (const Value* s = Arg(args, 3, "sort_keys"); s != nullptr)
    o.sort_keys = s->Truthy();
  SY_ASSIGN_OR_RETURN(std::string json, ToJson(v, o));
  SY_RETURN_IF_ERROR(in.CheckSize(json.size()));
  return Value(std::move(json));
}

absl::StatusOr<Value> FReverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string())
    return SliceValue(v, Value::None(), Value::None(), Value(int64_t{-1}));
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::reverse(items.begin(), items.end());
  return List_(items);
}

absl::StatusOr<bool> Less(Interpreter& in, const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) {
    return ToLower(a.as_string()) < ToLower(b.as_string());
  }
  (void)in;
  return LessThan(a, b);
}

absl::StatusOr<Value> SortBy(Interpreter& in, std::vector<Value> items, bool reverse,
                             bool case_sensitive, const Value* attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    Value key = item;
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(key, AttrPath(in, item, *attribute));
    }
    keyed.emplace_back(std::move(key), std::move(item));
  }
  absl::Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    if (!error.ok())
      return false;
    auto r = reverse ? Less(in, y.first, x.first, case_sensitive)
                     : Less(in, x.first, y.first, case_sensitive);
    if (!r.ok()) {
      error = r.status();
      return false;
    }
    return *r;
  });
  SY_RETURN_IF_ERROR(error);
  std::vector<Value> out;
  for (auto& [k, v] : keyed)
    out.push_back(std::move(v));
  return List_(out);
}

absl::StatusOr<Value> FSort(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* reverse = Arg(args, 0, "reverse");
  const Value* cs = Arg(args, 1, "case_sensitive");
  return SortBy(in, std::move(items), reverse != nullptr && reverse->Truthy(),
                cs != nullptr && cs->Truthy(), Arg(args, 2, "attribute"));
}

absl::StatusOr<Value> FDictSort(Interpreter& in, const Value& v, CallArgs& args) {
  if (!v.is_dict())
    return WantType("dictsort", "a mapping", v);
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* by = Arg(args, 1, "by");
  const Value* reverse = Arg(args, 2, "reverse");
  Value pos(int64_t{by != nullptr && by->is_string() && by->as_string() == "value" ? 1 : 0});
  CallArgs none;
  SY_ASSIGN_OR_RETURN(Value pairs, CallMethod(in, v, "items", none));
  return SortBy(in, pairs.as_list().items, reverse != nullptr && reverse->Truthy(),
                cs != nullptr && cs->Truthy(), &pos);
}

absl::StatusOr<Value> FUnique(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* attribute = Arg(args, 1, "attribute");
  std::vector<Value> seen, out;
  for (Value& item : items) {
    Value key = item;
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(key, AttrPath(in, item, *attribute));
    }
    if ((cs == nullptr || !cs->Truthy()) && key.is_string())
      key = Value(ToLower(key.as_string()));
    bool dup = false;
    for (const Value& s : seen)
      dup = dup || Equals(s, key);
    if (dup)
      continue;
    seen.push_back(key);
    out.push_back(std::move(item));
  }
  return List_(out);
}

absl::StatusOr<Value> MinMax(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty())
    return Value::MakeUndefined(want_max ? "No aggregated item, sequence was empty."
                                         : "No aggregated item, sequence was empty.");
  const Value* cs = Arg(args, 0, "case_sensitive");
  const Value* attribute = Arg(args, 1, "attribute");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key = items[i];
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(key, AttrPath(in, items[i], *attribute));
    }
    if (i == 0) {
      best_key = key;
      continue;
    }
    SY_ASSIGN_OR_RETURN(bool better, want_max
                                         ? Less(in, best_key, key, cs != nullptr && cs->Truthy())
                                         : Less(in, key, best_key, cs != nullptr && cs->Truthy()));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}
absl::StatusOr<Value> FMin(Interpreter& in, const Value& v, CallArgs& args) {
  return MinMax(in, v, args, false);
}
absl::StatusOr<Value> FMax(Interpreter& in, const Value& v, CallArgs& args) {
  return MinMax(in, v, args, true);
}

absl::StatusOr<Value> FSum(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* attribute = Arg(args, 0, "attribute");
  const Value* start = Arg(args, 1, "start");
  Value total = start != nullptr ? *start : Value(int64_t{0});
  for (const Value& item : items) {
    Value x = item;
    if (attribute != nullptr && !attribute->is_none()) {
      SY_ASSIGN_OR_RETURN(x, AttrPath(in, item, *attribute));
    }
    SY_ASSIGN_OR_RETURN(total, BinaryOp("+", total, x, in));
  }
  return total;
}

absl::StatusOr<Value> FMap(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> out;
  if (const Value* attribute = args.Keyword("attribute"); attribute != nullptr) {
    const Value* dflt = args.Keyword("default");
    for (const Value& item : items) {
      SY_ASSIGN_OR_RETURN(Value x, AttrPath(in, item, *attribute));
      if (x.is_undefined() && dflt != nullptr)
        x = *dflt;
      out.push_back(std::move(x));
    }
    return List_(out);
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return absl::InvalidArgumentError(
        "FilterArgumentError: map requires a filter name or attribute=");
  }
  std::string name = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs a = rest;
    SY_ASSIGN_OR_RETURN(Value x, in.ApplyFilter(name, item, a));
    out.push_back(std::move(x));
  }
  return List_(out);
}

absl::StatusOr<Value> Select(Interpreter& in, const Value& v, CallArgs& args, bool by_attr,
                             bool keep) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (args.positional.empty())
      return absl::InvalidArgumentError("TypeError: missing attribute");
    attribute = args.positional[next++];
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string())
      return absl::InvalidArgumentError("TypeError: test name must be a string");
    test = args.positional[next++].as_string();
  }
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + std::min(next, args.positional.size()),
                         args.positional.end());
  rest.keyword = args.keyword;
  std::vector<Value> out;
  for (const Value& item : items) {
    Value x = item;
    if (by_attr) {
      SY_ASSIGN_OR_RETURN(x, AttrPath(in, item, attribute));
    }
    bool passed;
    if (test.empty()) {
      passed = x.Truthy();
    } else {
      CallArgs a = rest;
      SY_ASSIGN_OR_RETURN(passed, in.ApplyTest(test, x, a));
    }
    if (passed == keep)
      out.push_back(item);
  }
  return List_(out);
}
absl::StatusOr<Value> FSelect(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, false, true);
}
absl::StatusOr<Value> FReject(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, false, false);
}
absl::StatusOr<Value> FSelectAttr(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, true, true);
}
absl::StatusOr<Value> FRejectAttr(Interpreter& in, const Value& v, CallArgs& a) {
  return Select(in, v, a, true, false);
}

absl::StatusOr<Value> FAttr(Interpreter& in, const Value& v, CallArgs& args) {
  const Value* name = Arg(args, 0, "name");
  if (name == nullptr || !name->is_string())
    return WantType("attr", "a name", v);
  return in.GetAttr(v, name->as_string());
}

absl::StatusOr<Value> FBatch(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  const Value* size = Arg(args, 0, "linecount");
  if (size == nullptr || !size->is_int() || size->as_int() <= 0)
    return WantType("batch", "a positive size", v);
  const Value* fill = Arg(args, 1, "fill_with");
  std::vector<Value> out, cur;
  for (Value& item : items) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == size->as_int()) {
      SY_ASSIGN_OR_RETURN(Value b, List_(cur));
      out.push_back(std::move(b));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    while (fill != nullptr && !fill->is_none() && static_cast<int64_t>(cur.size()) < size->as_int())
      cur.push_back(*fill);
    SY_ASSIGN_OR_RETURN(Value b, List_(cur));
    out.push_back(std::move(b));
  }
  return List_(out);
}

absl::StatusOr<Value> FCenter(Interpreter&, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  int64_t width = 80;
  if (const Value* w = Arg(args, 0, "width"); w != nullptr && w->is_int())
    width = std::min<int64_t>(w->as_int(), 1 << 20);
  int64_t len = static_cast<int64_t>(SplitCodePoints(s).size());
  if (width <= len)
    return Value(s);
  int64_t total = width - len;
  int64_t left = total / 2 + (total & width & 1);
  return Value(std::string(left, ' ') + s + std::string(total - left, ' '));
}

absl::StatusOr<Value> FWordCount(Interpreter& in, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  int64_t n = 0;
  bool in_word = false;
  for (char c : s) {
    bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80);
    if (w && !in_word)
      ++n;
    in_word = w;
  }
  (void)in;
  return Value(n);
}

absl::StatusOr<Value> FFormat(Interpreter& in, const Value& v, CallArgs& args) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  SY_ASSIGN_OR_RETURN(Value tuple, Value::MakeList(args.positional, true));
  return BinaryOp("%", Value(std::move(s)), tuple, in);
}

absl::StatusOr<Value> FCount(Interpreter& in, const Value& v, CallArgs& args) {
  return FLength(in, v, args);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", FAbs},
    {"attr", FAttr},
    {"batch", FBatch},
    {"capitalize", FCapitalize},
    {"center", FCenter},
    {"count", FCount},
    {"d", FDefault},
    {"default", FDefault},
    {"dictsort", FDictSort},
    {"e", FEscape},
    {"escape", FEscape},
    {"first", FFirst},
    {"float", FFloat},
    {"forceescape", FEscape},
    {"format", FFormat},
    {"indent", FIndent},
    {"int", FInt},
    {"items", FItems},
    {"join", FJoin},
    {"last", FLast},
    {"length", FLength},
    {"list", FList},
    {"lower", FLower},
    {"map", FMap},
    {"max", FMax},
    {"min", FMin},
    {"reject", FReject},
    {"rejectattr", FRejectAttr},
    {"replace", FReplace},
    {"reverse", FReverse},
    {"round", FRound},
    {"safe", FSafe},
    {"select", FSelect},
    {"selectattr", FSelectAttr},
    {"sort", FSort},
    {"string", FString},
    {"sum", FSum},
    {"title", FTitle},
    {"tojson", FToJson},
    {"trim", FTrim},
    {"unique", FUnique},
    {"upper", FUpper},
    {"wordcount", FWordCount},
};

// Tests.

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

FilterFn FindFilter(std::string_view name) {
  for (const auto& f : kFilters) {
    if (f.name == name)
      return f.fn;
  }
  return nullptr;
}

TestFn FindTest(std::string_view name) {
  for (const auto& t : kTests) {
    if (t.name == name)
      return t.fn;
  }
  return nullptr;
}

}  // namespace switchyard::text::jinja
