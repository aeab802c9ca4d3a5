#include <filesystem>
#include <string>

#include "gtest/gtest.h"

#include "base/config.h"
#include "base/file.h"

namespace switchyard::base {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

TEST(FileTest, WriteReadAndMap) {
  const std::string path = TempPath("file_test.bin");
  ASSERT_TRUE(WriteFile(path, std::string("abc\0def", 7)).ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->size(), 7u);
  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ((*mapped)->view(), std::string_view("abc\0def", 7));
}

TEST(FileTest, MissingFileNamesPath) {
  auto mapped = MappedFile::Open("/nonexistent/x.bin");
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(mapped.status().message().find("/nonexistent/x.bin"), std::string::npos);
}

TEST(ConfigTest, TypedFieldsAndErrors) {
  auto node = ParseYaml("port: 8080\nname: router\n", "<string>");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(*YamlField<int>(*node, "port", 0), 8080);
  EXPECT_EQ(*YamlField<std::string>(*node, "name", ""), "router");
  EXPECT_EQ(*YamlField<int>(*node, "missing", 7), 7);
  EXPECT_FALSE(YamlField<int>(*node, "name", 0).ok());
  EXPECT_FALSE(ParseYaml("a: [1, 2", "bad.yaml").ok());
}

}  // namespace
}  // namespace switchyard::base
