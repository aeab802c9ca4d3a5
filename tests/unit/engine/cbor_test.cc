#include "engine/cbor.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::engine {
namespace {

std::string Hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

// Expected bytes are cbor2.dumps(value, canonical=True) (cbor2 6.3.0).
TEST(CborEncoderTest, IntegersUseShortestHead) {
  struct Case {
    int64_t value;
    const char* hex;
  };
  const std::vector<Case> cases = {
      {0, "00"},
      {23, "17"},
      {24, "1818"},
      {255, "18ff"},
      {256, "190100"},
      {65535, "19ffff"},
      {65536, "1a00010000"},
      {4294967295, "1affffffff"},
      {4294967296, "1b0000000100000000"},
      {std::numeric_limits<int64_t>::max(), "1b7fffffffffffffff"},
      {-1, "20"},
      {-24, "37"},
      {-25, "3818"},
      {-256, "38ff"},
      {-257, "390100"},
      {std::numeric_limits<int64_t>::min(), "3b7fffffffffffffff"},
  };
  for (const Case& c : cases) {
    CborEncoder encoder;
    encoder.AddInt(c.value);
    EXPECT_EQ(Hex(encoder.bytes()), c.hex) << c.value;
  }
  CborEncoder encoder;
  encoder.AddUnsigned(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Hex(encoder.bytes()), "1bffffffffffffffff");
}

TEST(CborEncoderTest, TupleOfBytesIntsAndNull) {
  // cbor2.dumps((b"\x01\x01", (1, 24, 255, 256, 65536, 2**32, -1, -25, 2**64 - 1), None),
  //             canonical=True)
  CborEncoder encoder;
  encoder.BeginArray(3);
  const uint8_t parent[] = {1, 1};
  encoder.AddBytes(parent);
  encoder.BeginArray(9);
  for (int64_t v : {1LL, 24LL, 255LL, 256LL, 65536LL, 4294967296LL, -1LL, -25LL})
    encoder.AddInt(v);
  encoder.AddUnsigned(std::numeric_limits<uint64_t>::max());
  encoder.AddNull();
  EXPECT_EQ(Hex(encoder.bytes()),
            "834201018901181818ff1901001a000100001b00000001000000002038181bfffffffffffffffff6");
}

TEST(CborEncoderTest, TextStringsAndReuse) {
  CborEncoder encoder;
  encoder.AddText("seed");
  EXPECT_EQ(Hex(encoder.bytes()), "6473656564");
  encoder.Clear();
  encoder.BeginArray(2);
  encoder.AddText("lora");
  encoder.AddText("salt");
  EXPECT_EQ(Hex(encoder.bytes()), "82646c6f72616473616c74");
  encoder.Clear();
  encoder.AddText(std::string(24, 'a'));
  EXPECT_EQ(Hex(encoder.bytes()).substr(0, 4), "7818");
  encoder.Clear();
  encoder.AddText(std::string(300, 'a'));
  EXPECT_EQ(Hex(encoder.bytes()).substr(0, 6), "79012c");
  EXPECT_EQ(encoder.bytes().size(), 303u);
}

}  // namespace
}  // namespace switchyard::engine
