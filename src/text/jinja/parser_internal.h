// The recursive-descent parser behind Parse(), shared by parser.cc (token helpers),
// parser_statements.cc (tags) and parser_expressions.cc (expressions with Jinja's operator
// precedence). One Parser parses one token stream on one thread.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "fmt/format.h"

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace switchyard::text::jinja {

// Bounds nesting of expressions and blocks so that hostile sources cannot exhaust the stack.
inline constexpr int kMaxParseDepth = 128;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<Body> ParseTemplate();

 private:
  const Token& Cur() const { return tokens_[pos_]; }
  const Token& Peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < tokens_.size())
      ++pos_;
  }
  bool IsOp(std::string_view op) const {
    return Cur().type == TokenType::kOperator && Cur().text == op;
  }
  bool IsName(std::string_view name) const {
    return Cur().type == TokenType::kName && Cur().text == name;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op))
      return false;
    Next();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name))
      return false;
    Next();
    return true;
  }

  absl::Status Error(std::string_view msg) const { return ErrorAt(msg, Cur().line); }
  absl::Status ErrorAt(std::string_view msg, int line) const {
    return absl::InvalidArgumentError(
        fmt::format("template syntax error (line {}): {}", line, msg));
  }
  std::string Describe(const Token& t) const;
  absl::Status Expect(std::string_view op);
  absl::Status ExpectBlockEnd();
  absl::StatusOr<std::string> ExpectName();

  struct DepthGuard {
    explicit DepthGuard(int* d) : depth(d) { ++*depth; }
    ~DepthGuard() { --*depth; }
    int* depth;
  };
  absl::Status CheckDepth() const {
    if (depth_ > kMaxParseDepth)
      return Error("template nests too deeply");
    return absl::OkStatus();
  }

  static ExprPtr MakeExpr(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Statements (parser_statements.cc).
  absl::Status ParseBody(std::initializer_list<std::string_view> ends, Body* body,
                         std::string* end);
  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement();
  absl::Status ParseTargets(std::vector<std::string>* targets);
  absl::Status ParseParams(std::vector<MacroParam>* params);

  // Expressions (parser_expressions.cc).
  absl::StatusOr<ExprPtr> ParseTuple(bool stop_at_if);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);
  ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, int line);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr obj, int line);
  absl::Status ParseCallArgs(Expr* e);
  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool first_pipe = true);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace switchyard::text::jinja
