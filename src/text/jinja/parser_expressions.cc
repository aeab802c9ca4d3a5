// Expressions, from conditional expressions down to literals, with Jinja's precedence.
#include <charconv>
#include <cstdlib>

#include "base/status_macros.h"
#include "text/jinja/parser_internal.h"

namespace switchyard::text::jinja {

// A comma-separated expression list becomes a tuple (as in `{{ a, b }}` or `for x in a, b`).
absl::StatusOr<ExprPtr> Parser::ParseTuple(bool stop_at_if) {
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

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
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

ExprPtr Parser::Binary(std::string op, ExprPtr a, ExprPtr b, int line) {
  auto e = MakeExpr(Expr::Kind::kBinary, line);
  e->op = std::move(op);
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  return e;
}

absl::StatusOr<ExprPtr> Parser::ParseOr() {
  SY_ASSIGN_OR_RETURN(auto left, ParseAnd());
  while (IsName("or")) {
    int line = Cur().line;
    Next();
    SY_ASSIGN_OR_RETURN(auto right, ParseAnd());
    left = Binary("or", std::move(left), std::move(right), line);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseAnd() {
  SY_ASSIGN_OR_RETURN(auto left, ParseNot());
  while (IsName("and")) {
    int line = Cur().line;
    Next();
    SY_ASSIGN_OR_RETURN(auto right, ParseNot());
    left = Binary("and", std::move(left), std::move(right), line);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
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

// `a < b < c` is (a < b) and (b < c) with b evaluated once, as in Python: one comparison is
// a kBinary, a chain a kCompare.
absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  int first_line = Cur().line;
  SY_ASSIGN_OR_RETURN(auto left, ParseMath1());
  ExprPtr chain;
  bool compared = false;  // `left` is this chain's first comparison.
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
      return chain ? std::move(chain) : std::move(left);
    }
    SY_ASSIGN_OR_RETURN(auto right, ParseMath1());
    if (chain) {
      chain->ops.push_back(std::move(op));
      chain->children.push_back(std::move(right));
    } else if (compared) {
      // The second comparison turns the first into a chain.
      chain = MakeExpr(Expr::Kind::kCompare, first_line);
      chain->ops = {std::move(left->op), std::move(op)};
      chain->children.push_back(std::move(left->children[0]));
      chain->children.push_back(std::move(left->children[1]));
      chain->children.push_back(std::move(right));
    } else {
      left = Binary(op, std::move(left), std::move(right), line);
      compared = true;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
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

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  SY_ASSIGN_OR_RETURN(auto left, ParseMath2());
  while (IsOp("~")) {
    int line = Cur().line;
    Next();
    SY_ASSIGN_OR_RETURN(auto right, ParseMath2());
    left = Binary("~", std::move(left), std::move(right), line);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
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

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  SY_ASSIGN_OR_RETURN(auto left, ParseUnary(true));
  while (IsOp("**")) {
    int line = Cur().line;
    Next();
    SY_ASSIGN_OR_RETURN(auto right, ParseUnary(true));
    left = Binary("**", std::move(left), std::move(right), line);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
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

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
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

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
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

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr obj, int line) {
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
absl::Status Parser::ParseCallArgs(Expr* e) {
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

absl::StatusOr<ExprPtr> Parser::ParseFilters(ExprPtr node, bool first_pipe) {
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

absl::StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
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

}  // namespace switchyard::text::jinja
