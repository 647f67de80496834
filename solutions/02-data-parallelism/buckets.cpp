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
  // @hint 1: Walk layout.views() from the last tensor to the first. A tensor joins the current
  // @hint 1: bucket when the bucket's bytes plus its own stay within cap_bytes; otherwise it opens
  // @hint 1: a new bucket. So a tensor bigger than the cap is a bucket of its own.
  // @hint 2: The flat buffer is laid out in forward order, so walking backwards a bucket grows
  // @hint 2: downwards: joining moves the bucket's begin to the tensor's offset, a new bucket is
  // @hint 2: {offset, offset + size}. Bytes are elements times element_bytes.
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
  for (const train::Range& b : buckets_) missing_.push_back(b.size());
}

template <TrainElement T>
model::GradReady BucketReducer<T>::hook() {
  return [this](std::int64_t begin, std::int64_t end) { ready(begin, end); };
}

template <TrainElement T>
void BucketReducer<T>::ready(std::int64_t begin, std::int64_t end) {
  // @lab 02.3: Count the finished range against the buckets and start the allreduce of every complete bucket, in bucket order.
  // @hint 1: Subtract the overlap of [begin, end) with each bucket from missing_[b] (a count below
  // @hint 1: zero means a range was reported twice: an InvalidArgument naming the rank and the
  // @hint 1: bucket). Then, while bucket next_ misses nothing, start a ch01::iallreduce (sum, ring)
  // @hint 1: on replica_.grads(its range), keep the PendingCollective in inflight_ and move next_
  // @hint 1: on. Last, call test() on the first handle in inflight_ that is not done().
  // @hint 2: Strictly in bucket order, even when a later bucket completes first: every rank must
  // @hint 2: start the same collectives in the same order, or one rank's bucket 3 meets another's
  // @hint 2: bucket 2. The test() is what moves the rings in flight on the threads backend: a round
  // @hint 2: advances only inside a test() or wait(), and one test() advances every collective in
  // @hint 2: flight.
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const std::int64_t lo = std::max(begin, buckets_[b].begin);
    const std::int64_t hi = std::min(end, buckets_[b].end);
    if (lo < hi) missing_[b] -= hi - lo;
    DTW_CHECK_ARG(missing_[b] >= 0, "rank " << comm_.rank() << ": gradients of bucket " << b
                                            << " were reported final twice in one pass");
  }
  // Strictly in bucket order, even if a later bucket completes first: every
  // rank must start the same collectives in the same order, or a rank's
  // bucket 3 would meet another's bucket 2 (PyTorch's reducer does the same).
  // iallreduce returns at once: backward goes on computing the layers below
  // while the bucket's ring runs.
  while (next_ < buckets_.size() && missing_[next_] == 0) {
    inflight_.push_back(ch01::iallreduce(comm_, replica_.grads(buckets_[next_]), ReduceOp::kSum,
                                         ch01::AllreduceAlgo::kRing));
    ++next_;
  }
  // Someone has to start each ring's next round. On the threads backend that
  // is this rank, inside a test() or wait() (and MPI posts the next round
  // there too), so poll once per reported range -- between layers, where
  // PyTorch's reducer would leave it to the communication stream. One test()
  // advances every collective in flight on the communicator.
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
  // @lab 02.3: Wait for every bucket's allreduce, and refuse a bucket that backward never completed.
  // @hint 1: wait() on every PendingCollective in inflight_, in bucket order, then clear inflight_.
  // @hint 1: The buckets from next_ on were never started: each is an InvalidArgument naming the
  // @hint 1: rank, the bucket, its range and how many gradient elements it still misses.
  // @hint 2: An incomplete bucket must be an error, not a wait: its allreduce was never started, so
  // @hint 2: waiting would hang. Resetting the counts for the next pass comes after this, already
  // @hint 2: written.
  // What backward could not hide is waited for here: at least the last
  // bucket, started only when backward had finished the embedding.
  for (ch01::PendingCollective& pending : inflight_) pending.wait();
  inflight_.clear();
  for (std::size_t b = next_; b < buckets_.size(); ++b) {
    DTW_CHECK_ARG(false, "rank " << comm_.rank() << ": bucket " << b << " [" << buckets_[b].begin
                                 << ", " << buckets_[b].end << ") still misses " << missing_[b]
                                 << " gradient elements after backward (was every range reported?)");
  }
  // @end
  next_ = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].size();
}

template class BucketReducer<float>;
template class BucketReducer<double>;

}  // namespace dtw::ch02
