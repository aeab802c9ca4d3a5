// Test helpers for compiled grammars: whole-text matching through the real GrammarMatcher.
#pragma once

#include <memory>
#include <string_view>

#include "structured/grammar.h"
#include "structured/grammar_matcher.h"

namespace switchyard::structured {

// Every byte accepted (fed one at a time, as the token mask walk does) and the text complete
// at the end.
inline bool FullMatch(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  for (char c : text) {
    if (!m.AcceptBytes(std::string_view(&c, 1)))
      return false;
  }
  return m.CanEnd();
}

}  // namespace switchyard::structured
