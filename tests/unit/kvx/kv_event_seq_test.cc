#include "kvx/kv_event_seq.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

#include "kv_event_wire_support.h"

namespace switchyard::kvx {
namespace {

TEST(KvEventSeqTest, IsEightBytesBigEndian) {
  EXPECT_EQ(EncodeKvEventSeq(0x0102030405060708u), (KvEventSeqFrame{1, 2, 3, 4, 5, 6, 7, 8}));
  for (uint64_t seq : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256},
                       uint64_t{0x1234567890abcdefu}, std::numeric_limits<uint64_t>::max()}) {
    EXPECT_EQ(EncodeKvEventSeq(seq), SeqFrame(seq)) << seq;  // the tests' own coding
    EXPECT_EQ(DecodeKvEventSeq(EncodeKvEventSeq(seq)), seq);
  }
}

TEST(KvEventSeqTest, EndSeqIsMinusOne) {
  EXPECT_EQ(DecodeKvEventSeq(kKvEventEndSeq), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(static_cast<int64_t>(*DecodeKvEventSeq(kKvEventEndSeq)), -1);
}

TEST(KvEventSeqTest, AnyOtherLengthIsNotASeq) {
  for (size_t size : {0, 1, 7, 9, 16}) {
    const std::vector<uint8_t> frame(size, 0);
    EXPECT_FALSE(DecodeKvEventSeq(frame).has_value()) << size;
  }
}

}  // namespace
}  // namespace switchyard::kvx
