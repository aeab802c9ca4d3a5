#include "kvx/peer_messages.h"

#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/byte_writer.h"

namespace switchyard::kvx {
namespace {

using ::testing::HasSubstr;

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

PeerDigest Digest(uint8_t fill) {
  PeerDigest d;
  d.fill(fill);
  return d;
}

TEST(PeerMessagesTest, EveryMessageRoundTrips) {
  const PeerHello hello{
      .compatibility_hash = Digest(0xab), .nonce = {1, 2, 3}, .engine_id = "engine-a"};
  EXPECT_EQ(*ParsePeerHello(Bytes(EncodePeerHello(hello))), hello);

  const PeerAuth auth{.mac = Digest(0x5a)};
  EXPECT_EQ(*ParsePeerAuth(Bytes(EncodePeerAuth(auth))), auth);

  const PeerRefuse refuse{.reason = PeerRefusal::kBusy, .message = "too many transfers"};
  EXPECT_EQ(*ParsePeerRefuse(Bytes(EncodePeerRefuse(refuse))), refuse);

  const PeerLookupBlocks lookup{.hashes = {Digest(1), Digest(2), Digest(3)}};
  EXPECT_EQ(*ParsePeerLookupBlocks(Bytes(EncodePeerLookupBlocks(lookup))), lookup);

  const PeerLookupResult result{.block_ids = {7, 0, 4000000000u}, .lease_ms = 30000};
  EXPECT_EQ(*ParsePeerLookupResult(Bytes(EncodePeerLookupResult(result))), result);

  const PeerBlockList blocks{.block_ids = {3, 4, 5}};
  EXPECT_EQ(*ParsePeerBlockList(Bytes(EncodePeerBlockList(blocks))), blocks);
  EXPECT_EQ(*ParsePeerBlockList(Bytes(EncodePeerBlockList({}))), PeerBlockList{});

  const std::string data = EncodePeerBlockDataHeader({.index = 12}) + std::string(64, 'k');
  EXPECT_EQ(ParsePeerBlockDataHeader(Bytes(data))->index, 12u);

  EXPECT_TRUE(ParsePeerReadDone(Bytes(EncodePeerReadDone({})))->status.ok());
  const PeerReadDone evicted{.status = absl::NotFoundError("block 3 was evicted")};
  EXPECT_EQ(*ParsePeerReadDone(Bytes(EncodePeerReadDone(evicted))), evicted);
}

TEST(PeerMessagesTest, EncodersCutStringsToTheirLimits) {
  const PeerHello hello{.engine_id = std::string(300, 'e')};
  EXPECT_EQ(ParsePeerHello(Bytes(EncodePeerHello(hello)))->engine_id.size(), kMaxPeerEngineIdBytes);
  const PeerReadDone long_error{.status = absl::InternalError(std::string(5000, 'x'))};
  EXPECT_EQ(ParsePeerReadDone(Bytes(EncodePeerReadDone(long_error)))->status.message().size(),
            kMaxPeerMessageBytes);
}

TEST(PeerMessagesTest, EveryTruncationIsRefused) {
  struct Case {
    std::string encoding;
    std::function<absl::Status(std::span<const uint8_t>)> parse;
  };
  const Case cases[] = {
      {EncodePeerHello({.engine_id = "e"}), [](auto b) { return ParsePeerHello(b).status(); }},
      {EncodePeerAuth({}), [](auto b) { return ParsePeerAuth(b).status(); }},
      {EncodePeerRefuse({.reason = PeerRefusal::kIncompatible, .message = "m"}),
       [](auto b) { return ParsePeerRefuse(b).status(); }},
      {EncodePeerLookupBlocks({.hashes = {Digest(1)}}),
       [](auto b) { return ParsePeerLookupBlocks(b).status(); }},
      {EncodePeerLookupResult({.block_ids = {1}}),
       [](auto b) { return ParsePeerLookupResult(b).status(); }},
      {EncodePeerBlockList({.block_ids = {1}}),
       [](auto b) { return ParsePeerBlockList(b).status(); }},
      {EncodePeerReadDone({.status = absl::NotFoundError("n")}),
       [](auto b) { return ParsePeerReadDone(b).status(); }},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(c.parse(Bytes(c.encoding)).ok());
    for (size_t n = 0; n < c.encoding.size(); ++n) {
      const absl::Status cut = c.parse(Bytes(c.encoding).first(n));
      EXPECT_EQ(cut.code(), absl::StatusCode::kInvalidArgument) << c.encoding.size() << " " << n;
    }
  }
  EXPECT_THAT(ParsePeerBlockDataHeader(Bytes("abc")).status().message(), HasSubstr("truncated"));
}

TEST(PeerMessagesTest, TrailingBytesAreRefused) {
  auto parsed = ParsePeerAuth(Bytes(EncodePeerAuth({}) + "z"));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("auth message has 1 trailing bytes"));
  EXPECT_FALSE(ParsePeerBlockList(Bytes(EncodePeerBlockList({.block_ids = {1}}) + "zz")).ok());
}

TEST(PeerMessagesTest, CountsAreCheckedBeforeAnythingIsAllocated) {
  // A count at the limit whose items are missing, and one over the limit: both refused
  // from the count alone (a hostile peer cannot make the parser reserve 4 GiB).
  for (uint32_t count : {kMaxPeerBlocksPerRequest, kMaxPeerBlocksPerRequest + 1, 0xffffffffu}) {
    std::string payload;
    base::AppendLittleEndian(count, &payload);
    auto blocks = ParsePeerBlockList(Bytes(payload));
    EXPECT_FALSE(blocks.ok()) << count;
    auto lookup = ParsePeerLookupBlocks(Bytes(payload));
    EXPECT_FALSE(lookup.ok()) << count;
  }
  std::string over;
  base::AppendLittleEndian(kMaxPeerBlocksPerRequest + 1, &over);
  over += std::string((kMaxPeerBlocksPerRequest + 1) * 4, '\0');
  EXPECT_THAT(ParsePeerBlockList(Bytes(over)).status().message(), HasSubstr("at most 65536"));
}

TEST(PeerMessagesTest, UnknownEnumValuesAreRefused) {
  std::string refuse;
  base::AppendLittleEndian(uint16_t{9}, &refuse);
  base::AppendLittleEndian(uint16_t{0}, &refuse);
  EXPECT_THAT(ParsePeerRefuse(Bytes(refuse)).status().message(), HasSubstr("unknown reason 9"));

  std::string done;
  base::AppendLittleEndian(uint16_t{17}, &done);
  base::AppendLittleEndian(uint16_t{0}, &done);
  EXPECT_THAT(ParsePeerReadDone(Bytes(done)).status().message(),
              HasSubstr("unknown status code 17"));

  std::string ok_with_message;
  base::AppendLittleEndian(uint16_t{0}, &ok_with_message);
  base::AppendLittleEndian(uint16_t{1}, &ok_with_message);
  ok_with_message += "x";
  EXPECT_THAT(ParsePeerReadDone(Bytes(ok_with_message)).status().message(),
              HasSubstr("message with status OK"));
}

TEST(PeerMessagesTest, OverlongStringsAreRefused) {
  std::string hello(sizeof(PeerDigest) + sizeof(PeerNonce), '\0');
  base::AppendLittleEndian(uint16_t{256}, &hello);
  hello += std::string(256, 'e');
  EXPECT_THAT(ParsePeerHello(Bytes(hello)).status().message(),
              HasSubstr("string of 256 bytes (at most 255)"));
}

}  // namespace
}  // namespace switchyard::kvx
