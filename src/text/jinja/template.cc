#include "text/jinja/template.h"

#include "fmt/format.h"

#include "base/status_macros.h"
#include "text/jinja/builtins.h"
#include "text/jinja/parser.h"

namespace switchyard::text::jinja {
namespace {

absl::Status CheckNames(const Body& body);

absl::Status CheckExpr(const Expr* e) {
  if (e == nullptr)
    return absl::OkStatus();
  if (e->kind == Expr::Kind::kFilter && FindFilter(e->name) == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("template syntax error (line {}): No filter named '{}'.", e->line, e->name));
  }
  if (e->kind == Expr::Kind::kTest && FindTest(e->name) == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("template syntax error (line {}): No test named '{}'.", e->line, e->name));
  }
  for (const auto& c : e->children)
    SY_RETURN_IF_ERROR(CheckExpr(c.get()));
  for (const auto& [name, c] : e->kwargs)
    SY_RETURN_IF_ERROR(CheckExpr(c.get()));
  return absl::OkStatus();
}

absl::Status CheckNames(const Body& body) {
  for (const auto& s : body) {
    SY_RETURN_IF_ERROR(CheckExpr(s->expr.get()));
    SY_RETURN_IF_ERROR(CheckExpr(s->filter.get()));
    for (const auto& c : s->conditions)
      SY_RETURN_IF_ERROR(CheckExpr(c.get()));
    for (const auto& b : s->bodies)
      SY_RETURN_IF_ERROR(CheckNames(b));
    for (const auto& p : s->params)
      SY_RETURN_IF_ERROR(CheckExpr(p.default_value.get()));
    for (const auto& [name, c] : s->assignments)
      SY_RETURN_IF_ERROR(CheckExpr(c.get()));
    SY_RETURN_IF_ERROR(CheckNames(s->body));
    SY_RETURN_IF_ERROR(CheckNames(s->else_body));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Template>> Template::Compile(std::string_view source) {
  SY_ASSIGN_OR_RETURN(Body body, Parse(source));
  SY_RETURN_IF_ERROR(CheckNames(body));
  return std::unique_ptr<Template>(new Template(std::move(body)));
}

absl::StatusOr<std::string> Template::Render(std::vector<std::pair<std::string, Value>> context,
                                             const RenderLimits& limits) const {
  std::vector<std::pair<std::string, Value>> globals = MakeGlobals();
  for (std::pair<std::string, Value>& entry : context) {
    bool replaced = false;
    for (auto& [k, v] : globals) {
      if (k == entry.first) {
        v = entry.second;
        replaced = true;
      }
    }
    if (!replaced)
      globals.push_back(std::move(entry));
  }
  Interpreter interpreter(limits);
  return interpreter.Render(body_, std::move(globals));
}

}  // namespace switchyard::text::jinja
