// The signed Redis value of a compile cache entry: a round trip, and every way a value may
// not be loaded (truncated, unsigned, signed with another key, altered after signing, another
// key's, stale, built for a CPU feature this one lacks) a DataLoss saying which.
#include "compile/redis_entry.h"

#include <string>

#include "gtest/gtest.h"

#include "compile_test_support.h"

namespace switchyard::compile {
namespace {

constexpr std::string_view kSigningKey = "0123456789abcdef-signing";

std::string Encoded(const CacheKey& key, const std::string& artefact,
                    std::vector<std::string> isa = {"avx2"}) {
  return EncodeRedisEntry(MetadataFor(key, artefact, std::move(isa)), key.FactorsJson(), artefact,
                          kSigningKey);
}

absl::Status Decode(std::string_view value, const CacheKey& key,
                    std::string_view signing_key = kSigningKey) {
  return DecodeRedisEntry(value, key.hex, signing_key, TestRequirements()).status();
}

void ExpectDataLoss(const absl::Status& status, std::string_view message) {
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(std::string(status.message()).find(message), std::string::npos) << status;
}

TEST(RedisEntryTest, RoundTrips) {
  const CacheKey key = SampleKey();
  const std::string artefact = ArtefactBytes(5);
  const std::string value = Encoded(key, artefact);
  EXPECT_EQ(value.substr(0, 8), "SYCCENT1");
  absl::StatusOr<RedisEntry> entry =
      DecodeRedisEntry(value, key.hex, kSigningKey, TestRequirements());
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(entry->artefact, artefact);
  EXPECT_EQ(entry->factors_json, key.FactorsJson());
  EXPECT_EQ(entry->metadata.key, key.hex);
  EXPECT_EQ(entry->metadata.artefact_sha256, Sha256Hex(artefact));
}

TEST(RedisEntryTest, TruncatedValuesAreDataLoss) {
  const CacheKey key = SampleKey();
  const std::string value = Encoded(key, ArtefactBytes(5));
  ExpectDataLoss(Decode(value.substr(0, 5), key), "not a compile cache entry");
  ExpectDataLoss(Decode(value.substr(0, 23), key), "not a compile cache entry");
  ExpectDataLoss(Decode(value.substr(0, 200), key), "truncated");
  ExpectDataLoss(Decode(value.substr(0, value.size() - 40), key), "truncated");
  ExpectDataLoss(Decode(value.substr(0, value.size() - 1), key), "malformed signature");
  ExpectDataLoss(Decode("", key), "not a compile cache entry");
}

TEST(RedisEntryTest, UnsignedAndWronglySignedValuesAreDataLoss) {
  const CacheKey key = SampleKey();
  const std::string value = Encoded(key, ArtefactBytes(5));
  ExpectDataLoss(Decode(value.substr(0, value.size() - kRedisEntrySignatureBytes), key),
                 "unsigned");
  ExpectDataLoss(Decode(value, key, "another-key-of-16-bytes"), "signed with another key");
  std::string altered = value;
  altered[value.size() / 2] ^= 1;
  ExpectDataLoss(Decode(altered, key), "signed with another key");
}

TEST(RedisEntryTest, SignedButUnloadableValuesAreDataLoss) {
  const CacheKey key = SampleKey();
  const std::string artefact = ArtefactBytes(5);
  ExpectDataLoss(Decode(Encoded(key, artefact), SampleKey(17)), "metadata names key");
  ExpectDataLoss(Decode(Encoded(key, artefact, {"avx512"}), key), "lacks");
  EntryMetadata stale = MetadataFor(key, artefact);
  stale.project_version = "0.0.1";
  ExpectDataLoss(Decode(EncodeRedisEntry(stale, key.FactorsJson(), artefact, kSigningKey), key),
                 "0.0.1");
  EntryMetadata lying = MetadataFor(key, artefact);
  lying.artefact_sha256 = Sha256Hex("other");
  ExpectDataLoss(Decode(EncodeRedisEntry(lying, key.FactorsJson(), artefact, kSigningKey), key),
                 "SHA-256");
}

}  // namespace
}  // namespace switchyard::compile
