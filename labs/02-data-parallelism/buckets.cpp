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
  DTW_TODO("02.3: Pack the tensors into buckets of at most cap_bytes, in the order backward finishes them.");
  return buckets;
}

template <TrainElement T>
BucketReducer<T>::BucketReducer(Comm& comm, train::Replica<T>& replica,
                                std::vector<train::Range> buckets)
    : comm_(comm), replica_(replica), buckets_(std::move(buckets)) {
  DTW_TODO("02.3: Set up the bookkeeping of a pass: nothing started yet, every bucket missing all its gradients.");
}

template <TrainElement T>
model::GradReady BucketReducer<T>::hook() {
  return [this](std::int64_t begin, std::int64_t end) { ready(begin, end); };
}

template <TrainElement T>
void BucketReducer<T>::ready(std::int64_t begin, std::int64_t end) {
  DTW_TODO("02.3: Count the finished range against the buckets, start every complete bucket in bucket order, and move the rings in flight.");
}

template <TrainElement T>
void BucketReducer<T>::finish() {
  DTW_TODO("02.3: Wait for every bucket's allreduce, refuse a bucket that backward never completed, and get ready for the next pass.");
}

template class BucketReducer<float>;
template class BucketReducer<double>;

}  // namespace dtw::ch02
