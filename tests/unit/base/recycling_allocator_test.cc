// RecyclingAllocator: a freed block comes back to the next allocation on the same thread (not
// under ASan or TSan, where it keeps nothing), another thread's list is apart, and
// allocate_shared objects live and die through it like make_shared ones.
#include "base/recycling_allocator.h"

#include <memory>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace switchyard::base {
namespace {

struct Payload {
  std::string text;
  int value = 0;
};

TEST(RecyclingAllocatorTest, AFreedBlockIsHandedOutAgainOnItsThread) {
  RecyclingAllocator<Payload> alloc;
  Payload* first = alloc.allocate(1);
  alloc.deallocate(first, 1);
  Payload* second = alloc.allocate(1);
  if (RecyclingAllocator<Payload>::kMaxKept > 0) {
    EXPECT_EQ(second, first);
  }
  // Another thread has lists of its own: it does not get this thread's block.
  alloc.deallocate(second, 1);
  Payload* other = nullptr;
  std::thread([&] {
    other = alloc.allocate(1);
    alloc.deallocate(other, 1);
  }).join();
  Payload* third = alloc.allocate(1);
  if (RecyclingAllocator<Payload>::kMaxKept > 0) {
    EXPECT_EQ(third, first);
  }
  alloc.deallocate(third, 1);
}

TEST(RecyclingAllocatorTest, SharedObjectsLiveAndDieThroughIt) {
  auto a = std::allocate_shared<Payload>(RecyclingAllocator<Payload>(), Payload{"a", 1});
  std::weak_ptr<Payload> weak = a;
  EXPECT_EQ(a->text, "a");
  a.reset();
  EXPECT_TRUE(weak.expired());
  weak.reset();
  auto b = std::allocate_shared<Payload>(RecyclingAllocator<Payload>(), Payload{"b", 2});
  EXPECT_EQ(b->text, "b");
  EXPECT_EQ(b->value, 2);
}

}  // namespace
}  // namespace switchyard::base
