#include "text/jinja/interpreter.h"

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/builtins.h"

namespace switchyard::text::jinja {

const Value* Frame::Find(std::string_view name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
    for (const auto& [k, v] : f->vars) {
      if (k == name)
        return &v;
    }
  }
  return nullptr;
}

void Frame::Set(std::string_view name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

absl::Status UndefinedError(const Value& undefined) {
  return absl::InvalidArgumentError(fmt::format("UndefinedError: {}", undefined.undefined_hint()));
}

Interpreter::~Interpreter() {
  // Macros close over the frames that hold them, and namespaces may hold themselves: clear
  // both so that the cycles free.
  for (auto& frame : closures_)
    frame->vars.clear();
  for (auto& ns : namespaces_)
    ns->attrs.clear();
}

absl::Status Interpreter::Step() {
  if (++steps_ > limits_.max_steps) {
    return absl::ResourceExhaustedError(
        fmt::format("template exceeded {} evaluation steps (runaway loop?)", limits_.max_steps));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckSize(size_t size) const {
  if (size > limits_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        fmt::format("template output exceeds {} bytes", limits_.max_output_bytes));
  }
  return absl::OkStatus();
}

std::shared_ptr<Namespace> Interpreter::NewNamespace() {
  namespaces_.push_back(std::make_shared<Namespace>());
  return namespaces_.back();
}

absl::Status Interpreter::Annotate(absl::Status st, int line) const {
  if (st.ok() || st.message().substr(0, 9) == "template ")
    return st;
  return absl::Status(st.code(),
                      fmt::format("template error (line {}): {}", line, std::string(st.message())));
}

absl::StatusOr<std::string> Interpreter::Render(
    const Body& body, std::vector<std::pair<std::string, Value>> globals) {
  auto root = std::make_shared<Frame>();
  closures_.push_back(root);
  root->vars = std::move(globals);
  auto top = std::make_shared<Frame>();
  top->parent = root;
  closures_.push_back(top);
  std::string out;
  SY_RETURN_IF_ERROR(ExecBody(body, top, &out).status());
  return out;
}

absl::StatusOr<Interpreter::Flow> Interpreter::ExecBody(const Body& body,
                                                        const std::shared_ptr<Frame>& frame,
                                                        std::string* out) {
  for (const auto& s : body) {
    SY_ASSIGN_OR_RETURN(Flow flow, Exec(*s, frame, out));
    if (flow != Flow::kNormal)
      return flow;
  }
  return Flow::kNormal;
}

namespace {

struct DepthGuard {
  explicit DepthGuard(int* d) : depth(d) { ++*depth; }
  ~DepthGuard() { --*depth; }
  int* depth;
};

}  // namespace

absl::StatusOr<Interpreter::Flow> Interpreter::Exec(const Stmt& s,
                                                    const std::shared_ptr<Frame>& frame,
                                                    std::string* out) {
  SY_RETURN_IF_ERROR(Annotate(Step(), s.line));
  switch (s.kind) {
    case Stmt::Kind::kData:
      out->append(s.text);
      SY_RETURN_IF_ERROR(Annotate(CheckSize(out->size()), s.line));
      return Flow::kNormal;
    case Stmt::Kind::kPrint: {
      SY_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
      auto text = ToStr(v);
      if (!text.ok())
        return Annotate(text.status(), s.line);
      out->append(*text);
      SY_RETURN_IF_ERROR(Annotate(CheckSize(out->size()), s.line));
      return Flow::kNormal;
    }
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conditions.size(); ++i) {
        SY_ASSIGN_OR_RETURN(Value cond, Eval(*s.conditions[i], frame));
        if (cond.Truthy())
          return ExecBody(s.bodies[i], frame, out);
      }
      return ExecBody(s.else_body, frame, out);
    case Stmt::Kind::kFor: {
      SY_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, frame));
      SY_RETURN_IF_ERROR(ExecFor(s, iterable, frame, 0, out));
      return Flow::kNormal;
    }
    case Stmt::Kind::kSet: {
      SY_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, frame));
      SY_RETURN_IF_ERROR(Annotate(ExecSet(s, std::move(v), *frame), s.line));
      return Flow::kNormal;
    }
    case Stmt::Kind::kSetBlock: {
      std::string text;
      DepthGuard guard(&depth_);
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      SY_RETURN_IF_ERROR(ExecBody(s.body, scope, &text).status());
      Value v(std::move(text));
      if (s.filter) {
        SY_ASSIGN_OR_RETURN(v, EvalFilter(*s.filter, std::move(v), frame));
      }
      frame->Set(s.targets[0], std::move(v));
      return Flow::kNormal;
    }
    case Stmt::Kind::kMacro:
      closures_.push_back(frame);
      frame->Set(s.text, MakeMacro(s, frame, false));
      return Flow::kNormal;
    case Stmt::Kind::kCallBlock: {
      const Expr& call = *s.expr;
      SY_ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0], frame));
      SY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, 1, frame));
      closures_.push_back(frame);
      args.keyword.emplace_back("caller", MakeMacro(s, frame, true));
      auto result = CallValue(callee, args);
      if (!result.ok())
        return Annotate(result.status(), s.line);
      auto text = ToStr(*result);
      if (!text.ok())
        return Annotate(text.status(), s.line);
      out->append(*text);
      SY_RETURN_IF_ERROR(Annotate(CheckSize(out->size()), s.line));
      return Flow::kNormal;
    }
    case Stmt::Kind::kFilterBlock: {
      std::string text;
      SY_RETURN_IF_ERROR(ExecBody(s.body, frame, &text).status());
      SY_ASSIGN_OR_RETURN(Value v, EvalFilter(*s.filter, Value(std::move(text)), frame));
      auto printed = ToStr(v);
      if (!printed.ok())
        return Annotate(printed.status(), s.line);
      out->append(*printed);
      return Flow::kNormal;
    }
    case Stmt::Kind::kBreak:
      return Flow::kBreak;
    case Stmt::Kind::kContinue:
      return Flow::kContinue;
    case Stmt::Kind::kScope: {
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      for (const auto& [name, expr] : s.assignments) {
        SY_ASSIGN_OR_RETURN(Value v, Eval(*expr, frame));
        scope->Set(name, std::move(v));
      }
      DepthGuard guard(&depth_);
      if (depth_ > limits_.max_call_depth) {
        return Annotate(absl::ResourceExhaustedError("template nesting too deep"), s.line);
      }
      SY_RETURN_IF_ERROR(ExecBody(s.body, scope, out).status());
      return Flow::kNormal;
    }
  }
  return Flow::kNormal;
}

absl::Status Interpreter::ExecSet(const Stmt& s, Value value, Frame& frame) {
  if (!s.ns_attr.empty()) {
    const Value* target = frame.Find(s.targets[0]);
    if (target == nullptr || !target->is_namespace()) {
      return absl::InvalidArgumentError("cannot assign attribute on non-namespace object");
    }
    if (s.ns_attr[0] == '_') {
      return absl::PermissionDeniedError(fmt::format(
          "SecurityError: cannot store underscore-prefixed attribute '{}' on a namespace",
          s.ns_attr));
    }
    target->as_namespace().Set(s.ns_attr, std::move(value));
    return absl::OkStatus();
  }
  if (s.targets.size() == 1) {
    frame.Set(s.targets[0], std::move(value));
    return absl::OkStatus();
  }
  SY_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
  if (items.size() != s.targets.size()) {
    return absl::InvalidArgumentError(
        fmt::format("ValueError: cannot unpack {} values into {}", items.size(), s.targets.size()));
  }
  for (size_t i = 0; i < items.size(); ++i)
    frame.Set(s.targets[i], std::move(items[i]));
  return absl::OkStatus();
}

absl::Status Interpreter::ExecFor(const Stmt& s, const Value& iterable,
                                  const std::shared_ptr<Frame>& frame, int depth0,
                                  std::string* out) {
  DepthGuard guard(&depth_);
  if (depth_ > limits_.max_call_depth) {
    return Annotate(absl::ResourceExhaustedError("template nesting too deep"), s.line);
  }
  auto all = Iterate(iterable);
  if (!all.ok())
    return Annotate(all.status(), s.line);
  auto bind = [&](Frame& f, const Value& item) -> absl::Status {
    if (s.targets.size() == 1) {
      f.Set(s.targets[0], item);
      return absl::OkStatus();
    }
    SY_ASSIGN_OR_RETURN(std::vector<Value> parts, Iterate(item));
    if (parts.size() != s.targets.size()) {
      return absl::InvalidArgumentError(
          fmt::format("ValueError: cannot unpack {} values into {} loop targets", parts.size(),
                      s.targets.size()));
    }
    for (size_t i = 0; i < parts.size(); ++i)
      f.Set(s.targets[i], std::move(parts[i]));
    return absl::OkStatus();
  };
  auto items = std::make_shared<std::vector<Value>>();
  if (s.filter) {
    for (Value& item : *all) {
      SY_RETURN_IF_ERROR(Annotate(Step(), s.line));
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      SY_RETURN_IF_ERROR(Annotate(bind(*scope, item), s.line));
      SY_ASSIGN_OR_RETURN(Value keep, Eval(*s.filter, scope));
      if (keep.Truthy())
        items->push_back(std::move(item));
    }
  } else {
    *items = *std::move(all);
  }
  if (items->empty()) {
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    return ExecBody(s.else_body, scope, out).status();
  }
  auto loop = std::make_shared<LoopState>();
  loop->items = items;
  loop->depth0 = depth0;
  loop->stmt = &s;
  loop->frame = frame;
  for (size_t i = 0; i < items->size(); ++i) {
    SY_RETURN_IF_ERROR(Annotate(Step(), s.line));
    loop->index0 = static_cast<int64_t>(i);
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    SY_RETURN_IF_ERROR(Annotate(bind(*scope, (*items)[i]), s.line));
    scope->Set("loop", Value(loop));
    SY_ASSIGN_OR_RETURN(Flow flow, ExecBody(s.body, scope, out));
    if (flow == Flow::kBreak)
      break;
  }
  return absl::OkStatus();
}

Value Interpreter::MakeMacro(const Stmt& s, const std::shared_ptr<Frame>& closure, bool is_caller) {
  auto c = std::make_shared<Callable>();
  c->name = is_caller ? "caller" : s.text;
  const Stmt* stmt = &s;
  std::weak_ptr<Frame> weak = closure;
  c->fn = [stmt, weak, is_caller](Interpreter& in, CallArgs& args) -> absl::StatusOr<Value> {
    std::shared_ptr<Frame> scope = weak.lock();
    if (!scope)
      return absl::InternalError("macro called after its scope ended");
    return in.CallMacro(*stmt, scope, args, is_caller);
  };
  return Value(std::shared_ptr<const Callable>(std::move(c)));
}

absl::StatusOr<Value> Interpreter::CallMacro(const Stmt& s, const std::shared_ptr<Frame>& closure,
                                             CallArgs& args, bool is_caller) {
  DepthGuard guard(&depth_);
  if (depth_ > limits_.max_call_depth) {
    return absl::ResourceExhaustedError(fmt::format(
        "template error (line {}): macro calls nest deeper than {} (runaway recursion?)", s.line,
        limits_.max_call_depth));
  }
  auto scope = std::make_shared<Frame>();
  scope->parent = closure;
  // Jinja's Macro.__call__: positional arguments fill parameters in order; keywords fill
  // the rest; leftovers go to varargs / kwargs only where the body reads them.
  std::string macro_name = is_caller ? "caller" : s.text;
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < s.params.size()) {
      scope->Set(s.params[i].name, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  Dict kwargs;
  const Value* caller = nullptr;
  for (auto& [name, value] : args.keyword) {
    bool fills_param = false;
    for (size_t i = args.positional.size(); i < s.params.size(); ++i)
      fills_param = fills_param || s.params[i].name == name;
    if (fills_param) {
      scope->Set(name, value);
    } else if (name == "caller" && s.catch_caller && caller == nullptr) {
      caller = &value;
    } else {
      kwargs.Set(Value(name), value);
    }
  }
  if (!s.catch_kwargs && !kwargs.entries.empty()) {
    const Value& first = kwargs.entries[0].first;
    if (first.as_string() == "caller") {
      return absl::InvalidArgumentError(
          fmt::format("TypeError: macro '{}' was invoked with two values for the special caller "
                      "argument. This is most likely a bug.",
                      macro_name));
    }
    return absl::InvalidArgumentError(fmt::format(
        "TypeError: macro '{}' takes no keyword argument '{}'", macro_name, first.as_string()));
  }
  if (!s.catch_varargs && !varargs.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "TypeError: macro '{}' takes not more than {} argument(s)", macro_name, s.params.size()));
  }
  if (caller != nullptr)
    scope->Set("caller", *caller);
  for (size_t i = 0; i < s.params.size(); ++i) {
    const MacroParam& p = s.params[i];
    bool given = i < args.positional.size() || args.Keyword(p.name) != nullptr;
    if (given)
      continue;
    if (p.default_value) {
      SY_ASSIGN_OR_RETURN(Value v, Eval(*p.default_value, scope));
      scope->Set(p.name, std::move(v));
    } else {
      scope->Set(p.name, Value::MakeUndefined(fmt::format("'{}' is undefined", p.name)));
    }
  }
  SY_ASSIGN_OR_RETURN(Value varargs_value, Value::MakeList(std::move(varargs), true));
  scope->Set("varargs", std::move(varargs_value));
  SY_ASSIGN_OR_RETURN(Value kwargs_value, Value::MakeDict(std::move(kwargs)));
  scope->Set("kwargs", std::move(kwargs_value));
  if (!is_caller && caller == nullptr)
    scope->Set("caller", Value::MakeUndefined("No caller defined"));
  std::string out;
  closures_.push_back(scope);
  SY_RETURN_IF_ERROR(ExecBody(s.body, scope, &out).status());
  return Value(std::move(out));
}

absl::StatusOr<Value> Interpreter::CallValue(const Value& callee, CallArgs& args) {
  SY_RETURN_IF_ERROR(Step());
  if (callee.is_callable())
    return callee.as_callable().fn(*this, args);
  if (callee.is_loop() && callee.as_loop().stmt->recursive) {
    if (args.positional.size() != 1) {
      return absl::InvalidArgumentError("loop() takes exactly one argument");
    }
    LoopState& loop = callee.as_loop();
    std::string out;
    SY_RETURN_IF_ERROR(ExecFor(*loop.stmt, args.positional[0], loop.frame, loop.depth0 + 1, &out));
    return Value(std::move(out));
  }
  if (callee.is_undefined())
    return UndefinedError(callee);
  return absl::InvalidArgumentError(
      fmt::format("TypeError: '{}' object is not callable", callee.TypeName()));
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const Expr& e, size_t first,
                                               const std::shared_ptr<Frame>& frame) {
  CallArgs args;
  for (size_t i = first; i < e.children.size(); ++i) {
    SY_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], frame));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, expr] : e.kwargs) {
    SY_ASSIGN_OR_RETURN(Value v, Eval(*expr, frame));
    args.keyword.emplace_back(name, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::EvalFilter(const Expr& e, Value input,
                                              const std::shared_ptr<Frame>& frame) {
  if (e.kind != Expr::Kind::kFilter)
    return Eval(e, frame);
  if (e.children[0]) {
    SY_ASSIGN_OR_RETURN(input, EvalFilter(*e.children[0], std::move(input), frame));
  }
  SY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
  auto result = ApplyFilter(e.name, input, args);
  if (!result.ok())
    return Annotate(result.status(), e.line);
  return result;
}

absl::StatusOr<Value> Interpreter::ApplyFilter(std::string_view name, const Value& value,
                                               CallArgs& args) {
  FilterFn fn = FindFilter(name);
  if (fn == nullptr) {
    return absl::InvalidArgumentError(fmt::format("No filter named '{}'", name));
  }
  return fn(*this, value, args);
}

absl::StatusOr<bool> Interpreter::ApplyTest(std::string_view name, const Value& value,
                                            CallArgs& args) {
  TestFn fn = FindTest(name);
  if (fn == nullptr)
    return absl::InvalidArgumentError(fmt::format("No test named '{}'", name));
  return fn(*this, value, args);
}

absl::StatusOr<Value> Interpreter::Eval(const Expr& e, const std::shared_ptr<Frame>& frame) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName: {
      const Value* v = frame->Find(e.name);
      if (v == nullptr)
        return Value::MakeUndefined(fmt::format("'{}' is undefined", e.name));
      return *v;
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      for (const auto& c : e.children) {
        SY_ASSIGN_OR_RETURN(Value v, Eval(*c, frame));
        items.push_back(std::move(v));
      }
      auto list = Value::MakeList(std::move(items), e.kind == Expr::Kind::kTuple);
      if (!list.ok())
        return Annotate(list.status(), e.line);
      return list;
    }
    case Expr::Kind::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        SY_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i], frame));
        SY_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1], frame));
        dict.Set(std::move(k), std::move(v));
      }
      auto result = Value::MakeDict(std::move(dict));
      if (!result.ok())
        return Annotate(result.status(), e.line);
      return result;
    }
    case Expr::Kind::kGetAttr: {
      SY_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
      auto r = GetAttr(obj, e.name);
      if (!r.ok())
        return Annotate(r.status(), e.line);
      return r;
    }
    case Expr::Kind::kGetItem: {
      SY_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
      SY_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1], frame));
      auto r = GetItem(obj, key);
      if (!r.ok())
        return Annotate(r.status(), e.line);
      return r;
    }
    case Expr::Kind::kSlice: {
      SY_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], frame));
      Value parts[3] = {Value::None(), Value::None(), Value::None()};
      for (int i = 0; i < 3; ++i) {
        if (e.children[i + 1]) {
          SY_ASSIGN_OR_RETURN(parts[i], Eval(*e.children[i + 1], frame));
        }
      }
      auto r = SliceValue(obj, parts[0], parts[1], parts[2]);
      if (!r.ok())
        return Annotate(r.status(), e.line);
      return r;
    }
    case Expr::Kind::kCall: {
      SY_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0], frame));
      SY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
      auto r = CallValue(callee, args);
      if (!r.ok())
        return Annotate(r.status(), e.line);
      return r;
    }
    case Expr::Kind::kFilter:
      return EvalFilter(e, Value(), frame);
    case Expr::Kind::kTest: {
      SY_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], frame));
      SY_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, frame));
      auto r = ApplyTest(e.name, v, args);
      if (!r.ok())
        return Annotate(r.status(), e.line);
      return Value(e.op == "not" ? !*r : *r);
    }
    case Expr::Kind::kUnary: {
      SY_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], frame));
      if (e.op == "not")
        return Value(!v.Truthy());
      if (v.is_undefined())
        return Annotate(UndefinedError(v), e.line);
      if (!v.is_number()) {
        return Annotate(absl::InvalidArgumentError(fmt::format(
                            "TypeError: bad operand type for unary {}: '{}'", e.op, v.TypeName())),
                        e.line);
      }
      if (e.op == "+")
        return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float())
        return Value(-v.as_double());
      if (v.as_int() == INT64_MIN) {
        return Annotate(absl::OutOfRangeError("integer overflow"), e.line);
      }
      return Value(-v.as_int());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e, frame);
    case Expr::Kind::kCompare: {
      SY_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], frame));
      for (size_t i = 0; i < e.ops.size(); ++i) {
        SY_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], frame));
        auto r = BinaryOp(e.ops[i], left, right, *this);
        if (!r.ok())
          return Annotate(r.status(), e.line);
        if (!r->Truthy())
          return *r;
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::Kind::kCondExpr: {
      SY_ASSIGN_OR_RETURN(Value cond, Eval(*e.children[0], frame));
      if (cond.Truthy())
        return Eval(*e.children[1], frame);
      if (e.children[2])
        return Eval(*e.children[2], frame);
      return Value::MakeUndefined("the inline if-expression on line " + std::to_string(e.line) +
                                  " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

absl::StatusOr<Value> Interpreter::EvalBinary(const Expr& e, const std::shared_ptr<Frame>& frame) {
  SY_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], frame));
  if (e.op == "and") {
    if (!a.Truthy())
      return a;
    return Eval(*e.children[1], frame);
  }
  if (e.op == "or") {
    if (a.Truthy())
      return a;
    return Eval(*e.children[1], frame);
  }
  SY_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1], frame));
  auto r = BinaryOp(e.op, a, b, *this);
  if (!r.ok())
    return Annotate(r.status(), e.line);
  return r;
}

}  // namespace switchyard::text::jinja
