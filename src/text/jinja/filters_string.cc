// String filters: case, trimming, replacing, escaping, indenting, formatting, tojson.
#include <algorithm>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "base/utf8.h"
#include "text/jinja/filter_helpers.h"

namespace switchyard::text::jinja {
namespace {

absl::StatusOr<Value> Str(const Value& v) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  return Value(std::move(s));
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

// Jinja's title: the text splits before and after runs of whitespace, '-' and opening
// brackets; each piece is piece[0].upper() + piece[1:].lower().
absl::StatusOr<Value> FTitle(Interpreter&, const Value& v, CallArgs&) {
  SY_ASSIGN_OR_RETURN(std::string s, ToStr(v));
  std::string out;
  std::vector<std::string_view> cps = SplitCodePoints(s);
  auto is_break = [&](size_t i) {
    std::string_view cp = cps[i];
    if (cp.size() == 1 && std::string_view("-({[<").find(cp[0]) != std::string_view::npos)
      return true;
    base::Utf8Decoded d = base::DecodeUtf8(cp);
    return d.valid && IsPyWhitespace(d.code_point);
  };
  size_t i = 0;
  while (i < cps.size()) {
    size_t start = i;
    bool breaks = is_break(i);
    while (i < cps.size() && is_break(i) == breaks)
      ++i;
    if (breaks) {
      for (size_t k = start; k < i; ++k)
        out.append(cps[k]);
      continue;
    }
    out += ToUpper(cps[start]);
    std::string rest;
    for (size_t k = start + 1; k < i; ++k)
      rest.append(cps[k]);
    out += ToLower(rest);
  }
  return Value(std::move(out));
}

// Jinja's truncate(length=255, killwords=False, end='...', leeway=5), in code points.
absl::StatusOr<Value> FTruncate(Interpreter&, const Value& v, CallArgs& args) {
  int64_t length = 255, leeway = 5;
  std::string end = "...";
  if (const Value* a = Arg(args, 0, "length"); a != nullptr) {
    if (!a->is_int() && !a->is_bool())
      return WantType("truncate", "an int length", *a);
    length = a->as_int();
  }
  const Value* killwords = Arg(args, 1, "killwords");
  if (const Value* a = Arg(args, 2, "end"); a != nullptr) {
    if (!a->is_string())
      return WantType("truncate", "a str end", *a);
    end = a->as_string();
  }
  if (const Value* a = Arg(args, 3, "leeway"); a != nullptr && !a->is_none()) {
    if (!a->is_int() && !a->is_bool())
      return WantType("truncate", "an int leeway", *a);
    leeway = a->as_int();
  }
  int64_t end_len = static_cast<int64_t>(SplitCodePoints(end).size());
  if (length < end_len) {
    return absl::InvalidArgumentError(
        fmt::format("AssertionError: expected length >= {}, got {}", end_len, length));
  }
  if (leeway < 0) {
    return absl::InvalidArgumentError(
        fmt::format("AssertionError: expected leeway >= 0, got {}", leeway));
  }
  // Jinja measures any sized value but can only cut strings.
  SY_ASSIGN_OR_RETURN(int64_t n, Length(v));
  if (n <= length || n - length <= leeway)
    return v;
  if (!v.is_string())
    return WantType("truncate", "a str to cut", v);
  std::vector<std::string_view> cps = SplitCodePoints(v.as_string());
  std::string head;
  for (int64_t i = 0; i < length - end_len; ++i)
    head.append(cps[i]);
  if (killwords == nullptr || !killwords->Truthy()) {
    size_t space = head.rfind(' ');
    if (space != std::string::npos)
      head.resize(space);
  }
  return Value(head + end);
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

}  // namespace

std::span<const FilterEntry> StringFilters() {
  static constexpr FilterEntry kTable[] = {
      {"capitalize", FCapitalize},
      {"center", FCenter},
      {"e", FEscape},
      {"escape", FEscape},
      {"forceescape", FEscape},
      {"format", FFormat},
      {"indent", FIndent},
      {"lower", FLower},
      {"replace", FReplace},
      {"safe", FSafe},
      {"string", FString},
      {"title", FTitle},
      {"tojson", FToJson},
      {"trim", FTrim},
      {"truncate", FTruncate},
      {"upper", FUpper},
      {"wordcount", FWordCount},
  };
  return kTable;
}

}  // namespace switchyard::text::jinja
