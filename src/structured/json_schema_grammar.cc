#include "structured/json_schema_grammar.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "fmt/format.h"
#include "simdjson.h"

#include "base/status_macros.h"
#include "structured/ebnf.h"

namespace switchyard::structured {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Bounds on counts that unroll into states (minLength, maxItems, ...).
constexpr int64_t kMaxCount = 1 << 16;
constexpr size_t kMaxSchemaDepth = 128;
constexpr std::array<std::string_view, 9> kAnnotations = {"title",      "description", "examples",
                                                          "default",    "$schema",     "$comment",
                                                          "deprecated", "readOnly",    "writeOnly"};
constexpr std::array<std::string_view, 17> kKeywords = {
    "type",      "properties", "required", "additionalProperties",
    "items",     "minItems",   "maxItems", "minLength",
    "maxLength", "enum",       "const",    "anyOf",
    "oneOf",     "$ref",       "$defs",    "definitions",
    "pattern"};

bool IsAnnotation(std::string_view key) {
  return std::find(kAnnotations.begin(), kAnnotations.end(), key) != kAnnotations.end();
}

absl::Status SchemaError(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("JSON schema at {}: {}", Printable(path), what));
}

bool NeedsEscape(unsigned char c) {
  return c == '"' || c == '\\' || c < 0x20;
}

void AppendJsonValue(element value, std::string* out) {
  switch (value.type()) {
    case element_type::STRING:
      AppendJsonString(value.get_string().value_unsafe(), out);
      break;
    case element_type::INT64:
      *out += fmt::format("{}", value.get_int64().value_unsafe());
      break;
    case element_type::UINT64:
      *out += fmt::format("{}", value.get_uint64().value_unsafe());
      break;
    case element_type::DOUBLE:
      *out += fmt::format("{}", value.get_double().value_unsafe());
      break;
    case element_type::BOOL:
      *out += value.get_bool().value_unsafe() ? "true" : "false";
      break;
    case element_type::NULL_VALUE:
      *out += "null";
      break;
    case element_type::ARRAY: {
      out->push_back('[');
      bool first = true;
      const simdjson::dom::array items = value.get_array().value_unsafe();
      for (element item : items) {
        if (!first)
          out->push_back(',');
        first = false;
        AppendJsonValue(item, out);
      }
      out->push_back(']');
      break;
    }
    case element_type::OBJECT: {
      out->push_back('{');
      bool first = true;
      const object fields = value.get_object().value_unsafe();
      for (auto field : fields) {
        if (!first)
          out->push_back(',');
        first = false;
        AppendJsonString(field.key, out);
        out->push_back(':');
        AppendJsonValue(field.value, out);
      }
      out->push_back('}');
      break;
    }
  }
}

bool MatchesType(element value, std::string_view type) {
  const element_type t = value.type();
  const bool integral = t == element_type::INT64 || t == element_type::UINT64;
  if (type == "integer") {
    if (t == element_type::DOUBLE) {
      const double d = value.get_double().value_unsafe();
      return std::isfinite(d) && std::floor(d) == d;
    }
    return integral;
  }
  if (type == "number")
    return integral || t == element_type::DOUBLE;
  if (type == "string")
    return t == element_type::STRING;
  if (type == "boolean")
    return t == element_type::BOOL;
  if (type == "null")
    return t == element_type::NULL_VALUE;
  if (type == "array")
    return t == element_type::ARRAY;
  return type == "object" && t == element_type::OBJECT;
}

// UTF-8 sequences: the length a lead byte announces and the range of its second byte.
int Utf8Length(uint8_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
std::pair<uint8_t, uint8_t> SecondByteRange(uint8_t lead) {
  if (lead == 0xE0)
    return {0xA0, 0xBF};
  if (lead == 0xED)
    return {0x80, 0x9F};
  if (lead == 0xF0)
    return {0x90, 0xBF};
  if (lead == 0xF4)
    return {0x80, 0x8F};
  return {0x80, 0xBF};
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(element root) : root_(root) {}

  absl::StatusOr<std::shared_ptr<const Grammar>> Compile() {
    const int32_t root_rule = b_.NewRule();
    ref_rules_.emplace("#", root_rule);
    SY_RETURN_IF_ERROR(EmitRule(root_rule, root_, "#"));
    while (!pending_.empty()) {
      auto [rule, schema, path] = std::move(pending_.front());
      pending_.pop_front();
      SY_RETURN_IF_ERROR(EmitRule(rule, schema, path));
    }
    return b_.Build(root_rule);
  }

  std::shared_ptr<const Grammar> CompileAnyObject() {
    const int32_t root_rule = b_.NewRule();
    const int32_t end = b_.NewState();
    b_.SetFinal(end);
    EmitAnyObject(b_.RuleStart(root_rule), end);
    absl::StatusOr<std::shared_ptr<const Grammar>> g = b_.Build(root_rule);
    return g.ok() ? *g : nullptr;  // a fixed grammar: always builds
  }

 private:
  struct Pending {
    int32_t rule;
    element schema;
    std::string path;
  };

  absl::Status EmitRule(int32_t rule, element schema, const std::string& path) {
    const int32_t end = b_.NewState();
    b_.SetFinal(end);
    return Emit(schema, path, b_.RuleStart(rule), end, 0);
  }

  // Optional single space after a separator byte; returns the state after both.
  int32_t Sep(int32_t from, char c) {
    const int32_t after = b_.NewState();
    b_.AddByte(from, c, after);
    const int32_t spaced = b_.NewState();
    b_.AddEpsilon(after, spaced);
    b_.AddByte(after, ' ', spaced);
    return spaced;
  }

  // One character of a JSON string body (a UTF-8 character or, with escapes, an escape).
  void AddChar(int32_t from, int32_t to, bool escapes) {
    b_.AddBytes(from, 0x20, 0x21, to);
    b_.AddBytes(from, 0x23, 0x5B, to);
    b_.AddBytes(from, 0x5D, 0x7F, to);
    AddMultibyte(from, to);
    if (!escapes)
      return;
    const int32_t esc = b_.NewState();
    b_.AddByte(from, '\\', esc);
    for (char c : std::string_view("\"\\/bfnrt"))
      b_.AddByte(esc, c, to);
    int32_t at = b_.NewState();
    b_.AddByte(esc, 'u', at);
    for (int i = 0; i < 4; ++i) {
      const int32_t next = i == 3 ? to : b_.NewState();
      b_.AddBytes(at, '0', '9', next);
      b_.AddBytes(at, 'A', 'F', next);
      b_.AddBytes(at, 'a', 'f', next);
      at = next;
    }
  }

  // Well-formed UTF-8 sequences of 2-4 bytes (no overlongs, surrogates or > U+10FFFF).
  void AddMultibyte(int32_t from, int32_t to) {
    const std::array<int32_t, 3> cont = Continuations(to);
    for (int lead = 0xC2; lead <= 0xF4; ++lead) {
      const auto l = static_cast<uint8_t>(lead);
      const int rest = Utf8Length(l) - 1;
      const auto [lo, hi] = SecondByteRange(l);
      if (lo == 0x80 && hi == 0xBF) {
        b_.AddBytes(from, l, l, cont[static_cast<size_t>(rest - 1)]);
      } else {
        const int32_t second = b_.NewState();
        b_.AddBytes(from, l, l, second);
        b_.AddBytes(second, lo, hi, rest == 1 ? to : cont[static_cast<size_t>(rest - 2)]);
      }
    }
  }

  // States from which 1, 2 and 3 continuation bytes lead to `to`.
  std::array<int32_t, 3> Continuations(int32_t to) {
    std::array<int32_t, 3> c{};
    int32_t next = to;
    for (int32_t& s : c) {
      s = b_.NewState();
      b_.AddBytes(s, 0x80, 0xBF, next);
      next = s;
    }
    return c;
  }

  void EmitString(int32_t from, int32_t to, int64_t min_len, std::optional<int64_t> max_len) {
    if (min_len == 0 && !max_len.has_value()) {
      const int32_t body = b_.NewState();
      b_.AddByte(from, '"', body);
      AddChar(body, body, true);
      b_.AddByte(body, '"', to);
      return;
    }
    const int32_t chr = CharRule();
    const int64_t last = max_len.value_or(min_len);
    int32_t at = b_.NewState();
    b_.AddByte(from, '"', at);
    for (int64_t i = 0; i <= last; ++i) {
      if (i >= min_len)
        b_.AddByte(at, '"', to);
      if (i == last) {
        if (!max_len.has_value())
          b_.AddCall(at, chr, at);
        break;
      }
      const int32_t next = b_.NewState();
      b_.AddCall(at, chr, next);
      at = next;
    }
  }

  int32_t CharRule() {
    if (char_rule_ < 0) {
      char_rule_ = b_.NewRule();
      const int32_t end = b_.NewState();
      b_.SetFinal(end);
      AddChar(b_.RuleStart(char_rule_), end, true);
    }
    return char_rule_;
  }

  void EmitNumber(int32_t from, int32_t to, bool integer) {
    const int32_t sign = b_.NewState();
    b_.AddEpsilon(from, sign);
    const int32_t neg = b_.NewState();
    b_.AddByte(from, '-', neg);
    b_.AddEpsilon(neg, sign);
    const int32_t whole = b_.NewState();
    b_.AddByte(sign, '0', whole);
    const int32_t digits = b_.NewState();
    b_.AddBytes(sign, '1', '9', digits);
    b_.AddBytes(digits, '0', '9', digits);
    b_.AddEpsilon(digits, whole);
    if (integer) {
      b_.AddEpsilon(whole, to);
      return;
    }
    const int32_t frac_done = b_.NewState();
    b_.AddEpsilon(whole, frac_done);
    const int32_t dot = b_.NewState();
    b_.AddByte(whole, '.', dot);
    const int32_t frac = b_.NewState();
    b_.AddBytes(dot, '0', '9', frac);
    b_.AddBytes(frac, '0', '9', frac);
    b_.AddEpsilon(frac, frac_done);
    b_.AddEpsilon(frac_done, to);
    const int32_t e = b_.NewState();
    b_.AddByte(frac_done, 'e', e);
    b_.AddByte(frac_done, 'E', e);
    const int32_t esign = b_.NewState();
    b_.AddEpsilon(e, esign);
    b_.AddByte(e, '+', esign);
    b_.AddByte(e, '-', esign);
    const int32_t exp = b_.NewState();
    b_.AddBytes(esign, '0', '9', exp);
    b_.AddBytes(exp, '0', '9', exp);
    b_.AddEpsilon(exp, to);
  }

  int32_t AnyRule() {
    if (any_rule_ < 0) {
      any_rule_ = b_.NewRule();
      const int32_t from = b_.RuleStart(any_rule_);
      const int32_t to = b_.NewState();
      b_.SetFinal(to);
      EmitAnyObject(from, to);
      const int32_t open = b_.NewState();
      b_.AddByte(from, '[', open);
      b_.AddByte(open, ']', to);
      const int32_t item = b_.NewState();
      b_.AddEpsilon(open, item);
      const int32_t after = b_.NewState();
      b_.AddCall(item, any_rule_, after);
      b_.AddByte(after, ']', to);
      b_.AddEpsilon(Sep(after, ','), item);
      EmitString(from, to, 0, std::nullopt);
      EmitNumber(from, to, false);
      b_.AddLiteral(from, "true", to);
      b_.AddLiteral(from, "false", to);
      b_.AddLiteral(from, "null", to);
    }
    return any_rule_;
  }

  void EmitAnyObject(int32_t from, int32_t to) {
    const int32_t open = b_.NewState();
    b_.AddByte(from, '{', open);
    b_.AddByte(open, '}', to);
    const int32_t key = b_.NewState();
    b_.AddEpsilon(open, key);
    const int32_t key_done = b_.NewState();
    EmitString(key, key_done, 0, std::nullopt);
    const int32_t after = b_.NewState();
    b_.AddCall(Sep(key_done, ':'), AnyRule(), after);
    b_.AddByte(after, '}', to);
    b_.AddEpsilon(Sep(after, ','), key);
  }

  // `"key"` for an additional property: no escapes, never one of `names` (the listed
  // properties, which would otherwise be checked against the wrong schema).
  void EmitKeyExcluding(int32_t from, int32_t to, const std::vector<std::string>& names) {
    const int32_t free = b_.NewState();
    AddChar(free, free, false);
    b_.AddByte(free, '"', to);
    const std::array<int32_t, 3> cont = Continuations(free);
    // A byte trie of the names that an escape-free key can spell.
    struct TrieNode {
      std::vector<std::pair<uint8_t, int32_t>> children;
      bool terminal = false;
      int32_t state = 0;
      uint8_t lead = 0;  // lead byte of the character in progress; 0 at a boundary
      int consumed = 0;  // bytes of that character read so far
    };
    std::vector<TrieNode> trie(1);
    trie[0].state = b_.NewState();
    b_.AddByte(from, '"', trie[0].state);
    for (const std::string& name : names) {
      if (std::any_of(name.begin(), name.end(),
                      [](char c) { return NeedsEscape(static_cast<unsigned char>(c)); })) {
        continue;
      }
      size_t at = 0;
      for (char ch : name) {
        const auto c = static_cast<uint8_t>(ch);
        auto& kids = trie[at].children;
        auto it =
            std::find_if(kids.begin(), kids.end(), [c](const auto& k) { return k.first == c; });
        if (it != kids.end()) {
          at = static_cast<size_t>(it->second);
          continue;
        }
        TrieNode child;
        child.state = b_.NewState();
        const TrieNode& parent = trie[at];
        if (parent.lead == 0 && c >= 0x80) {
          child.lead = c;
          child.consumed = 1;
        } else if (parent.lead != 0 && parent.consumed + 1 < Utf8Length(parent.lead)) {
          child.lead = parent.lead;
          child.consumed = parent.consumed + 1;
        }
        trie[at].children.emplace_back(c, static_cast<int32_t>(trie.size()));
        at = trie.size();
        trie.push_back(std::move(child));
      }
      trie[at].terminal = true;
    }
    for (const TrieNode& node : trie) {
      std::array<int32_t, 256> target{};
      target.fill(-1);
      if (node.lead == 0) {
        for (int c = 0x20; c < 0x80; ++c)
          target[static_cast<size_t>(c)] = c == '"' || c == '\\' ? -1 : free;
        for (int lead = 0xC2; lead <= 0xF4; ++lead) {
          // Leaving the trie on a lead byte: the rest of that character, then anything.
          const auto l = static_cast<uint8_t>(lead);
          const auto [lo, hi] = SecondByteRange(l);
          const int rest = Utf8Length(l) - 1;
          if (lo == 0x80 && hi == 0xBF) {
            target[l] = cont[static_cast<size_t>(rest - 1)];
          } else {
            target[l] = LeadState(l, rest == 1 ? free : cont[static_cast<size_t>(rest - 2)]);
          }
        }
      } else {
        const auto [lo, hi] = node.consumed == 1 ? SecondByteRange(node.lead)
                                                 : std::pair<uint8_t, uint8_t>{0x80, 0xBF};
        const int rest = Utf8Length(node.lead) - node.consumed - 1;
        for (int c = lo; c <= hi; ++c)
          target[static_cast<size_t>(c)] = rest == 0 ? free : cont[static_cast<size_t>(rest - 1)];
      }
      for (const auto& [c, child] : node.children)
        target[c] = trie[static_cast<size_t>(child)].state;
      AddTargets(node.state, target);
      if (!node.terminal)
        b_.AddByte(node.state, '"', to);
    }
  }

  // A state reached by lead byte `lead` whose second byte (in its special range) leads on.
  int32_t LeadState(uint8_t lead, int32_t next) {
    const auto [lo, hi] = SecondByteRange(lead);
    const int32_t s = b_.NewState();
    b_.AddBytes(s, lo, hi, next);
    return s;
  }

  // Byte edges from `from` as given per byte (-1: none), runs with one target merged.
  void AddTargets(int32_t from, const std::array<int32_t, 256>& target) {
    int c = 0;
    while (c < 256) {
      const int32_t t = target[static_cast<size_t>(c)];
      int end = c;
      while (end + 1 < 256 && target[static_cast<size_t>(end) + 1] == t)
        ++end;
      if (t >= 0)
        b_.AddBytes(from, static_cast<uint8_t>(c), static_cast<uint8_t>(end), t);
      c = end + 1;
    }
  }

  absl::Status CheckKeywords(object schema, const std::string& path) {
    for (auto field : schema) {
      const std::string_view key = field.key;
      if (key == "pattern")
        return SchemaError(path, "the 'pattern' keyword is not supported");
      if (!IsAnnotation(key) &&
          std::find(kKeywords.begin(), kKeywords.end(), key) == kKeywords.end())
        return SchemaError(path, fmt::format("unsupported keyword '{}'", Printable(key)));
    }
    return absl::OkStatus();
  }

  // Keywords of `schema` beside those in `allowed` that constrain (not annotations or
  // definition containers).
  static std::optional<std::string_view> OtherKeyword(
      object schema, std::initializer_list<std::string_view> allowed) {
    for (auto field : schema) {
      const std::string_view key = field.key;
      if (IsAnnotation(key) || key == "$defs" || key == "definitions")
        continue;
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        return key;
    }
    return std::nullopt;
  }

  absl::StatusOr<int64_t> Count(object schema, std::string_view key, const std::string& path,
                                int64_t fallback) {
    element value;
    if (schema[key].get(value) != simdjson::SUCCESS)
      return fallback;
    int64_t n = 0;
    if (value.get_int64().get(n) != simdjson::SUCCESS) {
      double d = 0;
      if (value.get_double().get(d) != simdjson::SUCCESS || std::floor(d) != d || d < 0 ||
          d > static_cast<double>(kMaxCount)) {
        return SchemaError(path, fmt::format("'{}' must be a non-negative integer", key));
      }
      n = static_cast<int64_t>(d);
    }
    if (n < 0)
      return SchemaError(path, fmt::format("'{}' must be a non-negative integer", key));
    if (n > kMaxCount)
      return SchemaError(path, fmt::format("'{}' above {} is not supported", key, kMaxCount));
    return n;
  }

  absl::StatusOr<int32_t> RefRule(std::string_view uri, const std::string& path) {
    auto it = ref_rules_.find(absl::string_view(uri.data(), uri.size()));
    if (it != ref_rules_.end())
      return it->second;
    if (uri.size() < 2 || uri.substr(0, 2) != "#/") {
      return SchemaError(path, fmt::format("$ref '{}' is not supported (only '#' and '#/...' "
                                           "references into the schema itself)",
                                           Printable(uri)));
    }
    element at = root_;
    std::string_view rest = uri.substr(2);
    while (true) {
      const size_t slash = rest.find('/');
      std::string token(rest.substr(0, slash));
      for (size_t p = 0; (p = token.find('~', p)) != std::string::npos; ++p) {
        if (p + 1 < token.size() && (token[p + 1] == '0' || token[p + 1] == '1'))
          token.replace(p, 2, token[p + 1] == '0' ? "~" : "/");
      }
      element next;
      bool found = false;
      if (at.is_object()) {
        found = at.get_object().value_unsafe()[token].get(next) == simdjson::SUCCESS;
      } else if (at.is_array() && !token.empty() &&
                 std::all_of(token.begin(), token.end(),
                             [](char c) { return c >= '0' && c <= '9'; }) &&
                 token.size() < 9) {
        found = at.get_array().value_unsafe().at(std::stoul(token)).get(next) == simdjson::SUCCESS;
      }
      if (!found)
        return SchemaError(path, fmt::format("$ref '{}' does not resolve", Printable(uri)));
      at = next;
      if (slash == std::string_view::npos)
        break;
      rest = rest.substr(slash + 1);
    }
    const int32_t rule = b_.NewRule();
    ref_rules_.emplace(std::string(uri), rule);
    pending_.push_back({rule, at, std::string(uri)});
    return rule;
  }

  absl::Status Emit(element schema, const std::string& path, int32_t from, int32_t to,
                    size_t depth) {
    if (depth > kMaxSchemaDepth)
      return SchemaError(path, "the schema is nested too deeply");
    if (b_.num_states() > GrammarBuilder::kMaxStates)
      return SchemaError(path, "the schema is too large");
    bool flag = false;
    if (schema.get_bool().get(flag) == simdjson::SUCCESS) {
      if (!flag)
        return SchemaError(path, "the schema 'false' matches nothing");
      b_.AddCall(from, AnyRule(), to);
      return absl::OkStatus();
    }
    object obj;
    if (schema.get_object().get(obj) != simdjson::SUCCESS)
      return SchemaError(path, "a schema must be an object or a boolean");
    SY_RETURN_IF_ERROR(CheckKeywords(obj, path));

    element value;
    if (obj["$ref"].get(value) == simdjson::SUCCESS) {
      if (auto other = OtherKeyword(obj, {"$ref"}))
        return SchemaError(path,
                           fmt::format("'$ref' beside '{}' is not supported", Printable(*other)));
      std::string_view uri;
      if (value.get_string().get(uri) != simdjson::SUCCESS)
        return SchemaError(path, "'$ref' must be a string");
      SY_ASSIGN_OR_RETURN(int32_t rule, RefRule(uri, path));
      b_.AddCall(from, rule, to);
      return absl::OkStatus();
    }
    const bool any_of = obj["anyOf"].get(value) == simdjson::SUCCESS;
    const bool one_of = obj["oneOf"].error() == simdjson::SUCCESS;
    if (any_of || one_of) {
      const std::string_view key = any_of ? "anyOf" : "oneOf";
      if (auto other = OtherKeyword(obj, {key}))
        return SchemaError(
            path, fmt::format("'{}' beside '{}' is not supported", key, Printable(*other)));
      simdjson::dom::array options;
      if (obj[key].get_array().get(options) != simdjson::SUCCESS || options.size() == 0)
        return SchemaError(path, fmt::format("'{}' must be a non-empty array", key));
      size_t i = 0;
      for (element option : options) {
        SY_RETURN_IF_ERROR(
            Emit(option, fmt::format("{}/{}/{}", path, key, i++), from, to, depth + 1));
      }
      return absl::OkStatus();
    }

    std::vector<std::string_view> types;
    if (obj["type"].get(value) == simdjson::SUCCESS) {
      std::string_view one;
      simdjson::dom::array list;
      if (value.get_string().get(one) == simdjson::SUCCESS) {
        types.push_back(one);
      } else if (value.get_array().get(list) == simdjson::SUCCESS && list.size() > 0) {
        for (element t : list) {
          if (t.get_string().get(one) != simdjson::SUCCESS)
            return SchemaError(path, "'type' must be a string or an array of strings");
          types.push_back(one);
        }
      } else {
        return SchemaError(path, "'type' must be a string or a non-empty array of strings");
      }
      static constexpr std::array<std::string_view, 7> kTypes = {
          "object", "array", "string", "number", "integer", "boolean", "null"};
      for (std::string_view t : types) {
        if (std::find(kTypes.begin(), kTypes.end(), t) == kTypes.end())
          return SchemaError(path, fmt::format("unknown type '{}'", Printable(t)));
      }
    }

    const bool has_enum = obj["enum"].error() == simdjson::SUCCESS;
    const bool has_const = obj["const"].error() == simdjson::SUCCESS;
    if (has_enum || has_const) {
      if (auto other = OtherKeyword(obj, {"enum", "const", "type"})) {
        return SchemaError(path, fmt::format("'{}' beside '{}' is not supported",
                                             has_enum ? "enum" : "const", Printable(*other)));
      }
      return EmitEnum(obj, types, path, from, to);
    }

    if (types.empty()) {
      // No type: the keywords present say which kind of value they constrain.
      const bool object_kw = obj["properties"].error() == simdjson::SUCCESS ||
                             obj["required"].error() == simdjson::SUCCESS ||
                             obj["additionalProperties"].error() == simdjson::SUCCESS;
      const bool array_kw = obj["items"].error() == simdjson::SUCCESS ||
                            obj["minItems"].error() == simdjson::SUCCESS ||
                            obj["maxItems"].error() == simdjson::SUCCESS;
      const bool string_kw = obj["minLength"].error() == simdjson::SUCCESS ||
                             obj["maxLength"].error() == simdjson::SUCCESS;
      if (object_kw + array_kw + string_kw > 1)
        return SchemaError(path, "keywords of several types without 'type' are not supported");
      if (object_kw) {
        types.emplace_back("object");
      } else if (array_kw) {
        types.emplace_back("array");
      } else if (string_kw) {
        types.emplace_back("string");
      } else {
        b_.AddCall(from, AnyRule(), to);
        return absl::OkStatus();
      }
    }
    const bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
    for (std::string_view t : types) {
      if (t == "integer" && has_number)
        continue;  // every integer is a number
      SY_RETURN_IF_ERROR(EmitTyped(obj, t, path, from, to, depth));
    }
    return absl::OkStatus();
  }

  absl::Status EmitEnum(object obj, const std::vector<std::string_view>& types,
                        const std::string& path, int32_t from, int32_t to) {
    std::vector<element> values;
    element value;
    if (obj["const"].get(value) == simdjson::SUCCESS)
      values.push_back(value);
    if (obj["enum"].get(value) == simdjson::SUCCESS) {
      simdjson::dom::array list;
      if (value.get_array().get(list) != simdjson::SUCCESS)
        return SchemaError(path, "'enum' must be an array");
      std::vector<element> listed;
      for (element e : list)
        listed.push_back(e);
      if (!values.empty()) {
        // const and enum together: the const value, if the enum lists it.
        std::string c;
        AppendJsonValue(values[0], &c);
        const bool listed_const = std::any_of(listed.begin(), listed.end(), [&](element e) {
          std::string s;
          AppendJsonValue(e, &s);
          return s == c;
        });
        if (!listed_const)
          values.clear();
      } else {
        values = std::move(listed);
      }
    }
    bool any = false;
    std::string text;
    for (element v : values) {
      if (!types.empty() && std::none_of(types.begin(), types.end(),
                                         [v](std::string_view t) { return MatchesType(v, t); })) {
        continue;
      }
      text.clear();
      AppendJsonValue(v, &text);
      if (b_.num_states() + static_cast<int64_t>(text.size()) > GrammarBuilder::kMaxStates)
        return SchemaError(path, "the schema is too large");
      b_.AddLiteral(from, text, to);
      any = true;
    }
    if (!any)
      return SchemaError(path, "'enum'/'const' leave no value to generate");
    return absl::OkStatus();
  }

  absl::Status EmitTyped(object obj, std::string_view type, const std::string& path, int32_t from,
                         int32_t to, size_t depth) {
    if (type == "object")
      return EmitObject(obj, path, from, to, depth);
    if (type == "array")
      return EmitArray(obj, path, from, to, depth);
    if (type == "string") {
      SY_ASSIGN_OR_RETURN(int64_t min_len, Count(obj, "minLength", path, 0));
      SY_ASSIGN_OR_RETURN(int64_t max_len, Count(obj, "maxLength", path, -1));
      if (max_len >= 0 && max_len < min_len)
        return SchemaError(path, "'maxLength' is below 'minLength'");
      EmitString(from, to, min_len, max_len >= 0 ? std::optional<int64_t>(max_len) : std::nullopt);
      return absl::OkStatus();
    }
    if (type == "number" || type == "integer") {
      EmitNumber(from, to, type == "integer");
      return absl::OkStatus();
    }
    if (type == "boolean") {
      b_.AddLiteral(from, "true", to);
      b_.AddLiteral(from, "false", to);
      return absl::OkStatus();
    }
    b_.AddLiteral(from, "null", to);
    return absl::OkStatus();
  }

  absl::Status EmitObject(object obj, const std::string& path, int32_t from, int32_t to,
                          size_t depth) {
    struct Property {
      std::string_view name;
      element schema;
      bool required = false;
    };
    std::vector<Property> props;
    element value;
    if (obj["properties"].get(value) == simdjson::SUCCESS) {
      object map;
      if (value.get_object().get(map) != simdjson::SUCCESS)
        return SchemaError(path, "'properties' must be an object");
      for (auto field : map)
        props.push_back({field.key, field.value, false});
    }
    if (obj["required"].get(value) == simdjson::SUCCESS) {
      simdjson::dom::array list;
      if (value.get_array().get(list) != simdjson::SUCCESS)
        return SchemaError(path, "'required' must be an array of strings");
      for (element r : list) {
        std::string_view name;
        if (r.get_string().get(name) != simdjson::SUCCESS)
          return SchemaError(path, "'required' must be an array of strings");
        auto it = std::find_if(props.begin(), props.end(),
                               [name](const Property& p) { return p.name == name; });
        if (it == props.end()) {
          return SchemaError(
              path, fmt::format("required property '{}' is not in 'properties'", Printable(name)));
        }
        it->required = true;
      }
    }
    // Absent additionalProperties: none beside listed properties (xgrammar's strict default),
    // any when nothing is listed.
    enum class Extra { kNone, kAny, kSchema };
    Extra extra = props.empty() ? Extra::kAny : Extra::kNone;
    element extra_schema;
    if (obj["additionalProperties"].get(value) == simdjson::SUCCESS) {
      bool allowed = false;
      if (value.get_bool().get(allowed) == simdjson::SUCCESS) {
        extra = allowed ? Extra::kAny : Extra::kNone;
      } else if (value.is_object()) {
        extra = Extra::kSchema;
        extra_schema = value;
      } else {
        return SchemaError(path, "'additionalProperties' must be a boolean or a schema");
      }
    }

    const int32_t open = b_.NewState();
    b_.AddByte(from, '{', open);
    // Before each property: `none_yet` if nothing was written (-1 once a required property
    // passed), `some` if something was (-1 before the first); the latter needs a comma.
    int32_t none_yet = open;
    int32_t some = -1;
    std::string key;
    for (const Property& p : props) {
      const int32_t key_start = b_.NewState();
      if (none_yet >= 0)
        b_.AddEpsilon(none_yet, key_start);
      if (some >= 0)
        b_.AddEpsilon(Sep(some, ','), key_start);
      key.clear();
      AppendJsonString(p.name, &key);
      const int32_t colon = b_.NewState();
      b_.AddLiteral(key_start, key, colon);
      const int32_t next_some = b_.NewState();
      const std::string child_path = fmt::format("{}/properties/{}", path, p.name);
      SY_RETURN_IF_ERROR(Emit(p.schema, child_path, Sep(colon, ':'), next_some, depth + 1));
      // Leaving an optional property out keeps both states where they are.
      if (!p.required && some >= 0)
        b_.AddEpsilon(some, next_some);
      if (p.required)
        none_yet = -1;
      some = next_some;
    }
    // The object ends after the listed properties, or takes additional ones there.
    const int32_t close = b_.NewState();
    b_.AddByte(close, '}', to);
    if (none_yet >= 0)
      b_.AddEpsilon(none_yet, close);
    if (some >= 0)
      b_.AddEpsilon(some, close);
    if (extra == Extra::kNone)
      return absl::OkStatus();
    const int32_t extra_key = b_.NewState();
    const int32_t extra_done = b_.NewState();
    if (none_yet >= 0)
      b_.AddEpsilon(none_yet, extra_key);
    const int32_t comma = b_.NewState();
    if (some >= 0)
      b_.AddEpsilon(some, comma);
    b_.AddEpsilon(extra_done, comma);
    b_.AddEpsilon(Sep(comma, ','), extra_key);
    b_.AddEpsilon(extra_done, close);
    std::vector<std::string> names;
    names.reserve(props.size());
    for (const Property& p : props)
      names.emplace_back(p.name);
    const int32_t colon = b_.NewState();
    EmitKeyExcluding(extra_key, colon, names);
    if (extra == Extra::kAny) {
      b_.AddCall(Sep(colon, ':'), AnyRule(), extra_done);
      return absl::OkStatus();
    }
    return Emit(extra_schema, path + "/additionalProperties", Sep(colon, ':'), extra_done,
                depth + 1);
  }

  absl::Status EmitArray(object obj, const std::string& path, int32_t from, int32_t to,
                         size_t depth) {
    SY_ASSIGN_OR_RETURN(int64_t min_items, Count(obj, "minItems", path, 0));
    SY_ASSIGN_OR_RETURN(int64_t max_items, Count(obj, "maxItems", path, -1));
    element items;
    int32_t item_rule = -1;
    if (obj["items"].get(items) == simdjson::SUCCESS) {
      bool allowed = true;
      if (items.is_array())
        return SchemaError(path, "the array form of 'items' is not supported");
      if (items.get_bool().get(allowed) == simdjson::SUCCESS && !allowed) {
        max_items = 0;
      } else {
        item_rule = b_.NewRule();
        const int32_t end = b_.NewState();
        b_.SetFinal(end);
        SY_RETURN_IF_ERROR(Emit(items, path + "/items", b_.RuleStart(item_rule), end, depth + 1));
      }
    } else {
      item_rule = AnyRule();
    }
    if (max_items >= 0 && max_items < min_items)
      return SchemaError(path, "'maxItems' is below 'minItems' (or 'items' is false)");
    const int32_t open = b_.NewState();
    b_.AddByte(from, '[', open);
    const int64_t last = max_items >= 0 ? max_items : std::max<int64_t>(min_items, 1);
    int32_t at = open;  // after i items
    for (int64_t i = 0; i <= last; ++i) {
      if (i >= min_items)
        b_.AddByte(at, ']', to);
      if (i == last) {
        if (max_items < 0)
          b_.AddCall(Sep(at, ','), item_rule, at);
        break;
      }
      const int32_t next = b_.NewState();
      b_.AddCall(i == 0 ? at : Sep(at, ','), item_rule, next);
      at = next;
    }
    return absl::OkStatus();
  }

  GrammarBuilder b_;
  element root_;
  absl::flat_hash_map<std::string, int32_t> ref_rules_;
  std::deque<Pending> pending_;
  int32_t any_rule_ = -1;
  int32_t char_rule_ = -1;
};

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          *out += "\\n";
          break;
        case '\r':
          *out += "\\r";
          break;
        case '\t':
          *out += "\\t";
          break;
        case '\b':
          *out += "\\b";
          break;
        case '\f':
          *out += "\\f";
          break;
        default:
          *out += fmt::format("\\u{:04x}", c);
      }
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

absl::StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(std::string_view schema_json) {
  simdjson::dom::parser parser;
  if (parser.allocate(schema_json.size() + simdjson::SIMDJSON_PADDING, kMaxSchemaDepth + 8) !=
      simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the JSON schema is too large");
  }
  const simdjson::padded_string padded(schema_json);
  element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS)
    return absl::InvalidArgumentError("the JSON schema is not valid JSON (or nests too deeply)");
  SchemaCompiler compiler(root);
  return compiler.Compile();
}

std::shared_ptr<const Grammar> JsonObjectGrammar() {
  static const std::shared_ptr<const Grammar> kGrammar =
      SchemaCompiler(simdjson::dom::element()).CompileAnyObject();
  return kGrammar;
}

}  // namespace switchyard::structured
