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

  // @lab 07.3: Ring forward: p hops; start passing the block on, attend to it, merge, then wait.
  // @hint 1: Keep the queries; at each hop hand the K/V block you hold to the next rank while
  // @hint 1: you attend your queries to it, and fold the result into the running output with the
  // @hint 1: log-sum-exp. After p hops every query has seen every block exactly once.
  // @hint 2: for s in 0..p−1: the block in kv[s%2] is rank (r−s) mod p's. If s < p−1 start
  // @hint 2: sending kv[s%2] right and receiving kv[(s+1)%2] from the left (count the hop). Attend
  // @hint 2: into a fresh partial with that owner's positions, merge it, add the pairs to the
  // @hint 2: tally, and only then wait for both messages. The trap: waiting before computing
  // @hint 2: serialises the ring; receiving into the block being computed on corrupts it.
  // @hint 3: comm.isend(kv[s % 2].span(), right, kKvTag), comm.irecv(kv[(s + 1) % 2].span(),
  // @hint 3: left, kKvTag), attend_block(part_out.data(), part_lse.data(), q, positions, block,
  // @hint 3: block + n, runs[owner], shape, setup_.causal), merge_partial(out,
  // @hint 3: cache.lse.data(), ...), comm.wait(request).
  for (int s = 0; s < p; ++s) {
    const int owner = (r - s + p) % p;
    Request send, recv;
    if (s + 1 < p) {  // the next block travels while this one is computed
      send = comm.isend(kv[s % 2].span(), right, kKvTag);
      recv = comm.irecv(kv[(s + 1) % 2].span(), left, kKvTag);
      ++tally_.ring_hops;
    }
    const T* block = kv[s % 2].data();
    tally_.pairs += attend_block(part_out.data(), part_lse.data(), q, positions, block, block + n,
                                 runs[static_cast<std::size_t>(owner)], shape, setup_.causal);
    merge_partial(out, cache.lse.data(), part_out.data(), part_lse.data(), rows,
                  shape.head_dim);
    comm.wait(send);
    comm.wait(recv);
  }
  // @end
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

  // @lab 07.3: Ring backward: K/V around again; each block's dK,dV accumulated hop by hop to its owner.
  // @hint 1: The queries' gradient sums over every block; a block's dK, dV sum over every rank's
  // @hint 1: queries. Pass the blocks around again (received again, never the first one reused),
  // @hint 1: and with each block the running sum of its dK, dV, so that it reaches its owner. A
  // @hint 1: buffer that a message in flight reads or fills may not be touched until it is done.
  // @hint 2: Buffers of 2n: kv[2] (as in the forward, kv[0] = [k; v]), grad_out[2], grad_in.
  // @hint 2: for s in 0..p−1 (owner (r−s) mod p): start the next K/V as in the forward; if s > 0
  // @hint 2: start receiving the running [dK; dV] from the left into grad_in; wait until the
  // @hint 2: grad_out[s%2] sent two hops ago has left; zero it and accumulate your contribution
  // @hint 2: for the block in kv[s%2] into it; if s > 0 wait and add grad_in; send it right
  // @hint 2: (p > 1). After the loop the left neighbour's last send is your own block's sum:
  // @hint 2: receive it into dk, dv. p = 1: no message; your contribution is the whole gradient.
  // @hint 2: The trap: reusing grad_out[s%2] before its send two hops ago completed. This is
  // @hint 2: one design: any rotation of the three buffers that keeps that rule is fine.
  // @hint 3: Array<T>(comm.exec(), 2 * n, MemoryCategory::kCommBuffers) for each buffer;
  // @hint 3: attend_block_backward(dq, acc, acc + n, dout, out, lse, q, positions, k_held,
  // @hint 3: v_held, runs[from], shape, setup_.causal); comm.isend / comm.irecv / comm.wait /
  // @hint 3: comm.recv with kGradTag for the gradients and kKvTag for the blocks.
  const auto buffer = [&] { return Array<T>(comm.exec(), 2 * n, MemoryCategory::kCommBuffers); };
  Array<T> kv[2] = {buffer(), buffer()};        // K/V blocks, as in the forward
  Array<T> grad_out[2] = {buffer(), buffer()};  // [dK; dV] of the block at hand, sent on
  Array<T> grad_in = buffer();                  // [dK; dV] of the block, from the ranks before
  std::copy_n(k, n, kv[0].data());
  std::copy_n(v, n, kv[0].data() + n);
  Request grad_sent[2];
  for (int s = 0; s < p; ++s) {
    const int from = (r - s + p) % p;  // whose block this is
    Request kv_send, kv_recv, grad_recv;
    if (s + 1 < p) {
      kv_send = comm.isend(kv[s % 2].span(), right, kKvTag);
      kv_recv = comm.irecv(kv[(s + 1) % 2].span(), left, kKvTag);
      ++tally_.ring_hops;
    }
    // The running dK, dV of this very block, from the ranks it visited before.
    if (s > 0) grad_recv = comm.irecv(grad_in.span(), left, kGradTag);
    comm.wait(grad_sent[s % 2]);  // that buffer left two hops ago
    T* acc = grad_out[s % 2].data();
    std::fill_n(acc, 2 * n, T(0));
    const T* block_kv = kv[s % 2].data();
    attend_block_backward(dq, acc, acc + n, dout, out, lse, q, positions, block_kv, block_kv + n,
                          runs[static_cast<std::size_t>(from)], shape, setup_.causal);
    if (s > 0) {
      comm.wait(grad_recv);
      for (std::int64_t i = 0; i < 2 * n; ++i) acc[i] += grad_in.data()[i];
    }
    if (p > 1) {
      grad_sent[s % 2] = comm.isend(grad_out[s % 2].span(), right, kGradTag);
      ++tally_.ring_hops;
    }
    comm.wait(kv_send);
    comm.wait(kv_recv);
  }
  // One hop after the last, the sum over every rank reaches the block's owner.
  const T* mine = grad_out[0].data();
  if (p > 1) {
    comm.recv(grad_in.span(), left, kGradTag);
    comm.wait(grad_sent[0]);
    comm.wait(grad_sent[1]);
    mine = grad_in.data();
  }
  std::copy_n(mine, n, dk);
  std::copy_n(mine + n, n, dv);
  // @end
}

template <TrainElement T>
std::int64_t RingAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return s.batch * s.heads * s.q_len;  // the lse: one value per query row
}

template class RingAttention<float>;
template class RingAttention<double>;

}  // namespace dtw::ch07
