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
  DTW_TODO("06.5: Vocabulary-parallel embedding: look up the rank's tokens, then sum.");
}

template <TrainElement T>
void vocab_parallel_embedding_backward(Comm& group, T* dwte_local, const T* dx,
                                       const std::int32_t* tokens, std::int64_t v0,
                                       std::int64_t vocab_local, std::int64_t rows,
                                       std::int64_t dim) {
  DTW_TODO("06.5: Embedding backward: each rank adds dx into the rows it owns.");
}

template <TrainElement T>
double vocab_parallel_cross_entropy(Comm& group, T* dlogits_local, const T* logits_local,
                                    const std::int32_t* targets, std::int64_t v0,
                                    std::int64_t vocab_local, std::int64_t rows) {
  DTW_TODO("06.5: Vocabulary-parallel loss: two allreduces (maxima, then sums), never the logits.");
}

// The same two reductions where the GPT's head calls them (gpt_ends.cpp
// computes the local maxima and sums; the seams combine them).
template <TrainElement T>
void MegatronSeams<T>::vocab_max(std::span<T> row_max) {
  DTW_TODO("06.5: The GPT's loss: the two reductions over the vocabulary slices (MegatronSeams).");
}

template <TrainElement T>
void MegatronSeams<T>::vocab_sum(std::span<T> row_sums) {
  DTW_TODO("06.5: The GPT's loss: the two reductions over the vocabulary slices (MegatronSeams).");
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
