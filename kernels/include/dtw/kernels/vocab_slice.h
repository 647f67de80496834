#pragma once
/// @file
/// The embedding and the cross-entropy of one vocabulary slice [v0, v1)
/// (Megatron's vocab-parallel embedding and loss, chapter 06): a rank holds
/// rows v0 … v1 − 1 of the token table and those columns of the logits, and
/// never gathers the others. The loss comes in three pieces so that the two
/// reductions across the slices can run between them (the model's
/// Seams::vocab_max and vocab_sum):
///
///     vocab_row_max   → max over every slice (vocab_max) →
///     vocab_exp_sums  → sums over every slice (vocab_sum) →
///     vocab_cross_entropy: losses, probabilities and the mean loss.
///
/// With m the row maximum over all slices, S = Σ_all e^(l − m) and l_t the
/// target's logit: loss = log S + m − l_t, probs = e^(l − m) / S. Every sum
/// is in T, in column (or token) order, so the host kernels give the bits of
/// the plain loops. Conventions: activations.h; ids and targets outside the
/// slice are not errors here (they are another slice's), only negative sizes
/// and an empty slice are (InvalidArgument naming them).

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// `out[i][:] = table[ids[i] − v0][:]` when ids[i] is in [v0, v1), else 0,
/// for n ids and rows of length dim; table holds the v1 − v0 rows of the slice.
template <class T>
void vocab_embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                             std::int64_t dim, std::int64_t v0, std::int64_t v1);
/// vocab_embedding_forward as plain loops: the reference the kernel is tested against.
template <class T>
void vocab_embedding_forward_reference(T* out, const std::int32_t* ids, const T* table,
                                       std::int64_t n, std::int64_t dim, std::int64_t v0,
                                       std::int64_t v1);

/// `dtable[ids[i] − v0][:] += dout[i][:]` for the ids in [v0, v1), in token
/// order (repeated ids sum in that order; no atomics, deterministic).
template <class T>
void vocab_embedding_backward(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                              std::int64_t dim, std::int64_t v0, std::int64_t v1);
/// vocab_embedding_backward as plain loops: the reference the kernel is tested against.
template <class T>
void vocab_embedding_backward_reference(T* dtable, const std::int32_t* ids, const T* dout,
                                        std::int64_t n, std::int64_t dim, std::int64_t v0,
                                        std::int64_t v1);

/// `row_max[r] = max_c logits[r][c]` (the first of equal maxima, as
/// std::max_element) for a rows×cols slice of logits; cols ≥ 1.
template <class T>
void vocab_row_max(T* row_max, const T* logits, std::int64_t rows, std::int64_t cols);
/// vocab_row_max as plain loops: the reference the kernel is tested against.
template <class T>
void vocab_row_max_reference(T* row_max, const T* logits, std::int64_t rows, std::int64_t cols);

/// `sums[r] = Σ_c e^(logits[r][c] − row_max[r])` (in T, in column order) and
/// `sums[rows + r]` = the target's logit `logits[r][targets[r] − v0]` when the
/// target is in this slice [v0, v0 + cols), else 0: the 2·rows values
/// Seams::vocab_sum adds over the slices.
template <class T>
void vocab_exp_sums(T* sums, const T* logits, const T* row_max, const std::int32_t* targets,
                    std::int64_t rows, std::int64_t cols, std::int64_t v0);
/// vocab_exp_sums as plain loops: the reference the kernel is tested against.
template <class T>
void vocab_exp_sums_reference(T* sums, const T* logits, const T* row_max,
                              const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                              std::int64_t v0);

/// From the row maxima and the sums over every slice (sums as vocab_exp_sums
/// lays them out): `losses[r] = log(sums[r]) + row_max[r] − sums[rows + r]`,
/// `probs[r][c] = e^(logits[r][c] − row_max[r]) / sums[r]`; returns the mean
/// loss (summed in T in row order; 0 for no rows).
template <class T>
T vocab_cross_entropy(T* probs, T* losses, const T* logits, const T* row_max, const T* sums,
                      std::int64_t rows, std::int64_t cols);
/// vocab_cross_entropy as plain loops: the reference the kernel is tested against.
template <class T>
T vocab_cross_entropy_reference(T* probs, T* losses, const T* logits, const T* row_max,
                                const T* sums, std::int64_t rows, std::int64_t cols);

/// `dlogits = dloss · probs`, minus dloss at the target's column in the slice
/// holding it (`targets[r] − v0` when in [v0, v0 + cols)): the gradient of
/// dloss · Σ loss, the probabilities already normalised over every slice.
template <class T>
void vocab_cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                                  std::int64_t rows, std::int64_t cols, std::int64_t v0, T dloss);
/// vocab_cross_entropy_backward as plain loops: the reference the kernel is tested against.
template <class T>
void vocab_cross_entropy_backward_reference(T* dlogits, const T* probs, const std::int32_t* targets,
                                            std::int64_t rows, std::int64_t cols, std::int64_t v0,
                                            T dloss);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_vocab_slice.h) on the Place's device and stream ----

/// vocab_embedding_forward on `at`: the host kernel, or its device twin on at's stream.
template <class T>
void vocab_embedding_forward(const Place& at, T* out, const std::int32_t* ids, const T* table,
                             std::int64_t n, std::int64_t dim, std::int64_t v0, std::int64_t v1);
/// vocab_embedding_backward on `at`: the host kernel, or its device twin on at's stream.
template <class T>
void vocab_embedding_backward(const Place& at, T* dtable, const std::int32_t* ids, const T* dout,
                              std::int64_t n, std::int64_t dim, std::int64_t v0, std::int64_t v1);
/// vocab_row_max on `at`: the host kernel, or its device twin on at's stream.
template <class T>
void vocab_row_max(const Place& at, T* row_max, const T* logits, std::int64_t rows,
                   std::int64_t cols);
/// vocab_exp_sums on `at`: the host kernel, or its device twin on at's stream.
template <class T>
void vocab_exp_sums(const Place& at, T* sums, const T* logits, const T* row_max,
                    const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                    std::int64_t v0);
/// vocab_cross_entropy on `at`: the host kernel, or its device twin, which
/// waits for the mean loss it returns.
template <class T>
T vocab_cross_entropy(const Place& at, T* probs, T* losses, const T* logits, const T* row_max,
                      const T* sums, std::int64_t rows, std::int64_t cols);
/// vocab_cross_entropy_backward on `at`: the host kernel, or its device twin on at's stream.
template <class T>
void vocab_cross_entropy_backward(const Place& at, T* dlogits, const T* probs,
                                  const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                                  std::int64_t v0, T dloss);

}  // namespace dtw::kernels
