// The Jinja syntax tree. Built once by the parser and read-only afterwards, so one tree may
// be rendered by many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace switchyard::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // children
    kTuple,     // children
    kDict,      // children: key0, value0, key1, value1, ...
    kGetAttr,   // children[0].name
    kGetItem,   // children[0][children[1]]
    kSlice,     // children[0][children[1]:children[2]:children[3]] (null = omitted)
    kCall,      // children[0](children[1..], kwargs)
    kFilter,    // name(children[0], children[1..], kwargs); children[0] null in filter blocks
    kTest,      // children[0] is name(children[1..]); negated when op == "not"
    kUnary,     // op children[0]
    kBinary,    // children[0] op children[1]
    kCompare,   // children[0] ops[0] children[1] ops[1] ...: pairwise, short-circuit
    kCondExpr,  // children[1] if children[0] else children[2] (null = undefined)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  Value literal;
  std::string name;
  std::string op;
  std::vector<std::string> ops;  // kCompare
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required (Undefined when omitted).
};

struct Stmt {
  enum class Kind {
    kData,         // text
    kPrint,        // expr
    kIf,           // conditions[i] -> bodies[i]; else_body
    kFor,          // targets in expr [if filter]: body; else_body
    kSet,          // targets (or ns_attr on targets[0]) = expr
    kSetBlock,     // targets[0] = body rendered, then filter (a kFilter chain on null)
    kMacro,        // name(params): body
    kCallBlock,    // expr (a kCall) with caller(params): body
    kFilterBlock,  // filter chain applied to body
    kBreak,
    kContinue,
    kScope,  // with / generation: body in a new scope after assignments
  };
  Kind kind = Kind::kData;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string ns_attr;  // kSet on a namespace attribute: targets[0].ns_attr = expr.
  bool recursive = false;
  // kMacro and kCallBlock: whether the body reads varargs, kwargs or caller. As in Jinja,
  // extra positional or keyword arguments are errors unless it does.
  bool catch_varargs = false;
  bool catch_kwargs = false;
  bool catch_caller = false;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<MacroParam> params;
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // kScope
};

}  // namespace switchyard::text::jinja
