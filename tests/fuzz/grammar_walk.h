// Shared by the structured-output fuzz targets: feeds each text to a fresh matcher of
// `grammar` one byte at a time (as the token-mask walk does) until a byte is refused, then
// asks whether it could end. Exercises the matcher on whatever a fuzzed input compiled to.
#pragma once

#include <initializer_list>
#include <memory>
#include <string_view>

#include "structured/grammar.h"
#include "structured/grammar_matcher.h"

namespace switchyard::structured {

inline void WalkTexts(const std::shared_ptr<const Grammar>& grammar,
                      std::initializer_list<std::string_view> texts) {
  for (std::string_view text : texts) {
    GrammarMatcher m(grammar);
    for (char c : text) {
      if (!m.AcceptBytes(std::string_view(&c, 1)))
        break;
    }
    (void)m.CanEnd();
  }
}

}  // namespace switchyard::structured
