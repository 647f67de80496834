// The threads backend's queue of unmatched operations (core/src/threads/
// op_queue.h): found by key, first in first out per key, through the table's
// growth and after removals from the middle.
#include <gtest/gtest.h>

#include <vector>

#include "threads/threads_world.h"

namespace dtw::threads {
namespace {

TEST(OpQueueTest, EachKeyIsFirstInFirstOutThroughGrowthAndRemovals) {
  constexpr int kKeys = 37, kPerKey = 20;  // 740 ops: the table grows several times
  std::vector<Op> ops(kKeys * kPerKey);
  OpQueue<Op, Key> queue;
  const auto key_of = [](int k) { return Key{k % 3, k, 7 * k}; };
  // Pushed interleaved: op i belongs to key i % kKeys and is number i / kKeys of it.
  for (int i = 0; i < kKeys * kPerKey; ++i) queue.push(&ops[i], key_of(i % kKeys));
  // Every fifth op of key 0 leaves from the middle of its list.
  for (int n = 0; n < kPerKey; n += 5) EXPECT_TRUE(queue.remove(&ops[n * kKeys]));
  EXPECT_FALSE(queue.remove(&ops[0])) << "an op taken out is no longer there";
  for (int k = 0; k < kKeys; ++k) {
    for (int n = 0; n < kPerKey; ++n) {
      if (k == 0 && n % 5 == 0) continue;
      EXPECT_EQ(queue.pop(key_of(k)), &ops[n * kKeys + k]) << "key " << k << ", op " << n;
    }
    EXPECT_EQ(queue.pop(key_of(k)), nullptr) << "key " << k << " has no more";
  }
  EXPECT_EQ(queue.pop(Key{0, 1000, 0}), nullptr) << "a key never pushed";
}

TEST(OpQueueTest, KeysDifferingInOneFieldAreDifferentKeys) {
  std::vector<Op> ops(4);
  OpQueue<Op, Key> queue;
  queue.push(&ops[0], Key{1, 2, 3});
  queue.push(&ops[1], Key{0, 2, 3});
  queue.push(&ops[2], Key{1, 0, 3});
  queue.push(&ops[3], Key{1, 2, 0});
  EXPECT_EQ(queue.pop(Key{1, 2, 0}), &ops[3]);
  EXPECT_EQ(queue.pop(Key{1, 0, 3}), &ops[2]);
  EXPECT_EQ(queue.pop(Key{0, 2, 3}), &ops[1]);
  EXPECT_EQ(queue.pop(Key{1, 2, 3}), &ops[0]);
}

}  // namespace
}  // namespace dtw::threads
