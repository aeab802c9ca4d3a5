#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "fmt/format.h"
#include "simdjson.h"

#include "base/json.h"
#include "base/utf8.h"

namespace switchyard::text::jinja {
namespace {

absl::Status TooDeep() {
  return absl::InvalidArgumentError(fmt::format("values nest deeper than {}", kMaxNesting));
}

}  // namespace

const Value* Dict::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (Equals(k, key))
      return &v;
  }
  return nullptr;
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.as_string() == key)
      return &v;
  }
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (Equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* Namespace::Find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name)
      return &v;
  }
  return nullptr;
}

void Namespace::Set(std::string_view name, Value value) {
  for (auto& [k, v] : attrs) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(std::string(name), std::move(value));
}

const Value* CallArgs::Keyword(std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name)
      return &v;
  }
  return nullptr;
}

int Value::depth() const {
  if (is_list())
    return as_list().depth;
  if (is_dict())
    return as_dict().depth;
  return 0;
}

absl::StatusOr<Value> Value::MakeList(std::vector<Value> items, bool is_tuple) {
  auto list = std::make_shared<List>();
  int depth = 0;
  for (const Value& item : items)
    depth = std::max(depth, item.depth());
  if (depth + 1 > kMaxNesting)
    return TooDeep();
  list->depth = depth + 1;
  list->items = std::move(items);
  list->is_tuple = is_tuple;
  return Value(std::shared_ptr<const List>(std::move(list)));
}

absl::StatusOr<Value> Value::MakeDict(Dict dict) {
  int depth = 0;
  for (const auto& [k, v] : dict.entries)
    depth = std::max({depth, k.depth(), v.depth()});
  if (depth + 1 > kMaxNesting)
    return TooDeep();
  dict.depth = depth + 1;
  return Value(std::shared_ptr<const Dict>(std::make_shared<Dict>(std::move(dict))));
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().items.empty();
    case Kind::kDict:
      return !as_dict().entries.empty();
    default:
      return true;
  }
}

std::string Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return as_list().is_tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
    case Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

std::string FloatRepr(double f) {
  if (std::isnan(f))
    return "nan";
  if (std::isinf(f))
    return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string_view sci(buf, res.ptr - buf);
  bool negative = !sci.empty() && sci[0] == '-';
  if (negative)
    sci.remove_prefix(1);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.')
      digits += c;
  }
  int exp = std::stoi(std::string(sci.substr(e_pos + 1)));
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  } else if (exp >= 0) {
    if (digits.size() <= static_cast<size_t>(exp) + 1) {
      out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
  } else {
    out += "0." + std::string(-exp - 1, '0') + digits;
  }
  return out;
}

namespace {

bool IsPrintable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f)
    return false;
  if (cp < 0x7f)
    return true;
  if (cp <= 0xa0 || cp == 0xad)
    return false;
  if ((cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
      (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff || cp == 0x1680) {
    return false;
  }
  if ((cp >= 0xe000 && cp <= 0xf8ff) || (cp >= 0xfff0 && cp <= 0xfffb) || cp >= 0xf0000) {
    return false;
  }
  return true;
}

}  // namespace

void AppendStringRepr(std::string_view s, std::string* out) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  while (!s.empty()) {
    base::Utf8Decoded d = base::DecodeUtf8(s);
    uint32_t cp = d.valid ? d.code_point : 0xfffd;
    std::string_view raw = s.substr(0, d.length);
    s.remove_prefix(d.length);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      *out += "\\n";
    } else if (cp == '\r') {
      *out += "\\r";
    } else if (cp == '\t') {
      *out += "\\t";
    } else if (IsPrintable(cp)) {
      if (d.valid) {
        out->append(raw);
      } else {
        base::AppendUtf8(cp, out);
      }
    } else if (cp < 0x100) {
      *out += fmt::format("\\x{:02x}", cp);
    } else if (cp < 0x10000) {
      *out += fmt::format("\\u{:04x}", cp);
    } else {
      *out += fmt::format("\\U{:08x}", cp);
    }
  }
  out->push_back(quote);
}

namespace {

absl::Status AppendRepr(const Value& v, bool as_str, int depth, std::string* out);

absl::Status AppendItems(const Value& v, int depth, std::string* out) {
  if (v.is_list()) {
    const List& list = v.as_list();
    out->push_back(list.is_tuple ? '(' : '[');
    for (size_t i = 0; i < list.items.size(); ++i) {
      if (i > 0)
        *out += ", ";
      auto st = AppendRepr(list.items[i], false, depth + 1, out);
      if (!st.ok())
        return st;
    }
    if (list.is_tuple && list.items.size() == 1)
      out->push_back(',');
    out->push_back(list.is_tuple ? ')' : ']');
    return absl::OkStatus();
  }
  out->push_back('{');
  bool first = true;
  auto append = [&](const Value& key, const Value& value) -> absl::Status {
    if (!first)
      *out += ", ";
    first = false;
    auto st = AppendRepr(key, false, depth + 1, out);
    if (!st.ok())
      return st;
    *out += ": ";
    return AppendRepr(value, false, depth + 1, out);
  };
  if (v.is_dict()) {
    for (const auto& [k, val] : v.as_dict().entries) {
      auto st = append(k, val);
      if (!st.ok())
        return st;
    }
  } else {
    for (const auto& [k, val] : v.as_namespace().attrs) {
      auto st = append(Value(k), val);
      if (!st.ok())
        return st;
    }
  }
  out->push_back('}');
  return absl::OkStatus();
}

absl::Status AppendRepr(const Value& v, bool as_str, int depth, std::string* out) {
  if (depth > kMaxNesting)
    return TooDeep();
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      if (!as_str)
        *out += "Undefined";
      return absl::OkStatus();
    case Value::Kind::kNone:
      *out += "None";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.as_bool() ? "True" : "False";
      return absl::OkStatus();
    case Value::Kind::kInt:
      *out += std::to_string(v.as_int());
      return absl::OkStatus();
    case Value::Kind::kFloat:
      *out += FloatRepr(v.as_double());
      return absl::OkStatus();
    case Value::Kind::kString:
      if (as_str) {
        *out += v.as_string();
      } else {
        AppendStringRepr(v.as_string(), out);
      }
      return absl::OkStatus();
    case Value::Kind::kList:
    case Value::Kind::kDict:
      return AppendItems(v, depth, out);
    case Value::Kind::kNamespace: {
      *out += "<Namespace ";
      auto st = AppendItems(v, depth, out);
      *out += ">";
      return st;
    }
    case Value::Kind::kCallable:
      *out += fmt::format("<function {}>", v.as_callable().name);
      return absl::OkStatus();
    case Value::Kind::kLoop:
      *out += "<LoopContext>";
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ToStr(const Value& v) {
  std::string out;
  auto st = AppendRepr(v, true, 0, &out);
  if (!st.ok())
    return st;
  return out;
}

absl::StatusOr<std::string> ToRepr(const Value& v) {
  std::string out;
  auto st = AppendRepr(v, false, 0, &out);
  if (!st.ok())
    return st;
  return out;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float())
      return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.is_tuple != y.is_tuple || x.items.size() != y.items.size())
        return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(x.items[i], y.items[i]))
          return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size())
        return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.Find(k);
        if (other == nullptr || !Equals(v, *other))
          return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.as_namespace() == &b.as_namespace();
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    case Value::Kind::kLoop:
      return &a.as_loop() == &b.as_loop();
    default:
      return false;
  }
}

absl::StatusOr<bool> LessThan(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float())
      return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string())
    return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.as_list().is_tuple == b.as_list().is_tuple) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i]))
        return LessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(
      fmt::format("TypeError: '<' not supported between instances of '{}' and '{}'", a.TypeName(),
                  b.TypeName()));
}

std::vector<std::string_view> SplitCodePoints(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    size_t n = base::DecodeUtf8(s).length;
    out.push_back(s.substr(0, n));
    s.remove_prefix(n);
  }
  return out;
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString: {
      int64_t n = 0;
      std::string_view s = v.as_string();
      while (!s.empty()) {
        s.remove_prefix(base::DecodeUtf8(s).length);
        ++n;
      }
      return n;
    }
    case Value::Kind::kList:
      return static_cast<int64_t>(v.as_list().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.as_dict().entries.size());
    default:
      return absl::InvalidArgumentError(
          fmt::format("TypeError: object of type '{}' has no len()", v.TypeName()));
  }
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return out;
    case Value::Kind::kString:
      for (std::string_view cp : SplitCodePoints(v.as_string()))
        out.emplace_back(std::string(cp));
      return out;
    case Value::Kind::kList:
      return v.as_list().items;
    case Value::Kind::kDict:
      for (const auto& [k, val] : v.as_dict().entries)
        out.push_back(k);
      return out;
    default:
      return absl::InvalidArgumentError(
          fmt::format("TypeError: '{}' object is not iterable", v.TypeName()));
  }
}

namespace {

absl::StatusOr<Value> FromElement(simdjson::dom::element e, int depth) {
  if (depth > kMaxNesting)
    return TooDeep();
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      std::vector<Value> items;
      // A named copy: ranging over value_unsafe() of the temporary result would dangle.
      simdjson::dom::array array = e.get_array().value_unsafe();
      for (simdjson::dom::element item : array) {
        auto v = FromElement(item, depth + 1);
        if (!v.ok())
          return v.status();
        items.push_back(*std::move(v));
      }
      return Value::MakeList(std::move(items));
    }
    case simdjson::dom::element_type::OBJECT: {
      Dict dict;
      simdjson::dom::object object = e.get_object().value_unsafe();
      for (auto field : object) {
        auto v = FromElement(field.value, depth + 1);
        if (!v.ok())
          return v.status();
        dict.Set(Value(std::string(field.key)), *std::move(v));
      }
      return Value::MakeDict(std::move(dict));
    }
    case simdjson::dom::element_type::INT64:
      return Value(e.get_int64().value_unsafe());
    case simdjson::dom::element_type::UINT64:
      return Value(static_cast<double>(e.get_uint64().value_unsafe()));
    case simdjson::dom::element_type::DOUBLE:
      return Value(e.get_double().value_unsafe());
    case simdjson::dom::element_type::STRING:
      return Value(std::string(e.get_string().value_unsafe()));
    case simdjson::dom::element_type::BOOL:
      return Value(e.get_bool().value_unsafe());
    case simdjson::dom::element_type::NULL_VALUE:
      return Value::None();
  }
  return Value::None();
}

absl::Status AppendJson(const Value& v, const JsonOptions& o, int level, std::string* out);

absl::StatusOr<std::string> JsonKey(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::kString:
      return k.as_string();
    case Value::Kind::kInt:
      return std::to_string(k.as_int());
    case Value::Kind::kBool:
      return std::string(k.as_bool() ? "true" : "false");
    case Value::Kind::kNone:
      return std::string("null");
    case Value::Kind::kFloat:
      return FloatRepr(k.as_double());
    default:
      return absl::InvalidArgumentError(fmt::format(
          "TypeError: keys must be str, int, float, bool or None, not {}", k.TypeName()));
  }
}

void NewLine(const JsonOptions& o, int level, std::string* out) {
  out->push_back('\n');
  for (int i = 0; i < level; ++i)
    *out += o.indent;
}

absl::Status AppendJson(const Value& v, const JsonOptions& o, int level, std::string* out) {
  if (level > kMaxNesting)
    return TooDeep();
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return absl::OkStatus();
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return absl::OkStatus();
    case Value::Kind::kInt:
      *out += std::to_string(v.as_int());
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      double f = v.as_double();
      if (std::isnan(f)) {
        *out += "NaN";
      } else if (std::isinf(f)) {
        *out += f > 0 ? "Infinity" : "-Infinity";
      } else {
        *out += FloatRepr(f);
      }
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      base::AppendJsonString(v.as_string(), o.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Kind::kList: {
      const auto& items = v.as_list().items;
      if (items.empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0)
          *out += o.item_separator;
        if (o.has_indent)
          NewLine(o, level + 1, out);
        auto st = AppendJson(items[i], o, level + 1, out);
        if (!st.ok())
          return st;
      }
      if (o.has_indent)
        NewLine(o, level, out);
      out->push_back(']');
      return absl::OkStatus();
    }
    case Value::Kind::kDict: {
      const auto& entries = v.as_dict().entries;
      if (entries.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, val] : entries) {
        if (o.sort_keys && !k.is_string()) {
          return absl::InvalidArgumentError(
              "TypeError: '<' not supported between dict keys of different types");
        }
        auto key = JsonKey(k);
        if (!key.ok())
          return key.status();
        items.emplace_back(*std::move(key), &val);
      }
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0)
          *out += o.item_separator;
        if (o.has_indent)
          NewLine(o, level + 1, out);
        base::AppendJsonString(items[i].first, o.ensure_ascii, out);
        *out += o.key_separator;
        auto st = AppendJson(*items[i].second, o, level + 1, out);
        if (!st.ok())
          return st;
      }
      if (o.has_indent)
        NewLine(o, level, out);
      out->push_back('}');
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(
          fmt::format("TypeError: Object of type {} is not JSON serializable", v.TypeName()));
  }
}

}  // namespace

absl::StatusOr<Value> ValueFromJson(std::string_view json, std::string_view what) {
  auto doc = base::JsonDocument::Parse(json, what);
  if (!doc.ok())
    return doc.status();
  return FromElement((*doc)->root(), 0);
}

absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  auto st = AppendJson(v, options, 0, &out);
  if (!st.ok())
    return st;
  return out;
}

}  // namespace switchyard::text::jinja
