// Tree-walking Jinja interpreter. One Interpreter renders one template once, on one thread;
// it owns every frame and namespace made during that render and frees them when it ends.
// Limits (steps, call depth, output size) turn runaway templates into errors.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace switchyard::text::jinja {

struct RenderLimits {
  // Statements, loop iterations and calls. Real chat templates take thousands of steps
  // for long conversations; the bound keeps a hostile template to well under a second.
  int64_t max_steps = 1'000'000;
  int max_call_depth = 256;            // Nested macro calls, loops and blocks.
  size_t max_output_bytes = 64 << 20;  // Also bounds any one string built.
};

// A variable scope; lookups fall through to the parent.
struct Frame {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Frame> parent;
  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value value);
};

struct LoopState {
  std::shared_ptr<const std::vector<Value>> items;
  int64_t index0 = 0;
  int depth0 = 0;
  Value last_changed;
  const Stmt* stmt = nullptr;    // The for statement, for recursive loop(...) calls.
  std::shared_ptr<Frame> frame;  // Where that loop runs.
};

class Interpreter {
 public:
  explicit Interpreter(RenderLimits limits) : limits_(limits) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `body` with `globals` as the outermost scope.
  absl::StatusOr<std::string> Render(const Body& body,
                                     std::vector<std::pair<std::string, Value>> globals);

  // For builtins.
  absl::StatusOr<Value> CallValue(const Value& callee, CallArgs& args);
  absl::StatusOr<Value> GetAttr(const Value& obj, std::string_view name);
  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key);
  absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& value, CallArgs& args);
  absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& value, CallArgs& args);
  std::shared_ptr<Namespace> NewNamespace();
  absl::Status Step();
  // Fails when a string of `size` bytes would exceed the output limit.
  absl::Status CheckSize(size_t size) const;

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> ExecBody(const Body& body, const std::shared_ptr<Frame>& frame,
                                std::string* out);
  absl::StatusOr<Flow> Exec(const Stmt& s, const std::shared_ptr<Frame>& frame, std::string* out);
  absl::Status ExecFor(const Stmt& s, const Value& iterable, const std::shared_ptr<Frame>& frame,
                       int depth0, std::string* out);
  absl::Status ExecSet(const Stmt& s, Value value, Frame& frame);
  Value MakeMacro(const Stmt& s, const std::shared_ptr<Frame>& closure, bool is_caller);
  absl::StatusOr<Value> CallMacro(const Stmt& s, const std::shared_ptr<Frame>& closure,
                                  CallArgs& args, bool is_caller);

  absl::StatusOr<Value> Eval(const Expr& e, const std::shared_ptr<Frame>& frame);
  absl::StatusOr<Value> EvalBinary(const Expr& e, const std::shared_ptr<Frame>& frame);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first,
                                    const std::shared_ptr<Frame>& frame);
  absl::StatusOr<Value> EvalFilter(const Expr& e, Value input, const std::shared_ptr<Frame>& frame);

  absl::Status Annotate(absl::Status st, int line) const;

  RenderLimits limits_;
  int64_t steps_ = 0;
  int depth_ = 0;
  std::vector<std::shared_ptr<Frame>> closures_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

// Python binary operators and slicing, shared with filters.
absl::StatusOr<Value> BinaryOp(std::string_view op, const Value& a, const Value& b,
                               const Interpreter& in);
absl::StatusOr<Value> SliceValue(const Value& obj, const Value& start, const Value& stop,
                                 const Value& step);
absl::Status UndefinedError(const Value& undefined);

}  // namespace switchyard::text::jinja
