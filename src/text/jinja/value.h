// Values of the Jinja interpreter, with Python semantics: None, bool, int, float, str,
// list/tuple, dict (insertion ordered), namespace, callables (macros and builtins), the loop
// object and Undefined. Lists and dicts are immutable once built (the sandbox forbids
// mutation), so they are shared by pointer; namespaces are the one mutable object. Values
// belong to one render on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace switchyard::text::jinja {

class Value;
class Interpreter;

// Containers nest at most this deep, so that printing, comparing and freeing them never
// recurse without bound.
inline constexpr int kMaxNesting = 256;

struct List {
  std::vector<Value> items;
  bool is_tuple = false;
  bool is_group = false;  // A groupby result: a (grouper, list) tuple with those attributes.
  int depth = 1;
};

struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  int depth = 1;
  // Returns the entry's value or nullptr.
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  // Inserts or replaces, keeping the first insertion's position as Python does.
  void Set(Value key, Value value);
};

struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;
  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value value);
};

// Positional and keyword arguments of one call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  const Value* Keyword(std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<absl::StatusOr<Value>(Interpreter&, CallArgs&)> fn;
};

struct LoopState;

struct Undefined {
  std::string hint;  // Why it is undefined, for UndefinedError messages.
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable,
    kLoop
  };

  Value() : data_(Undefined{}) {}
  static Value MakeUndefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value None() { return Value(std::monostate{}); }
  // NOLINTBEGIN(google-explicit-constructor): implicit, so that builtins read as Python.
  Value(bool b) : data_(b) {}
  Value(int64_t i) : data_(i) {}
  Value(int i) : data_(static_cast<int64_t>(i)) {}
  Value(double f) : data_(f) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(std::shared_ptr<const List> l) : data_(std::move(l)) {}
  Value(std::shared_ptr<const Dict> d) : data_(std::move(d)) {}
  Value(std::shared_ptr<Namespace> n) : data_(std::move(n)) {}
  Value(std::shared_ptr<const Callable> c) : data_(std::move(c)) {}
  Value(std::shared_ptr<LoopState> l) : data_(std::move(l)) {}
  // NOLINTEND(google-explicit-constructor)
  // Fail when the result would nest deeper than kMaxNesting.
  static absl::StatusOr<Value> MakeList(std::vector<Value> items, bool is_tuple = false);
  static absl::StatusOr<Value> MakeDict(Dict dict);
  // Nesting depth: 0 for scalars.
  int depth() const;

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }
  bool is_loop() const { return kind() == Kind::kLoop; }

  bool as_bool() const { return std::get<bool>(data_); }
  // Ints and bools as int64 (True is 1, as in Python).
  int64_t as_int() const { return is_bool() ? as_bool() : std::get<int64_t>(data_); }
  double as_double() const {
    return is_float() ? std::get<double>(data_) : static_cast<double>(as_int());
  }
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  LoopState& as_loop() const { return *std::get<std::shared_ptr<LoopState>>(data_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }

  // Python truthiness.
  bool Truthy() const;
  // Python's type name for messages ("str", "dict", ...).
  std::string TypeName() const;

 private:
  explicit Value(Undefined u) : data_(std::move(u)) {}
  explicit Value(std::monostate n) : data_(n) {}
  std::variant<Undefined, std::monostate, bool, int64_t, double, std::string,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Namespace>,
               std::shared_ptr<const Callable>, std::shared_ptr<LoopState>>
      data_;
};

// Python str(v) (what {{ v }} prints) and repr(v). Fail only past the nesting limit.
absl::StatusOr<std::string> ToStr(const Value& v);
absl::StatusOr<std::string> ToRepr(const Value& v);
// Python repr of a float, e.g. 1.0, 1e+20, 0.0001, inf, nan.
std::string FloatRepr(double f);
// Python repr of a str: quoted with ' (or " when only ' occurs), escapes as CPython does.
void AppendStringRepr(std::string_view s, std::string* out);

// Python ==, with 1 == 1.0 == True and element-wise lists and dicts.
bool Equals(const Value& a, const Value& b);
// Python <; TypeError for unorderable pairs.
absl::StatusOr<bool> LessThan(const Value& a, const Value& b);

// Number of code points of a str, items of a list or dict, or error for other types.
absl::StatusOr<int64_t> Length(const Value& v);
// Items a for-loop visits: list items, dict keys, str code points; Undefined gives none.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);

// Parses JSON text into a Value (objects keep key order). `what` names it in errors.
absl::StatusOr<Value> ValueFromJson(std::string_view json, std::string_view what);

struct JsonOptions {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_indent = false;
  std::string indent;  // One level of indentation when has_indent.
  std::string item_separator = ", ";
  std::string key_separator = ": ";
};
// json.dumps(v) with `options`.
absl::StatusOr<std::string> ToJson(const Value& v, const JsonOptions& options);

// UTF-8 helpers with Python's code-point indexing.
std::vector<std::string_view> SplitCodePoints(std::string_view s);

}  // namespace switchyard::text::jinja
