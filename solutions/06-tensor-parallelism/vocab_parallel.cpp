// The vocabulary cut between the ranks: the embedding and the loss.
//
// wte [V, C] is the largest tensor of a small GPT, and with a tied head the
// logits [rows, V] are the largest activation. Rank r holds the vocabulary
// rows [v0, v1) of wte (vocab_slice: as even as possible) and computes only
// those columns of the logits.
//
// Embedding: a token's row lives on exactly one rank. Every rank writes the
// rows of its tokens and zeros for the others; g's sum leaves the whole
// lookup on every rank (one allreduce of rows·C values). Backward needs no
// message: each rank adds dx into the rows it owns.
//
// Loss: loss_row = log Σ_j exp(l_j − m) + m − l_target, with m the row's
// maximum over the WHOLE vocabulary. Gathering the logits would move
// rows·V values; instead two allreduces of per-row numbers:
//   1. m = max over ranks of each rank's row maximum        (rows values, max)
//   2. [Σ_j exp(l_j − m); l_target] summed over ranks        (2·rows values, sum)
// where a rank that does not hold the target contributes 0 for l_target.
// Then every rank knows each row's loss and its own columns of the softmax,
// so dlogits = (softmax − onehot)/rows needs no further message. Using the
// local maximum or the local sum instead gives each rank a different, wrong
// loss (NVIDIA/Megatron-LM#737).
#include <algorithm>
#include <cmath>

#include "collectives.h"
#include "tensor_parallel.h"

namespace dtw::ch06 {

template <TrainElement T>
void vocab_parallel_embedding_forward(Comm& group, T* x, const std::int32_t* tokens,
                                      const T* wte_local, std::int64_t v0,
                                      std::int64_t vocab_local, std::int64_t rows,
                                      std::int64_t dim) {
  // @lab 06.5: Vocabulary-parallel embedding: look up the rank's tokens, then sum.
  // @hint 1: A token's row of the table lives on exactly one rank. What should the other
  // @hint 1: ranks contribute for that token so that a sum gives the right row?
  // @hint 2: For every row i: if tokens[i] − v0 lies in [0, vocab_local) copy that row of
  // @hint 2: wte_local into x's row i, else write zeros; then g sums x over the group.
  // @hint 3: std::copy_n(wte_local + (tok − v0)·dim, dim, x + i·dim) or std::fill_n(x + i·dim,
  // @hint 3: dim, T(0)); then g_forward(group, std::span<T>(x, rows·dim)).
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t local = tokens[i] - v0;
    if (local >= 0 && local < vocab_local) std::copy_n(wte_local + local * dim, dim, x + i * dim);
    else std::fill_n(x + i * dim, dim, T(0));
  }
  g_forward(group, std::span<T>(x, static_cast<std::size_t>(rows * dim)));
  // @end
}

template <TrainElement T>
void vocab_parallel_embedding_backward(Comm& group, T* dwte_local, const T* dx,
                                       const std::int32_t* tokens, std::int64_t v0,
                                       std::int64_t vocab_local, std::int64_t rows,
                                       std::int64_t dim) {
  // @lab 06.5: Embedding backward: each rank adds dx into the rows it owns.
  // @hint 1: A lookup copies rows, so its gradient adds each row of dx back into the table
  // @hint 1: row it came from -- but only the rank that owns that row holds it.
  // @hint 2: g's backward is the identity (dx is whole on every rank); for every row i whose
  // @hint 2: token is in the rank's slice, dwte_local[tok − v0] += dx[i]. No message.
  // @hint 3: g_backward(group, std::span<const T>(dx, rows·dim)); a loop over i and over the
  // @hint 3: dim columns doing dwte_local[(tok − v0)·dim + j] += dx[i·dim + j].
  g_backward(group, std::span<const T>(dx, static_cast<std::size_t>(rows * dim)));
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t local = tokens[i] - v0;
    if (local < 0 || local >= vocab_local) continue;
    for (std::int64_t j = 0; j < dim; ++j) dwte_local[local * dim + j] += dx[i * dim + j];
  }
  // @end
}

template <TrainElement T>
double vocab_parallel_cross_entropy(Comm& group, T* dlogits_local, const T* logits_local,
                                    const std::int32_t* targets, std::int64_t v0,
                                    std::int64_t vocab_local, std::int64_t rows) {
  // @lab 06.5: Vocabulary-parallel loss: two allreduces (maxima, then sums), never the logits.
  // @hint 1: The softmax needs each row's maximum and its sum of exponentials over the whole
  // @hint 1: vocabulary, and the target's logit, which one rank holds. Combine small per-row
  // @hint 1: numbers, never the logits themselves.
  // @hint 2: row_max = the max of the rank's columns, allreduced with max; sums[i] = Σ over
  // @hint 2: the rank's columns of exp(l − row_max[i]), sums[rows + i] = the target's logit
  // @hint 2: if the rank holds it, else 0; allreduce sums (one call, 2·rows values). Loss of
  // @hint 2: row i = log sums[i] + row_max[i] − sums[rows + i]; the mean over rows. Gradient:
  // @hint 2: (exp(l − row_max)/sums[i] − [column is the target]) / rows on the rank's columns.
  // @hint 3: ch01::allreduce(group, std::span<T>(row_max), ReduceOp::kMax, ...Ring); then
  // @hint 3: ch01::allreduce(group, std::span<T>(sums), ReduceOp::kSum, ...Ring).
  const auto n = static_cast<std::size_t>(rows);
  std::vector<T> row_max(n), sums(2 * n);
  double loss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T* l = logits_local + i * vocab_local;
    row_max[i] = *std::max_element(l, l + vocab_local);
  }
  ch01::allreduce(group, std::span<T>(row_max), ReduceOp::kMax, ch01::AllreduceAlgo::kRing);
  for (std::size_t i = 0; i < n; ++i) {
    const T* l = logits_local + i * vocab_local;
    T sum = 0;
    for (std::int64_t j = 0; j < vocab_local; ++j) sum += std::exp(l[j] - row_max[i]);
    sums[i] = sum;
    const std::int64_t t = targets[i] - v0;
    sums[n + i] = t >= 0 && t < vocab_local ? l[t] : T(0);
  }
  ch01::allreduce(group, std::span<T>(sums), ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  for (std::size_t i = 0; i < n; ++i) {
    loss += std::log(static_cast<double>(sums[i])) + row_max[i] - sums[n + i];
    const T* l = logits_local + i * vocab_local;
    T* dl = dlogits_local + i * vocab_local;
    for (std::int64_t j = 0; j < vocab_local; ++j)
      dl[j] = (std::exp(l[j] - row_max[i]) / sums[i] - (j == targets[i] - v0 ? T(1) : T(0))) /
              static_cast<T>(rows);
  }
  return loss / static_cast<double>(rows);
  // @end
}

// The same two reductions where the GPT's head calls them (gpt_ends.cpp
// computes the local maxima and sums; the seams combine them).
template <TrainElement T>
void MegatronSeams<T>::vocab_max(std::span<T> row_max) {
  // @lab 06.5: The GPT's loss: the two reductions over the vocabulary slices (MegatronSeams).
  // @hint 1: vocab_max: the first of the loss's two reductions, in the GPT.
  // @hint 2: Every rank's row maxima become the maxima over every rank, in place.
  // @hint 3: ch01::allreduce(group_, row_max, ReduceOp::kMax, ch01::AllreduceAlgo::kRing);
  ch01::allreduce(group_, row_max, ReduceOp::kMax, ch01::AllreduceAlgo::kRing);
  // @end
}

template <TrainElement T>
void MegatronSeams<T>::vocab_sum(std::span<T> row_sums) {
  // @lab 06.5: The GPT's loss: the two reductions over the vocabulary slices (MegatronSeams).
  // @hint 1: vocab_sum: the second of the loss's two reductions, in the GPT.
  // @hint 2: Every rank's 2·rows partial sums become the sums over every rank, in place.
  // @hint 3: ch01::allreduce(group_, row_sums, ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  ch01::allreduce(group_, row_sums, ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  // @end
}

#define DTW_CH06_VOCAB(T)                                                                      \
  template void vocab_parallel_embedding_forward<T>(Comm&, T*, const std::int32_t*, const T*,  \
                                                    std::int64_t, std::int64_t, std::int64_t,  \
                                                    std::int64_t);                             \
  template void vocab_parallel_embedding_backward<T>(Comm&, T*, const T*, const std::int32_t*, \
                                                     std::int64_t, std::int64_t, std::int64_t, \
                                                     std::int64_t);                            \
  template double vocab_parallel_cross_entropy<T>(Comm&, T*, const T*, const std::int32_t*,    \
                                                  std::int64_t, std::int64_t, std::int64_t);   \
  template void MegatronSeams<T>::vocab_max(std::span<T>);                                     \
  template void MegatronSeams<T>::vocab_sum(std::span<T>);
DTW_CH06_VOCAB(float)
DTW_CH06_VOCAB(double)

}  // namespace dtw::ch06
