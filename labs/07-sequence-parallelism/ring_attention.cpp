// Ring attention: the queries stay where they are and the keys and values
// travel. Rank r starts with its own K/V block; at every hop it passes the
// block it holds to rank r+1 and gets the next one from rank r−1, so after
// p−1 hops every query has met every block:
//
//     hop        rank 0   rank 1   rank 2   rank 3     (which rank's K/V each holds)
//     0          KV0      KV1      KV2      KV3
//     1          KV3      KV0      KV1      KV2
//     2          KV2      KV3      KV0      KV1
//     3          KV1      KV2      KV3      KV0
//
// Each hop's message is started (isend/irecv) *before* the block at hand is
// computed and waited for after it, so the transfer hides behind the
// compute whenever a block's attention takes longer than its 2·n elements
// take on the link. Partial results merge with the log-sum-exp
// (online_softmax.cpp), exactly in any order.
//
// Backward: dq of my queries sums over every block, and dK, dV of a block sum
// over every rank's queries. So the K/V ring runs again (the blocks are
// received again: the first hop's block is not the one at hand later), and
// beside it each block's running dK, dV: at every hop a rank adds its
// contribution to the block it holds and passes the sum on; one hop after
// the last, the sum reaches the block's owner.
//
// Bytes per rank per layer, p > 1: forward 2(p−1)·n (K, V); backward
// 2(p−1)·n (K, V again) + 2p·n (dK, dV); p = 1: none (no ring). Memory: two
// K/V blocks forward (4n); backward at most two K/V blocks and three [dK; dV]
// buffers (10n); never T×T scores.
#include <algorithm>
#include <limits>
#include <vector>

#include "dtw/array.h"
#include "sequence_parallelism.h"

namespace dtw::ch07 {
namespace {

constexpr int kKvTag = 7001;    // a K/V block moving on
constexpr int kGradTag = 7002;  // a block's running dK, dV moving on

std::int64_t elements(const kernels::AttentionShape& s) {
  return s.batch * s.heads * s.q_len * s.head_dim;
}

}  // namespace

template <TrainElement T>
RingAttention<T>::RingAttention(CoreSetup setup) : setup_(setup) {}

template <TrainElement T>
void RingAttention<T>::forward(T* out, model::CoreCache<T>& cache, const T* q, const T* k,
                               const T* v, const kernels::AttentionShape& shape,
                               const TokenRuns& positions, int /*layer*/) {
  Comm& comm = *setup_.comm;
  const int p = comm.size(), r = comm.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const std::vector<TokenRuns> runs = runs_of_every_rank(setup_, positions);
  const std::int64_t n = elements(shape), rows = n / shape.head_dim;
  // Two K/V blocks: the one computed on and the one arriving.
  Array<T> kv[2] = {Array<T>(comm.exec(), 2 * n, MemoryCategory::kCommBuffers),
                    Array<T>(comm.exec(), 2 * n, MemoryCategory::kCommBuffers)};
  std::copy_n(k, n, kv[0].data());
  std::copy_n(v, n, kv[0].data() + n);
  std::vector<T> part_out(static_cast<std::size_t>(n)), part_lse(static_cast<std::size_t>(rows));
  std::fill_n(out, n, T(0));
  cache.lse.assign(static_cast<std::size_t>(rows), -std::numeric_limits<T>::infinity());

  DTW_TODO("07.3: Ring forward: p hops; start passing the block on, attend to it, merge, then wait.");
}

template <TrainElement T>
void RingAttention<T>::backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                                const model::CoreCache<T>& cache, const T* q, const T* k,
                                const T* v, const kernels::AttentionShape& shape,
                                const TokenRuns& positions, int /*layer*/) {
  Comm& comm = *setup_.comm;
  const int p = comm.size(), r = comm.rank();
  const int right = (r + 1) % p, left = (r + p - 1) % p;
  const std::vector<TokenRuns> runs = runs_of_every_rank(setup_, positions);
  const std::int64_t n = elements(shape);
  std::fill_n(dq, n, T(0));
  const T* lse = cache.lse.data();

  DTW_TODO("07.3: Ring backward: K/V around again; each block's dK,dV accumulated hop by hop to its owner.");
}

template <TrainElement T>
std::int64_t RingAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return s.batch * s.heads * s.q_len;  // the lse: one value per query row
}

template class RingAttention<float>;
template class RingAttention<double>;

}  // namespace dtw::ch07
