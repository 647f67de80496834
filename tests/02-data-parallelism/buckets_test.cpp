// Step 02.3, the bucket plan: buckets cover every parameter exactly once, in
// the order backward finishes the gradients, each within the cap unless it
// is one tensor larger than the cap; a bad cap is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "dp_test.h"

namespace dtw::ch02 {
namespace {

using testing::tiny;

// The tensors [begin, end) covers.
int tensors_in(const model::ParamLayout& layout, const train::Range& b) {
  int n = 0;
  for (const model::ParamView& v : layout.views())
    if (v.offset >= b.begin && v.offset + v.size <= b.end) ++n;
  return n;
}

void expect_valid_plan(const model::ParamLayout& layout, const std::vector<train::Range>& buckets,
                       std::int64_t cap_bytes, std::int64_t e) {
  ASSERT_FALSE(buckets.empty());
  // Ready order: the first bucket ends at the end of the buffer, each next
  // one ends where the previous begins, the last begins at 0.
  EXPECT_EQ(buckets.front().end, layout.size()) << "cap " << cap_bytes;
  EXPECT_EQ(buckets.back().begin, 0) << "cap " << cap_bytes;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    EXPECT_LT(buckets[i].begin, buckets[i].end) << "bucket " << i << ", cap " << cap_bytes;
    if (i + 1 < buckets.size()) {
      EXPECT_EQ(buckets[i + 1].end, buckets[i].begin) << "bucket " << i << ", cap " << cap_bytes;
    }
    // Whole tensors only, and within the cap unless it is a single tensor.
    bool starts_at_tensor = false;
    for (const model::ParamView& v : layout.views())
      starts_at_tensor |= v.offset == buckets[i].begin;
    EXPECT_TRUE(starts_at_tensor) << "bucket " << i << " cuts a tensor, cap " << cap_bytes;
    if (buckets[i].size() * e > cap_bytes) {
      EXPECT_EQ(tensors_in(layout, buckets[i]), 1)
          << "bucket " << i << " of " << buckets[i].size() * e << " bytes passes the cap "
          << cap_bytes << " with more than one tensor";
    }
  }
}

DTW_TEST_STEPS(BucketsTest, "02.3");
TEST(BucketsTest, CoverEveryParameterOnceInReadyOrderWithinTheCap) {
  for (const char* name : {"gpt-tiny", "mlp-tiny", "gpt-small"}) {
    DTW_TRACE("bucket plans of " << name << " for caps of 1 B to 1 GiB");
    const model::ParamLayout layout = model::param_layout(tiny(name).config());
    for (std::int64_t cap : {1, 1000, 4096, 65536, 1 << 20, 1 << 30})
      for (std::int64_t e : {4, 8}) expect_valid_plan(layout, make_buckets(layout, cap, e), cap, e);
  }
}

TEST(BucketsTest, ATinyCapGivesOneBucketPerTensorAHugeCapOneBucket) {
  DTW_TRACE("bucket plans of gpt-tiny for a 1-byte cap and a 1 TiB cap");
  const model::ParamLayout layout = model::param_layout(tiny("gpt-tiny").config());
  EXPECT_EQ(make_buckets(layout, 1, 4).size(), layout.views().size());
  const auto one = make_buckets(layout, std::int64_t{1} << 40, 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].begin, 0);
  EXPECT_EQ(one[0].end, layout.size());
}

TEST(BucketsTest, FillGreedilyUpToTheCap) {
  // Three tensors of the MLP's last layer side by side: a cap of exactly
  // their bytes takes them together, one byte less does not.
  DTW_TRACE("mlp-tiny's last two tensors and a cap of exactly their bytes, then one byte less");
  const model::ParamLayout layout = model::param_layout(tiny("mlp-tiny").config());
  const auto& v = layout.views();
  const std::int64_t last_two = v[v.size() - 1].size + v[v.size() - 2].size;
  const auto exact = make_buckets(layout, last_two * 8, 8);
  EXPECT_EQ(exact.front().size(), last_two)
      << "a tensor joins the bucket while the bucket's bytes plus its own are at most the cap";
  const auto less = make_buckets(layout, last_two * 8 - 1, 8);
  EXPECT_EQ(less.front().size(), v.back().size)
      << "a tensor that would take the bucket past the cap opens a new bucket";
}

TEST(BucketsTest, BucketsCompleteInTheirOrderDuringBackward) {
  // Record what backward reports and replay it through the bucket plan: the
  // buckets must become complete first to last.
  for (const char* name : {"gpt-tiny", "mlp-tiny"}) {
    const train::RunSpec spec = tiny(name);
    DTW_TRACE("buckets of " << name << " with a 16 KiB cap, replayed through backward");
    const model::ParamLayout layout = model::param_layout(spec.config());
    const auto buckets = make_buckets(layout, 16 * 1024, 8);
    std::vector<std::int64_t> missing;
    for (const auto& b : buckets) missing.push_back(b.size());
    std::vector<std::size_t> completed;
    // One replica on the host, no launch: every MPI process runs it alike.
    train::Replica<double> replica(spec, Exec::host(), train::ReplicaPlan::whole(spec));
    replica.forward_backward(0, 0, 1, 1.0, [&](std::int64_t begin, std::int64_t end) {
      for (std::size_t i = 0; i < buckets.size(); ++i) {
        const std::int64_t lo = std::max(begin, buckets[i].begin),
                           hi = std::min(end, buckets[i].end);
        if (lo < hi && (missing[i] -= hi - lo) == 0) completed.push_back(i);
      }
    });
    ASSERT_EQ(completed.size(), buckets.size()) << name;
    for (std::size_t i = 0; i < completed.size(); ++i) EXPECT_EQ(completed[i], i) << name;
  }
}

DTW_TEST_STEPS(BucketArgumentsTest);
TEST(BucketArgumentsTest, ACapOrElementSizeOfZeroIsAClearError) {
  const model::ParamLayout layout = model::param_layout(tiny("mlp-tiny").config());
  testing::expect_error([&] { make_buckets(layout, 0, 4); },
                        {"bucket cap 0 bytes must be positive"});
  testing::expect_error([&] { make_buckets(layout, -8, 4); }, {"bucket cap -8"});
  testing::expect_error([&] { make_buckets(layout, 64, 0); }, {"element_bytes 0"});
}

}  // namespace
}  // namespace dtw::ch02
