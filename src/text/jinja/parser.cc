#include "text/jinja/parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/lexer.h"

namespace switchyard::text::jinja {
namespace {

// Bounds nesting of expressions and blocks so that hostile sources cannot exhaust the stack.
constexpr int kMaxParseDepth = 128;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<Body> ParseTemplate() {
    Body body;
    std::string end;
    auto st = ParseBody({}, &body, &end);
    if (!st.ok())
      return st;
    return body;
  }

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
  std::string Describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kEof:
        return "end of template";
      case TokenType::kBlockEnd:
        return "end of statement block";
      case TokenType::kVarEnd:
        return "end of print statement";
      case TokenType::kData:
        return "template data";
      default:
        return fmt::format("'{}'", t.text);
    }
  }
  absl::Status Expect(std::string_view op) {
    if (SkipOp(op))
      return absl::OkStatus();
    return Error(fmt::format("expected '{}', got {}", op, Describe(Cur())));
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().type == TokenType::kBlockEnd) {
      Next();
      return absl::OkStatus();
    }
    return Error(fmt::format("expected end of statement block, got {}", Describe(Cur())));
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) {
      return Error(fmt::format("expected a name, got {}", Describe(Cur())));
    }
    std::string name = Cur().text;
    Next();
    return name;
  }

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

  // Parses statements until a block tag named in `ends`; leaves the parser after that name
  // and stores it in *end. With no ends, parses to the end of the template.
  absl::Status ParseBody(std::initializer_list<std::string_view> ends, Body* body,
                         std::string* end) {
    DepthGuard guard(&depth_);
    SY_RETURN_IF_ERROR(CheckDepth());
    int start_line = Cur().line;
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) {
        if (ends.size() == 0)
          return absl::OkStatus();
        std::string names;
        for (auto e : ends)
          names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
        return ErrorAt(
            fmt::format("unexpected end of template, expected {} (block opened on line {})", names,
                        start_line),
            t.line);
      }
      if (t.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kData;
        s->line = t.line;
        s->text = t.text;
        body->push_back(std::move(s));
        Next();
        continue;
      }
      if (t.type == TokenType::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kPrint;
        s->line = t.line;
        SY_ASSIGN_OR_RETURN(auto e, ParseTuple(false));
        s->expr = std::move(e);
        if (Cur().type != TokenType::kVarEnd) {
          return Error(fmt::format("expected end of print statement, got {}", Describe(Cur())));
        }
        Next();
        body->push_back(std::move(s));
        continue;
      }
      if (t.type != TokenType::kBlockBegin)
        return Error("unexpected token");
      Next();
      if (Cur().type != TokenType::kName) {
        return Error(fmt::format("tag name expected, got {}", Describe(Cur())));
      }
      for (auto e : ends) {
        if (Cur().text == e) {
          *end = Cur().text;
          Next();
          return absl::OkStatus();
        }
      }
      SY_ASSIGN_OR_RETURN(auto stmt, ParseStatement());
      body->push_back(std::move(stmt));
    }
  }

  absl::StatusOr<std::unique_ptr<Stmt>> ParseStatement() {
    auto s = std::make_unique<Stmt>();
    s->line = Cur().line;
    std::string tag = Cur().text;
    Next();
    std::string end;
    if (tag == "if") {
      s->kind = Stmt::Kind::kIf;
      while (true) {
        SY_ASSIGN_OR_RETURN(auto cond, ParseTuple(false));
        s->conditions.push_back(std::move(cond));
        SY_RETURN_IF_ERROR(ExpectBlockEnd());
        Body body;
        SY_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &body, &end));
        s->bodies.push_back(std::move(body));
        if (end == "elif")
          continue;
        if (end == "else") {
          SY_RETURN_IF_ERROR(ExpectBlockEnd());
          SY_RETURN_IF_ERROR(ParseBody({"endif"}, &s->else_body, &end));
        }
        break;
      }
    } else if (tag == "for") {
      s->kind = Stmt::Kind::kFor;
      SY_RETURN_IF_ERROR(ParseTargets(&s->targets));
      if (!SkipName("in"))
        return Error(fmt::format("expected 'in', got {}", Describe(Cur())));
      SY_ASSIGN_OR_RETURN(auto iter, ParseTuple(true));
      s->expr = std::move(iter);
      if (SkipName("if")) {
        SY_ASSIGN_OR_RETURN(auto filter, ParseTuple(false));
        s->filter = std::move(filter);
      }
      s->recursive = SkipName("recursive");
      SY_RETURN_IF_ERROR(ExpectBlockEnd());
      ++loop_depth_;
      absl::Status body_status = ParseBody({"endfor", "else"}, &s->body, &end);
      --loop_depth_;
      SY_RETURN_IF_ERROR(body_status);
      if (end == "else") {
        SY_RETURN_IF_ERROR(ExpectBlockEnd());
        SY_RETURN_IF_ERROR(ParseBody({"endfor"}, &s->else_body, &end));
      }
    } else if (tag == "set") {
      if (Cur().type == TokenType::kName && Peek().type == TokenType::kOperator &&
          Peek().text == "." && Peek(2).type == TokenType::kName) {
        s->kind = Stmt::Kind::kSet;
        s->targets.push_back(Cur().text);
        s->ns_attr = Peek(2).text;
        pos_ += 3;
      } else {
        SY_RETURN_IF_ERROR(ParseTargets(&s->targets));
      }
      if (SkipOp("=")) {
        s->kind = Stmt::Kind::kSet;
        SY_ASSIGN_OR_RETURN(auto value, ParseTuple(false));
        s->expr = std::move(value);
      } else {
        if (!s->ns_attr.empty() || s->targets.size() != 1) {
          return Error("block set needs a single name");
        }
        s->kind = Stmt::Kind::kSetBlock;
        if (IsOp("|")) {
          SY_ASSIGN_OR_RETURN(auto filter, ParseFilters(nullptr));
          s->filter = std::move(filter);
        }
        SY_RETURN_IF_ERROR(ExpectBlockEnd());
        SY_RETURN_IF_ERROR(ParseBody({"endset"}, &s->body, &end));
      }
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::kMacro;
      SY_ASSIGN_OR_RETURN(auto name, ExpectName());
      s->text = name;
      SY_RETURN_IF_ERROR(ParseParams(&s->params));
      SY_RETURN_IF_ERROR(ExpectBlockEnd());
      SY_RETURN_IF_ERROR(ParseBody({"endmacro"}, &s->body, &end));
    } else if (tag == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (IsOp("("))
        SY_RETURN_IF_ERROR(ParseParams(&s->params));
      SY_ASSIGN_OR_RETURN(auto call, ParseExpression(true));
      if (call->kind != Expr::Kind::kCall)
        return Error("expected a call in call block");
      s->expr = std::move(call);
      SY_RETURN_IF_ERROR(ExpectBlockEnd());
      SY_RETURN_IF_ERROR(ParseBody({"endcall"}, &s->body, &end));
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      SY_ASSIGN_OR_RETURN(auto filter, ParseFilters(nullptr, /*first_pipe=*/false));
      s->filter = std::move(filter);
      SY_RETURN_IF_ERROR(ExpectBlockEnd());
      SY_RETURN_IF_ERROR(ParseBody({"endfilter"}, &s->body, &end));
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) {
        return ErrorAt(fmt::format("'{}' outside of a loop", tag), s->line);
      }
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    } else if (tag == "with") {
      s->kind = Stmt::Kind::kScope;
      while (Cur().type != TokenType::kBlockEnd) {
        if (!s->assignments.empty())
          SY_RETURN_IF_ERROR(Expect(","));
        SY_ASSIGN_OR_RETURN(auto name, ExpectName());
        SY_RETURN_IF_ERROR(Expect("="));
        SY_ASSIGN_OR_RETURN(auto value, ParseExpression(true));
        s->assignments.emplace_back(std::move(name), std::move(value));
      }
      SY_RETURN_IF_ERROR(ExpectBlockEnd());
      SY_RETURN_IF_ERROR(ParseBody({"endwith"}, &s->body, &end));
    } else if (tag == "generation") {
      s->kind = Stmt::Kind::kScope;
      SY_RETURN_IF_ERROR(ExpectBlockEnd());
      SY_RETURN_IF_ERROR(ParseBody({"endgeneration"}, &s->body, &end));
    } else {
      return ErrorAt(fmt::format("encountered unknown tag '{}'", tag), s->line);
    }
    SY_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  // for/set targets: a name or a tuple of names, optionally parenthesized.
  absl::Status ParseTargets(std::vector<std::string>* targets) {
    bool paren = SkipOp("(");
    while (true) {
      SY_ASSIGN_OR_RETURN(auto name, ExpectName());
      targets->push_back(std::move(name));
      if (!SkipOp(","))
        break;
      if (Cur().type != TokenType::kName)
        break;
    }
    if (paren)
      SY_RETURN_IF_ERROR(Expect(")"));
    return absl::OkStatus();
  }

  absl::Status ParseParams(std::vector<MacroParam>* params) {
    SY_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      if (!params->empty())
        SY_RETURN_IF_ERROR(Expect(","));
      if (IsOp(")"))
        break;
      MacroParam p;
      SY_ASSIGN_OR_RETURN(auto name, ExpectName());
      p.name = std::move(name);
      if (SkipOp("=")) {
        SY_ASSIGN_OR_RETURN(auto value, ParseExpression(true));
        p.default_value = std::move(value);
      } else {
        for (const auto& q : *params) {
          if (q.default_value)
            return Error("non-default argument follows default argument");
        }
      }
      params->push_back(std::move(p));
    }
    Next();
    return absl::OkStatus();
  }

  // A comma-separated expression list becomes a tuple (as in `{{ a, b }}` or `for x in a, b`).
  absl::StatusOr<ExprPtr> ParseTuple(bool stop_at_if) {
    int line = Cur().line;
    SY_ASSIGN_OR_RETURN(auto first, ParseExpression(!stop_at_if));
    if (!IsOp(","))
      return first;
    auto tuple = MakeExpr(Expr::Kind::kTuple, line);
    tuple->children.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().type == TokenType::kBlockEnd || Cur().type == TokenType::kVarEnd ||
          (stop_at_if && (IsName("if") || IsName("recursive")))) {
        break;
      }
      SY_ASSIGN_OR_RETURN(auto item, ParseExpression(!stop_at_if));
      tuple->children.push_back(std::move(item));
    }
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true) {
    DepthGuard guard(&depth_);
    SY_RETURN_IF_ERROR(CheckDepth());
    int line = Cur().line;
    SY_ASSIGN_OR_RETURN(auto expr, ParseOr());
    if (!with_condexpr)
      return expr;
    while (SkipName("if")) {
      auto cond = MakeExpr(Expr::Kind::kCondExpr, line);
      SY_ASSIGN_OR_RETURN(auto test, ParseOr());
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(expr));
      if (SkipName("else")) {
        SY_ASSIGN_OR_RETURN(auto other, ParseExpression(true));
        cond->children.push_back(std::move(other));
      } else {
        cond->children.push_back(nullptr);
      }
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, int line) {
    auto e = MakeExpr(Expr::Kind::kBinary, line);
    e->op = std::move(op);
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    SY_ASSIGN_OR_RETURN(auto left, ParseAnd());
    while (IsName("or")) {
      int line = Cur().line;
      Next();
      SY_ASSIGN_OR_RETURN(auto right, ParseAnd());
      left = Binary("or", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    SY_ASSIGN_OR_RETURN(auto left, ParseNot());
    while (IsName("and")) {
      int line = Cur().line;
      Next();
      SY_ASSIGN_OR_RETURN(auto right, ParseNot());
      left = Binary("and", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(&depth_);
      SY_RETURN_IF_ERROR(CheckDepth());
      auto e = MakeExpr(Expr::Kind::kUnary, Cur().line);
      Next();
      e->op = "not";
      SY_ASSIGN_OR_RETURN(auto operand, ParseNot());
      e->children.push_back(std::move(operand));
      return e;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    SY_ASSIGN_OR_RETURN(auto left, ParseMath1());
    while (true) {
      int line = Cur().line;
      std::string op;
      if (Cur().type == TokenType::kOperator &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == ">" ||
           Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == TokenType::kName && Peek().text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        return left;
      }
      SY_ASSIGN_OR_RETURN(auto right, ParseMath1());
      left = Binary(op, std::move(left), std::move(right), line);
    }
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    SY_ASSIGN_OR_RETURN(auto left, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      SY_ASSIGN_OR_RETURN(auto right, ParseConcat());
      left = Binary(op, std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    SY_ASSIGN_OR_RETURN(auto left, ParseMath2());
    while (IsOp("~")) {
      int line = Cur().line;
      Next();
      SY_ASSIGN_OR_RETURN(auto right, ParseMath2());
      left = Binary("~", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    SY_ASSIGN_OR_RETURN(auto left, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      int line = Cur().line;
      Next();
      SY_ASSIGN_OR_RETURN(auto right, ParsePow());
      left = Binary(op, std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    SY_ASSIGN_OR_RETURN(auto left, ParseUnary(true));
    while (IsOp("**")) {
      int line = Cur().line;
      Next();
      SY_ASSIGN_OR_RETURN(auto right, ParseUnary(true));
      left = Binary("**", std::move(left), std::move(right), line);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(&depth_);
    SY_RETURN_IF_ERROR(CheckDepth());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = MakeExpr(Expr::Kind::kUnary, Cur().line);
      node->op = Cur().text;
      Next();
      SY_ASSIGN_OR_RETURN(auto operand, ParseUnary(false));
      node->children.push_back(std::move(operand));
    } else {
      SY_ASSIGN_OR_RETURN(auto primary, ParsePrimary());
      node = std::move(primary);
    }
    SY_ASSIGN_OR_RETURN(auto post, ParsePostfix(std::move(node)));
    if (!with_filter)
      return post;
    return ParseFilterExpr(std::move(post));
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Cur();
    int line = t.line;
    if (t.type == TokenType::kName) {
      auto e = MakeExpr(Expr::Kind::kLiteral, line);
      if (t.text == "true" || t.text == "True") {
        e->literal = Value(true);
      } else if (t.text == "false" || t.text == "False") {
        e->literal = Value(false);
      } else if (t.text == "none" || t.text == "None") {
        e->literal = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      Next();
      return e;
    }
    if (t.type == TokenType::kString) {
      std::string s = t.text;
      Next();
      while (Cur().type == TokenType::kString) {
        s += Cur().text;
        Next();
      }
      auto e = MakeExpr(Expr::Kind::kLiteral, line);
      e->literal = Value(std::move(s));
      return e;
    }
    if (t.type == TokenType::kInteger) {
      auto e = MakeExpr(Expr::Kind::kLiteral, line);
      int64_t v = 0;
      auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (res.ec != std::errc())
        return Error("integer literal out of range");
      e->literal = Value(v);
      Next();
      return e;
    }
    if (t.type == TokenType::kFloat) {
      auto e = MakeExpr(Expr::Kind::kLiteral, line);
      e->literal = Value(std::strtod(t.text.c_str(), nullptr));
      Next();
      return e;
    }
    if (IsOp("(")) {
      Next();
      if (SkipOp(")"))
        return MakeExpr(Expr::Kind::kTuple, line);
      SY_ASSIGN_OR_RETURN(auto first, ParseExpression(true));
      if (SkipOp(")"))
        return first;
      auto tuple = MakeExpr(Expr::Kind::kTuple, line);
      tuple->children.push_back(std::move(first));
      while (SkipOp(",")) {
        if (IsOp(")"))
          break;
        SY_ASSIGN_OR_RETURN(auto item, ParseExpression(true));
        tuple->children.push_back(std::move(item));
      }
      SY_RETURN_IF_ERROR(Expect(")"));
      return tuple;
    }
    if (IsOp("[")) {
      Next();
      auto list = MakeExpr(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        if (!list->children.empty())
          SY_RETURN_IF_ERROR(Expect(","));
        if (IsOp("]"))
          break;
        SY_ASSIGN_OR_RETURN(auto item, ParseExpression(true));
        list->children.push_back(std::move(item));
      }
      Next();
      return list;
    }
    if (IsOp("{")) {
      Next();
      auto dict = MakeExpr(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        if (!dict->children.empty())
          SY_RETURN_IF_ERROR(Expect(","));
        if (IsOp("}"))
          break;
        SY_ASSIGN_OR_RETURN(auto key, ParseExpression(true));
        SY_RETURN_IF_ERROR(Expect(":"));
        SY_ASSIGN_OR_RETURN(auto value, ParseExpression(true));
        dict->children.push_back(std::move(key));
        dict->children.push_back(std::move(value));
      }
      Next();
      return dict;
    }
    return Error(fmt::format("unexpected {}", Describe(t)));
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      int line = Cur().line;
      if (IsOp(".")) {
        Next();
        if (Cur().type == TokenType::kName) {
          auto e = MakeExpr(Expr::Kind::kGetAttr, line);
          e->name = Cur().text;
          e->children.push_back(std::move(node));
          node = std::move(e);
          Next();
        } else if (Cur().type == TokenType::kInteger) {
          auto e = MakeExpr(Expr::Kind::kGetItem, line);
          e->children.push_back(std::move(node));
          auto idx = MakeExpr(Expr::Kind::kLiteral, line);
          idx->literal = Value(static_cast<int64_t>(std::atoll(Cur().text.c_str())));
          e->children.push_back(std::move(idx));
          node = std::move(e);
          Next();
        } else {
          return Error("expected name or number after '.'");
        }
      } else if (IsOp("[")) {
        Next();
        SY_ASSIGN_OR_RETURN(auto sub, ParseSubscript(std::move(node), line));
        node = std::move(sub);
        SY_RETURN_IF_ERROR(Expect("]"));
      } else if (IsOp("(")) {
        auto call = MakeExpr(Expr::Kind::kCall, line);
        call->children.push_back(std::move(node));
        SY_RETURN_IF_ERROR(ParseCallArgs(call.get()));
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr obj, int line) {
    ExprPtr parts[3];
    bool is_slice = false;
    for (int i = 0; i < 3; ++i) {
      if (i > 0) {
        if (!SkipOp(":"))
          break;
        is_slice = true;
      }
      if (!IsOp(":") && !IsOp("]")) {
        SY_ASSIGN_OR_RETURN(auto part, ParseExpression(true));
        parts[i] = std::move(part);
      }
    }
    if (!is_slice) {
      if (!parts[0])
        return Error("expected an index");
      auto e = MakeExpr(Expr::Kind::kGetItem, line);
      e->children.push_back(std::move(obj));
      e->children.push_back(std::move(parts[0]));
      return e;
    }
    auto e = MakeExpr(Expr::Kind::kSlice, line);
    e->children.push_back(std::move(obj));
    for (auto& p : parts)
      e->children.push_back(std::move(p));
    return e;
  }

  // Parses "(a, b, k=v)" into e->children (after any already there) and e->kwargs.
  absl::Status ParseCallArgs(Expr* e) {
    SY_RETURN_IF_ERROR(Expect("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first)
        SY_RETURN_IF_ERROR(Expect(","));
      first = false;
      if (IsOp(")"))
        break;
      if (Cur().type == TokenType::kName && Peek().type == TokenType::kOperator &&
          Peek().text == "=") {
        std::string name = Cur().text;
        Next();
        Next();
        SY_ASSIGN_OR_RETURN(auto value, ParseExpression(true));
        e->kwargs.emplace_back(std::move(name), std::move(value));
      } else {
        if (!e->kwargs.empty())
          return Error("positional argument follows keyword argument");
        SY_ASSIGN_OR_RETURN(auto value, ParseExpression(true));
        e->children.push_back(std::move(value));
      }
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr node, bool first_pipe = true) {
    bool need_pipe = first_pipe;
    while (true) {
      if (need_pipe && !SkipOp("|"))
        return node;
      need_pipe = true;
      int line = Cur().line;
      SY_ASSIGN_OR_RETURN(auto name, ExpectName());
      while (IsOp(".") && Peek().type == TokenType::kName) {
        name += "." + Peek().text;
        Next();
        Next();
      }
      auto f = MakeExpr(Expr::Kind::kFilter, line);
      f->name = std::move(name);
      f->children.push_back(std::move(node));
      if (IsOp("("))
        SY_RETURN_IF_ERROR(ParseCallArgs(f.get()));
      node = std::move(f);
    }
  }

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node) {
    while (true) {
      if (IsOp("|")) {
        SY_ASSIGN_OR_RETURN(auto filtered, ParseFilters(std::move(node)));
        node = std::move(filtered);
      } else if (IsName("is")) {
        int line = Cur().line;
        Next();
        auto t = MakeExpr(Expr::Kind::kTest, line);
        if (SkipName("not"))
          t->op = "not";
        SY_ASSIGN_OR_RETURN(auto name, ExpectName());
        t->name = std::move(name);
        t->children.push_back(std::move(node));
        if (IsOp("(")) {
          SY_RETURN_IF_ERROR(ParseCallArgs(t.get()));
        } else if ((Cur().type == TokenType::kName || Cur().type == TokenType::kString ||
                    Cur().type == TokenType::kInteger || Cur().type == TokenType::kFloat ||
                    IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is"))
            return Error("You cannot chain multiple tests with is");
          SY_ASSIGN_OR_RETURN(auto arg, ParsePrimary());
          SY_ASSIGN_OR_RETURN(auto post, ParsePostfix(std::move(arg)));
          t->children.push_back(std::move(post));
        }
        node = std::move(t);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(std::string_view source) {
  auto tokens = Tokenize(source);
  if (!tokens.ok())
    return tokens.status();
  return Parser(*std::move(tokens)).ParseTemplate();
}

}  // namespace switchyard::text::jinja
