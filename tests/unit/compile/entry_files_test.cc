// The metadata and factors files: a metadata round trip, anything else a DataLoss naming
// what is wrong, the factors summary a listing prints, and the CPU's ISA feature names.
#include "compile/entry_files.h"

#include <string>

#include "gtest/gtest.h"

#include "compile/isa_features.h"
#include "compile_test_support.h"

namespace switchyard::compile {
namespace {

TEST(EntryFilesTest, MetadataRoundTrips) {
  const std::string artefact = ArtefactBytes(1, 100);
  const EntryMetadata metadata = MetadataFor(SampleKey(), artefact, {"avx2", "portable"});
  const std::string text = EncodeEntryMetadata(metadata);
  absl::StatusOr<EntryMetadata> parsed = ParseEntryMetadata(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->key, metadata.key);
  EXPECT_EQ(parsed->format_version, kEntryFormatVersion);
  EXPECT_EQ(parsed->project_version, kTestProjectVersion);
  EXPECT_EQ(parsed->artefact_sha256, Sha256Hex(artefact));
  EXPECT_EQ(parsed->artefact_bytes, 100);
  EXPECT_EQ(parsed->isa_features, metadata.isa_features);
  EXPECT_EQ(parsed->created_unix_s, metadata.created_unix_s);
  EXPECT_GT(parsed->created_unix_s, 1700000000);
  EXPECT_TRUE(CheckEntry(*parsed, metadata.key, artefact, TestRequirements()).ok());
}

TEST(EntryFilesTest, MalformedMetadataIsDataLoss) {
  for (const char* text :
       {"", "{", "[]", R"({"format_version":1})", R"({"format_version":"1","key":"k"})",
        R"({"format_version":1,"key":"k","project_version":"v","artefact_sha256":"s",)"
        R"("artefact_bytes":1,"isa_features":[1],"created_unix_s":0})"}) {
    const absl::Status status = ParseEntryMetadata(text).status();
    EXPECT_TRUE(absl::IsDataLoss(status)) << text << ": " << status;
  }
}

TEST(EntryFilesTest, AnotherFormatVersionIsNotLoaded) {
  const std::string artefact = "x";
  EntryMetadata metadata = MetadataFor(SampleKey(), artefact);
  metadata.format_version = kEntryFormatVersion + 1;
  EXPECT_TRUE(absl::IsDataLoss(CheckEntry(metadata, metadata.key, artefact, TestRequirements())));
}

TEST(EntryFilesTest, FactorsSummaryNamesTopLevelFactors) {
  const CacheKey key = SampleKey();
  absl::StatusOr<std::string> summary = SummarizeFactorsFile(key.FactorsJson(), 200);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(*summary,
            "bucket={2} compiler={3} dtypes=[2] graph_digest=9f2c isa_features=[1] "
            "project_version=9.8.7-test");
  summary = SummarizeFactorsFile(key.FactorsJson(), 20);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(*summary, "bucket={2} compil...");
  EXPECT_TRUE(absl::IsDataLoss(SummarizeFactorsFile("{}", 80).status()));
  EXPECT_TRUE(absl::IsDataLoss(SummarizeFactorsFile("nope", 80).status()));
}

TEST(IsaFeaturesTest, CpuKnowsTheKernelLevels) {
  EXPECT_TRUE(CpuHasIsaFeature("portable"));
  EXPECT_FALSE(CpuHasIsaFeature("no-such-feature"));
  EXPECT_FALSE(CpuHasIsaFeature(""));
}

}  // namespace
}  // namespace switchyard::compile
