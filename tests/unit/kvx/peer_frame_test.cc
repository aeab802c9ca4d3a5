#include "kvx/peer_frame.h"

#include <array>
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace switchyard::kvx {
namespace {

using ::testing::HasSubstr;

std::array<uint8_t, kPeerFrameHeaderBytes> Header(PeerFrameType type, uint32_t stream,
                                                  uint32_t length) {
  return EncodePeerFrameHeader({.type = type, .stream_id = stream, .payload_bytes = length});
}

TEST(PeerFrameTest, HeaderHasTheDocumentedLittleEndianLayout) {
  const auto bytes = Header(PeerFrameType::kReadBlocks, 0x01020304, 0x0a0b0c0d);
  const std::array<uint8_t, kPeerFrameHeaderBytes> expected = {
      'S', 'Y', 'K', 'V', 1, 6, 0, 0, 0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b, 0x0a};
  EXPECT_EQ(bytes, expected);
}

TEST(PeerFrameTest, HeaderRoundTripsEveryType) {
  for (uint8_t t = 1; t <= static_cast<uint8_t>(PeerFrameType::kReleaseBlocks); ++t) {
    const auto type = static_cast<PeerFrameType>(t);
    auto decoded = DecodePeerFrameHeader(Header(type, 7, 99), 100);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->type, type);
    EXPECT_EQ(decoded->stream_id, 7u);
    EXPECT_EQ(decoded->payload_bytes, 99u);
    EXPECT_STRNE(PeerFrameTypeName(type), "unknown");
  }
}

TEST(PeerFrameTest, RefusesForeignOrFutureHeaders) {
  auto bytes = Header(PeerFrameType::kHello, 0, 10);
  bytes[0] = 'G';  // "GYKV": an HTTP client or another protocol
  EXPECT_THAT(DecodePeerFrameHeader(bytes, 100).status().message(), HasSubstr("magic"));

  bytes = Header(PeerFrameType::kHello, 0, 10);
  bytes[4] = 2;
  EXPECT_THAT(DecodePeerFrameHeader(bytes, 100).status().message(),
              HasSubstr("protocol version 2"));

  for (uint8_t type : {0, 10, 255}) {
    bytes = Header(PeerFrameType::kHello, 0, 10);
    bytes[5] = type;
    EXPECT_THAT(DecodePeerFrameHeader(bytes, 100).status().message(), HasSubstr("unknown type"));
  }

  bytes = Header(PeerFrameType::kHello, 0, 10);
  bytes[7] = 0x80;
  EXPECT_THAT(DecodePeerFrameHeader(bytes, 100).status().message(), HasSubstr("flags"));
}

TEST(PeerFrameTest, RefusesAPayloadOverTheReceiversLimit) {
  EXPECT_TRUE(DecodePeerFrameHeader(Header(PeerFrameType::kBlockData, 1, 4100), 4100).ok());
  auto over = DecodePeerFrameHeader(Header(PeerFrameType::kBlockData, 1, 4101), 4100);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.status().message(), HasSubstr("block_data payload of 4101 bytes"));
  auto huge = DecodePeerFrameHeader(Header(PeerFrameType::kHello, 0, 0xffffffff), 1 << 20);
  EXPECT_FALSE(huge.ok());
}

TEST(PeerFrameTest, AppendPeerFrameWritesHeaderThenPayload) {
  std::string out = "x";
  AppendPeerFrame(PeerFrameType::kAuth, 5, "\x09\x08\x07", &out);
  ASSERT_EQ(out.size(), 1 + kPeerFrameHeaderBytes + 3);
  std::array<uint8_t, kPeerFrameHeaderBytes> header;
  std::memcpy(header.data(), out.data() + 1, header.size());
  auto decoded = DecodePeerFrameHeader(header, 3);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->type, PeerFrameType::kAuth);
  EXPECT_EQ(decoded->stream_id, 5u);
  EXPECT_EQ(out.substr(1 + kPeerFrameHeaderBytes), "\x09\x08\x07");
}

}  // namespace
}  // namespace switchyard::kvx
