// Gradient buckets: the allreduce of DDP cut into pieces that start while
// backward is still running.
//
// Backward finishes the gradients from the last layer to the first. The
// gradient of the head is final long before the embedding's, so its
// allreduce could start at once, while backward works on the layers below.
// One allreduce per tensor would pay a latency α for each of hundreds of
// tensors; one allreduce for everything could only start at the very end.
// DDP takes the middle road: it packs the tensors, in the order their
// gradients become final, into buckets of at most a few MiB, and starts a
// bucket's allreduce the moment its last gradient is final:
//
//     flat buffer:  | wte wpe | h.0 ........ | h.1 ........ | lnf |
//     backward:                                  ◄─────────────────  head, h.1, h.0, embed
//     buckets:        bucket 3 | bucket 2    | bucket 1     | b 0    (ready order)
//
//     compute  ██ bwd head ██ bwd h.1 ████ bwd h.0 ████ bwd embed █
//     comm                  ▓▓ b0 ▓▓▓▓▓▓ b1 ▓▓▓▓▓▓▓ b2 ▓▓▓▓▓▓▓▓▓▓▓ b3 ▓▓▓
//                                                               └─ exposed
//
// Everything but the last bucket can hide under backward; the last one --
// which holds the embedding, whose tied gradient backward finishes last of
// all -- can only start when backward is over. Bytes are the same as one big
// allreduce (2(p−1)/p·Ψe per rank): buckets buy time, not bytes.
//
// Because the flat buffer is laid out in forward order, tensors adjacent in
// ready order are adjacent in memory: a bucket is a contiguous range of the
// gradient buffer, and its allreduce runs on that range in place. PyTorch
// gets the same with gradient_as_bucket_view=True; without it, DDP copies
// gradients into separate bucket buffers, Ψ more bytes of memory.
// What the tests hold the reducer to (tests/02-data-parallelism/
// bucket_reducer_test.cpp), besides the sums:
//   - the order: two ranks finish four buckets of one size in opposite
//     orders; each bucket must end holding the sum of every rank's same
//     bucket, so no bucket may start before every lower one has;
//   - the polling: with the ranks reporting the buckets one at a time in
//     lockstep, every ring but the last few must have sent all of its
//     messages before finish() (counted from the traffic, not a clock);
//   - a pass after a pass: finish() leaves the reducer as it was built;
//   - the errors: a range reported twice, and a bucket never completed,
//     each an InvalidArgument naming the rank and the bucket.
#include <algorithm>

#include "data_parallelism.h"
#include "nonblocking.h"  // chapter 01's solution: iallreduce (DEPENDS 01)

namespace dtw::ch02 {

std::vector<train::Range> make_buckets(const model::ParamLayout& layout, std::int64_t cap_bytes,
                                       std::int64_t element_bytes) {
  DTW_CHECK_ARG(cap_bytes > 0,
                "make_buckets: the bucket cap " << cap_bytes << " bytes must be positive");
  DTW_CHECK_ARG(element_bytes > 0,
                "make_buckets: element_bytes " << element_bytes << " must be positive");
  std::vector<train::Range> buckets;
  // @lab 02.3: Pack the tensors into buckets of at most cap_bytes, in the order backward finishes them.
  // @hint 1: Cut the gradients into buckets in the order backward finishes them, last tensor
  // @hint 1: first, each bucket as full as the cap allows: a tensor joins the current bucket if
  // @hint 1: the bucket stays within the cap, otherwise it opens the next one (so a tensor larger
  // @hint 1: than the cap is a bucket of its own). Every bucket is then one contiguous range.
  // @hint 2: Walk the tensors from the last to the first. The buffer is in forward order, so
  // @hint 2: walking backwards a bucket grows downwards: joining moves the bucket's begin to the
  // @hint 2: tensor's offset; a new bucket is {offset, offset + size}. Bytes are elements times
  // @hint 2: element_bytes, and "within" means at most the cap. Trap: walking first to last gives
  // @hint 2: forward order, and the buckets would complete last one first.
  // @hint 3: layout.views() with rbegin()/rend(); view->offset, view->size; buckets.back().size();
  // @hint 3: buckets.back().begin = view->offset; buckets.push_back({view->offset, view->offset +
  // @hint 3: view->size}).
  const std::vector<model::ParamView>& views = layout.views();
  for (auto view = views.rbegin(); view != views.rend(); ++view) {
    const std::int64_t bytes = view->size * element_bytes;
    const bool fits =
        !buckets.empty() && (buckets.back().size() * element_bytes + bytes <= cap_bytes);
    if (fits) {
      buckets.back().begin = view->offset;  // grow downwards: the next tensor lies below
    } else {
      buckets.push_back({view->offset, view->offset + view->size});
    }
  }
  // @end
  return buckets;
}

template <TrainElement T>
BucketReducer<T>::BucketReducer(Comm& comm, train::Replica<T>& replica,
                                std::vector<train::Range> buckets)
    : comm_(comm), replica_(replica), buckets_(std::move(buckets)) {
  // @lab 02.3: Set up the bookkeeping of a pass: nothing started yet, every bucket missing all its gradients.
  // @hint 1: Before backward reports anything, every gradient of every bucket is still missing and
  // @hint 1: no bucket's allreduce has started.
  // @hint 2: One count per bucket, in bucket order, equal to the bucket's number of elements; the
  // @hint 2: next bucket to start is bucket 0. finish() puts the reducer back in this state.
  // @hint 3: missing_.push_back(b.size()) for every b in buckets_; next_ = 0.
  for (const train::Range& b : buckets_) missing_.push_back(b.size());
  next_ = 0;
  // @end
}

template <TrainElement T>
model::GradReady BucketReducer<T>::hook() {
  return [this](std::int64_t begin, std::int64_t end) { ready(begin, end); };
}

template <TrainElement T>
void BucketReducer<T>::ready(std::int64_t begin, std::int64_t end) {
  // @lab 02.3: Count the finished range against the buckets, start every complete bucket in bucket order, and move the rings in flight.
  // @hint 1: Three things each time backward reports a range. Count: the range's elements are no
  // @hint 1: longer missing from the buckets it overlaps (a count below zero is a range reported
  // @hint 1: twice: refuse it, naming the rank and the bucket). Start: buckets start strictly in
  // @hint 1: bucket order, even when a later one completes first, because every rank must start
  // @hint 1: the same collectives in the same order. Poll: nothing moves a ring between two calls
  // @hint 1: into it, so advance the ones in flight now, between two layers of backward.
  // @hint 2: for each bucket b: overlap = [max(begin, b.begin), min(end, b.end)); if not empty,
  // @hint 2: missing[b] -= its size; missing[b] < 0 is an InvalidArgument. Then while bucket next
  // @hint 2: exists and misses nothing: start its allreduce (sum, ring) on its gradients, keep the
  // @hint 2: handle, next += 1. Last, one test() on the first handle not done yet (one test()
  // @hint 2: advances every collective in flight). Trap: starting the bucket that just completed
  // @hint 2: instead of bucket `next` pairs one rank's bucket 3 with another's bucket 2; never
  // @hint 2: polling leaves every ring where it started until finish().
  // @hint 3: std::max/std::min for the overlap; DTW_CHECK_ARG(missing_[b] >= 0, "rank " <<
  // @hint 3: comm_.rank() << ": gradients of bucket " << b << " were reported final twice ...");
  // @hint 3: inflight_.push_back(ch01::iallreduce(comm_, replica_.grads(buckets_[next_]),
  // @hint 3: ReduceOp::kSum, ch01::AllreduceAlgo::kRing)); pending.done(), pending.test().
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const std::int64_t lo = std::max(begin, buckets_[b].begin);
    const std::int64_t hi = std::min(end, buckets_[b].end);
    if (lo < hi) missing_[b] -= hi - lo;
    DTW_CHECK_ARG(missing_[b] >= 0, "rank " << comm_.rank() << ": gradients of bucket " << b
                                            << " were reported final twice in one pass");
  }
  while (next_ < buckets_.size() && missing_[next_] == 0) {
    const train::Range bucket = buckets_[next_];
    inflight_.push_back(
        ch01::iallreduce(comm_, replica_.grads(bucket), ReduceOp::kSum, ch01::AllreduceAlgo::kRing));
    ++next_;
  }
  for (ch01::PendingCollective& pending : inflight_) {
    if (!pending.done()) {
      pending.test();
      break;
    }
  }
  // @end
}

template <TrainElement T>
void BucketReducer<T>::finish() {
  // @lab 02.3: Wait for every bucket's allreduce, refuse a bucket that backward never completed, and get ready for the next pass.
  // @hint 1: What backward could not hide is waited for here: at least the last bucket. A bucket
  // @hint 1: that never became complete was never started, so waiting for it would hang: it is an
  // @hint 1: error naming the rank, the bucket, its range and what it still misses. Then the
  // @hint 1: reducer starts over, as it was built.
  // @hint 2: wait on every handle, in bucket order, and drop them; every bucket from next on is
  // @hint 2: an InvalidArgument; then next = 0 and every count back to its bucket's size. Trap:
  // @hint 2: without the reset, the next step's first report drives the counts below zero.
  // @hint 3: pending.wait() for each in inflight_, inflight_.clear(); DTW_CHECK_ARG(false, "rank "
  // @hint 3: << comm_.rank() << ": bucket " << b << " [" << begin << ", " << end << ") still misses
  // @hint 3: " << missing_[b] << " gradient elements after backward ..."); missing_[b] =
  // @hint 3: buckets_[b].size().
  for (ch01::PendingCollective& pending : inflight_) pending.wait();
  inflight_.clear();
  for (std::size_t b = next_; b < buckets_.size(); ++b) {
    DTW_CHECK_ARG(false, "rank " << comm_.rank() << ": bucket " << b << " [" << buckets_[b].begin
                                 << ", " << buckets_[b].end << ") still misses " << missing_[b]
                                 << " gradient elements after backward (was every range reported?)");
  }
  next_ = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].size();
  // @end
}

template class BucketReducer<float>;
template class BucketReducer<double>;

}  // namespace dtw::ch02
