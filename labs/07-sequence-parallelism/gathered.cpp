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
  DTW_TODO("07.1: Gather every rank's K and V; attend your queries to each rank's block and merge.");
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
  DTW_TODO("07.1: Gather K and V again; add your queries' part of every block's dK, dV; reduce-scatter them to their owners.");
}

template <TrainElement T>
std::int64_t GatheredAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return s.batch * s.heads * s.q_len;
}

template class GatheredAttention<float>;
template class GatheredAttention<double>;

}  // namespace dtw::ch07
