// SseFramer: only whole events pass, whatever the chunking and line ends; comment-only events
// before the first data event are dropped, later ones pass; [DONE] is recognised only as a
// whole event; an endless event is refused.
#include "router/internal/sse_framer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace switchyard::router::internal {
namespace {

// Feeds `chunks` and returns what passed, chunk by chunk, then End's.
std::vector<std::string> FeedAll(SseFramer& framer, const std::vector<std::string>& chunks) {
  std::vector<std::string> out;
  for (const std::string& chunk : chunks) {
    absl::StatusOr<std::string> events = framer.Feed(chunk);
    EXPECT_TRUE(events.ok()) << events.status();
    out.push_back(events.ok() ? *events : "");
  }
  out.push_back(framer.End());
  return out;
}

TEST(SseFramerTest, AnEventPassesOnlyOnceItsBlankLineArrived) {
  SseFramer framer;
  EXPECT_EQ(
      FeedAll(framer, {"data: {\"id\":\"x\",\"cho", "ices\":[]}\n", "\n", "data: [DONE]\n\n"}),
      (std::vector<std::string>{"", "", "data: {\"id\":\"x\",\"choices\":[]}\n\n",
                                "data: [DONE]\n\n", ""}));
  EXPECT_TRUE(framer.done());
}

TEST(SseFramerTest, SeveralEventsInOneChunkPassUpToTheLastWholeOne) {
  SseFramer framer;
  EXPECT_EQ(FeedAll(framer, {"data: 1\n\ndata: 2\n\ndata: 3", "\n\n"}),
            (std::vector<std::string>{"data: 1\n\ndata: 2\n\n", "data: 3\n\n", ""}));
  EXPECT_FALSE(framer.done());
}

TEST(SseFramerTest, EveryLineEndTheSpecAllows) {
  for (const std::string eol : {"\n", "\r", "\r\n"}) {
    const std::string event = "data: a" + eol + "data: b" + eol + eol;
    const std::string done = "data: [DONE]" + eol + eol;
    // Byte by byte: a CR at the end of a chunk may be half of a CRLF.
    SseFramer framer;
    std::string passed;
    for (const char c : event + done) {
      absl::StatusOr<std::string> out = framer.Feed(std::string(1, c));
      ASSERT_TRUE(out.ok());
      passed += *out;
      // Never a partial event: what passed so far is whole events.
      EXPECT_TRUE(passed.empty() || passed == event || passed == event + done)
          << testing::PrintToString(passed);
    }
    passed += framer.End();
    EXPECT_EQ(passed, event + done) << testing::PrintToString(eol);
    EXPECT_TRUE(framer.done()) << testing::PrintToString(eol);
  }
}

TEST(SseFramerTest, ACrCrlfBoundaryIsHeldUntilTheNextByteTellsIt) {
  // "\r\n\r" then "\n": the last CR may be a CRLF's first half; the event is passed once
  // its LF came, so the client never sees it cut between the two.
  SseFramer framer;
  EXPECT_EQ(FeedAll(framer, {"data: a\r\n\r", "\ndata: b\r\n\r\n"}),
            (std::vector<std::string>{"", "data: a\r\n\r\ndata: b\r\n\r\n", ""}));
}

TEST(SseFramerTest, KeepAliveCommentsBeforeTheFirstDataAreDroppedLaterOnesPass) {
  SseFramer framer;
  EXPECT_EQ(
      FeedAll(framer, {": keep-alive\n\n", ": keep-alive\n\n: keep", "-alive\n\ndata: 1\n\n",
                       ": keep-alive\n\ndata: [DONE]\n\n"}),
      (std::vector<std::string>{"", "", "data: 1\n\n", ": keep-alive\n\ndata: [DONE]\n\n", ""}));
  EXPECT_TRUE(framer.done());
}

TEST(SseFramerTest, DoneCountsOnlyAsAWholeEventAndOnlyLast) {
  {
    SseFramer framer;  // tight form, no space
    FeedAll(framer, {"data:[DONE]\n\n"});
    EXPECT_TRUE(framer.done());
  }
  {
    SseFramer framer;  // a data line that merely starts like it
    FeedAll(framer, {"data: [DONE]x\n\n"});
    EXPECT_FALSE(framer.done());
  }
  {
    SseFramer framer;  // [DONE] unfinished at the end: not passed, not done
    EXPECT_EQ(FeedAll(framer, {"data: 1\n\ndata: [DONE]\n"}),
              (std::vector<std::string>{"data: 1\n\n", ""}));
    EXPECT_FALSE(framer.done());
  }
  {
    SseFramer framer;  // an event after [DONE]
    FeedAll(framer, {"data: [DONE]\n\ndata: 2\n\n"});
    EXPECT_FALSE(framer.done());
  }
  {
    SseFramer framer;  // a comment after [DONE] leaves it done
    FeedAll(framer, {"data: [DONE]\n\n: bye\n\n"});
    EXPECT_TRUE(framer.done());
  }
  {
    SseFramer framer;  // ended by a CR that only the end confirms
    EXPECT_EQ(FeedAll(framer, {"data: [DONE]\r\r"}),
              (std::vector<std::string>{"", "data: [DONE]\r\r"}));
    EXPECT_TRUE(framer.done());
  }
}

TEST(SseFramerTest, AnEndlessEventIsRefused) {
  SseFramer framer;
  const std::string piece(1 << 20, 'a');
  absl::Status status = framer.Feed("data: ").status();
  for (size_t i = 0; status.ok() && i <= SseFramer::kMaxEventBytes / piece.size(); ++i)
    status = framer.Feed(piece).status();
  EXPECT_TRUE(absl::IsInternal(status)) << status;
}

}  // namespace
}  // namespace switchyard::router::internal
