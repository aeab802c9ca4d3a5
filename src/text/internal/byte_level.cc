#include "text/internal/byte_level.h"

#include <array>

namespace switchyard::text::internal {
namespace {

struct Alphabet {
  std::array<std::string, 256> chars;
  std::array<int, 324> byte_of{};  // code points used are all below 324

  Alphabet() {
    byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      byte_of[cp] = b;
      std::string& s = chars[b];
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet* alphabet = new Alphabet();
  return *alphabet;
}

}  // namespace

std::string_view ByteToChars(uint8_t byte) {
  return GetAlphabet().chars[byte];
}

int CharToByte(uint32_t cp) {
  if (cp >= 324)
    return -1;
  return GetAlphabet().byte_of[cp];
}

void AppendByteLevel(std::string_view s, std::string* out) {
  const Alphabet& a = GetAlphabet();
  for (char c : s)
    out->append(a.chars[static_cast<uint8_t>(c)]);
}

}  // namespace switchyard::text::internal
