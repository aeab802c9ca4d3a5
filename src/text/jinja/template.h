// A compiled Jinja template: parsed once, immutable, rendered any number of times from any
// number of threads (each Render uses its own interpreter state).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"

namespace switchyard::text::jinja {

class Template {
 public:
  // Parses `source` and checks that every filter and test it names exists (as Jinja does at
  // compile time). Errors name the line.
  static absl::StatusOr<std::unique_ptr<Template>> Compile(std::string_view source);

  // Renders with the builtin globals plus `context` (later names shadow earlier ones).
  absl::StatusOr<std::string> Render(std::vector<std::pair<std::string, Value>> context,
                                     const RenderLimits& limits = RenderLimits()) const;

 private:
  explicit Template(Body body) : body_(std::move(body)) {}
  Body body_;
};

}  // namespace switchyard::text::jinja
