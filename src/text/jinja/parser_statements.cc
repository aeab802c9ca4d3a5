// Statement tags: if, for, set, macro, call, filter, with, generation, break, continue.
#include "base/status_macros.h"
#include "text/jinja/parser_internal.h"

namespace switchyard::text::jinja {
namespace {

bool ReadsName(const Body& body, std::string_view name);

bool ReadsName(const Expr* e, std::string_view name) {
  if (e == nullptr)
    return false;
  if (e->kind == Expr::Kind::kName && e->name == name)
    return true;
  for (const auto& c : e->children) {
    if (ReadsName(c.get(), name))
      return true;
  }
  for (const auto& [key, c] : e->kwargs) {
    if (ReadsName(c.get(), name))
      return true;
  }
  return false;
}

// Whether any expression in `body`, nested blocks and macros included, reads `name`.
bool ReadsName(const Body& body, std::string_view name) {
  for (const auto& s : body) {
    if (ReadsName(s->expr.get(), name) || ReadsName(s->filter.get(), name) ||
        ReadsName(s->body, name) || ReadsName(s->else_body, name)) {
      return true;
    }
    for (const auto& c : s->conditions) {
      if (ReadsName(c.get(), name))
        return true;
    }
    for (const auto& b : s->bodies) {
      if (ReadsName(b, name))
        return true;
    }
    for (const auto& p : s->params) {
      if (ReadsName(p.default_value.get(), name))
        return true;
    }
    for (const auto& [key, c] : s->assignments) {
      if (ReadsName(c.get(), name))
        return true;
    }
  }
  return false;
}

// Jinja decides from the macro body alone whether a macro takes extra arguments.
void MarkCatches(Stmt* s) {
  s->catch_varargs = ReadsName(s->body, "varargs");
  s->catch_kwargs = ReadsName(s->body, "kwargs");
  s->catch_caller = ReadsName(s->body, "caller");
}

}  // namespace

// Parses statements until a block tag named in `ends`; leaves the parser after that name
// and stores it in *end. With no ends, parses to the end of the template.
absl::Status Parser::ParseBody(std::initializer_list<std::string_view> ends, Body* body,
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

absl::StatusOr<std::unique_ptr<Stmt>> Parser::ParseStatement() {
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
    MarkCatches(s.get());
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
    MarkCatches(s.get());
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
absl::Status Parser::ParseTargets(std::vector<std::string>* targets) {
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

absl::Status Parser::ParseParams(std::vector<MacroParam>* params) {
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

}  // namespace switchyard::text::jinja
