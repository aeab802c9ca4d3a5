#include "base/random_bytes.h"

#include <random>

namespace switchyard::base {

std::string RandomBytes(size_t n) {
  std::random_device rd;
  std::string out(n, '\0');
  for (char& c : out)
    c = static_cast<char>(rd());
  return out;
}

}  // namespace switchyard::base
