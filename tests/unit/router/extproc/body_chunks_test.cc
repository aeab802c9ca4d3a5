#include "router/extproc/body_chunks.h"

#include <string>

#include "gtest/gtest.h"

namespace switchyard::router::extproc {
namespace {

TEST(BodyChunks, CutsIntoFullChunksAndATail) {
  const std::string body(2 * kMaxBodyChunkBytes + 123, 'x');
  const auto chunks = BodyChunks(body);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].size(), kMaxBodyChunkBytes);
  EXPECT_EQ(chunks[1].size(), kMaxBodyChunkBytes);
  EXPECT_EQ(chunks[2].size(), 123u);
  std::string joined;
  for (std::string_view c : chunks)
    joined += c;
  EXPECT_EQ(joined, body);
}

TEST(BodyChunks, ExactMultipleHasNoEmptyTail) {
  const std::string body(2 * kMaxBodyChunkBytes, 'y');
  const auto chunks = BodyChunks(body);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].size(), kMaxBodyChunkBytes);
}

TEST(BodyChunks, EmptyBodyIsOneEmptyChunk) {
  const auto chunks = BodyChunks("");
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(chunks[0].empty());
}

TEST(BodyChunks, KeepsOrderWithSmallLimit) {
  const auto chunks = BodyChunks("abcdefg", 3);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0], "abc");
  EXPECT_EQ(chunks[1], "def");
  EXPECT_EQ(chunks[2], "g");
}

}  // namespace
}  // namespace switchyard::router::extproc
