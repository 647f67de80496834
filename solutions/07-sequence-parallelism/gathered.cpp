// The first sequence-parallel core (07.1), the baseline: every rank
// all-gathers every rank's K and V, so it holds the whole sequence's keys
// and values (2·p·n elements) while its queries stay its own; the blocks'
// results merge with the log-sum-exp. In the backward, the rank computes its
// queries' contribution to every block's dK, dV, and a reduce-scatter sums
// them and returns each block's sum to its owner.
//
// It is what Ulysses and ring attention improve on: the same answer, but the
// memory of K and V grows back to the whole sequence on every rank, and the
// gathers cannot start before the layer's K and V exist. Per layer each rank
// sends 2(p−1)·n elements to gather K/V (again in the backward: the gathered
// copies are not kept) and about 2(p−1)·n to reduce-scatter dK, dV.
#include <limits>
#include <vector>

#include "collectives.h"  // chapter 01's allgather and reduce_scatter (DEPENDS 01)
#include "sequence_parallelism.h"

namespace dtw::ch07 {
template <TrainElement T>
GatheredAttention<T>::GatheredAttention(CoreSetup setup) : setup_(setup) {}

template <TrainElement T>
void GatheredAttention<T>::forward(T* out, model::CoreCache<T>& cache, const T* q, const T* k,
                                   const T* v, const kernels::AttentionShape& shape,
                                   const TokenRuns& positions, int /*layer*/) {
  Comm& comm = *setup_.comm;
  const std::vector<TokenRuns> runs = runs_of_every_rank(setup_, positions);
  const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
  const std::int64_t rows = n / shape.head_dim;
  std::vector<T> part_out(static_cast<std::size_t>(n)), part_lse(static_cast<std::size_t>(rows));
  std::fill_n(out, n, T(0));
  cache.lse.assign(static_cast<std::size_t>(rows), -std::numeric_limits<T>::infinity());
  // @lab 07.1: Gather every rank's K and V; attend your queries to each rank's block and merge.
  // @hint 1: Attention needs every key and value: fetch them all, then attend your own queries to
  // @hint 1: each rank's block in turn, adding each block's result into the output so far.
  // @hint 2: kv = every rank's [K; V] in rank order (2n values each). For each rank o: attend into
  // @hint 2: a fresh partial with rank o's positions (runs[o]), count its pairs in the tally, merge
  // @hint 2: the partial into (out, lse). The mask compares positions, so give each block its
  // @hint 2: owner's runs, not your own.
  // @hint 3: ch01::allgather(comm, std::span<const T>(mine), std::span<T>(kv)); attend_block(part_out.data(), part_lse.data(), q,
  // @hint 3: positions, k_o, v_o, runs[o], shape, setup_.causal); kernels::attention_merge(out,
  // @hint 3: cache.lse.data(), part_out.data(), part_lse.data(), rows, shape.head_dim).
  std::vector<T> mine(k, k + n), kv(static_cast<std::size_t>(2 * n * comm.size()));
  mine.insert(mine.end(), v, v + n);  // [K; V] of this rank; kv: every rank's, in rank order
  ch01::allgather(comm, std::span<const T>(mine), std::span<T>(kv));
  for (int o = 0; o < comm.size(); ++o) {
    tally_.pairs += attend_block(part_out.data(), part_lse.data(), q, positions,
                                 kv.data() + 2 * o * n, kv.data() + (2 * o + 1) * n,
                                 runs[static_cast<std::size_t>(o)], shape, setup_.causal);
    kernels::attention_merge(out, cache.lse.data(), part_out.data(), part_lse.data(), rows,
                             shape.head_dim);
  }
  // @end
}

template <TrainElement T>
void GatheredAttention<T>::backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                                    const model::CoreCache<T>& cache, const T* q, const T* k,
                                    const T* v, const kernels::AttentionShape& shape,
                                    const TokenRuns& positions, int /*layer*/) {
  Comm& comm = *setup_.comm;
  const int p = comm.size();
  const std::vector<TokenRuns> runs = runs_of_every_rank(setup_, positions);
  const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
  std::fill_n(dq, n, T(0));
  // @lab 07.1: Gather K and V again; add your queries' part of every block's dK, dV; reduce-scatter them to their owners.
  // @hint 1: Your queries' gradient needs every block again (the gathered copies were not kept),
  // @hint 1: and every block's dK, dV gets a part from every rank's queries: sum those parts and
  // @hint 1: hand each block's sum to the rank that owns the block.
  // @hint 2: kv gathered as in the forward. contribution = p blocks of [dK_o; dV_o] (2n values each, zero);
  // @hint 2: for each rank o, the backward of attention over block o adds into dq and into
  // @hint 2: contribution block o. One reduce-scatter (a sum) then leaves block r of the sum on
  // @hint 2: rank r: your dK (first n values) and dV (next n).
  // @hint 3: attend_block_backward(dq, dK_o, dV_o, dout, out, cache.lse.data(), q, positions, k_o,
  // @hint 3: v_o, runs[o], shape, setup_.causal); ch01::reduce_scatter(comm,
  // @hint 3: std::span<T>(contribution), std::span<T>(mine), ReduceOp::kSum); std::copy_n.
  std::vector<T> kv(static_cast<std::size_t>(2 * n * p)), mine(k, k + n);
  mine.insert(mine.end(), v, v + n);
  ch01::allgather(comm, std::span<const T>(mine), std::span<T>(kv));
  // contribution block o = [dK_o; dV_o] from this rank's queries.
  std::vector<T> contribution(static_cast<std::size_t>(2 * n * p), T(0));
  for (int o = 0; o < p; ++o)
    attend_block_backward(dq, contribution.data() + 2 * o * n,
                          contribution.data() + (2 * o + 1) * n, dout, out, cache.lse.data(), q,
                          positions, kv.data() + 2 * o * n, kv.data() + (2 * o + 1) * n,
                          runs[static_cast<std::size_t>(o)], shape, setup_.causal);
  ch01::reduce_scatter(comm, std::span<T>(contribution), std::span<T>(mine), ReduceOp::kSum);
  std::copy_n(mine.data(), n, dk);
  std::copy_n(mine.data() + n, n, dv);
  // @end
}

template <TrainElement T>
std::int64_t GatheredAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return s.batch * s.heads * s.q_len;
}

template class GatheredAttention<float>;
template class GatheredAttention<double>;

}  // namespace dtw::ch07
