#pragma once
/// @file
/// Softmax cross-entropy over a vocabulary, fused (the softmax and the loss in
/// one pass, so the log of a rounded-to-zero probability is never taken).
/// Conventions: activations.h.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// For each of `rows` rows of logits (length vocab): probs = softmax(logits)
/// and `losses[r] = logsumexp(logits[r]) − logits[r][targets[r]]`.
/// Returns the mean loss over the rows (0 for no rows). A target outside
/// [0, vocab) raises InvalidArgument naming the row, the target and vocab.
template <class T>
T cross_entropy_forward(T* probs, T* losses, const T* logits, const std::int32_t* targets,
                        std::int64_t rows, std::int64_t vocab);
/// cross_entropy_forward as plain loops: the reference the kernel is tested against.
template <class T>
T cross_entropy_forward_reference(T* probs, T* losses, const T* logits, const std::int32_t* targets,
                                  std::int64_t rows, std::int64_t vocab);

/// `dlogits[r][c] = dloss · (probs[r][c] − [c == targets[r]])`: the gradient of
/// `dloss · Σ_r losses[r]`. Pass dloss = 1/rows for the gradient of the mean
/// loss (or 1/global_rows when rows are one shard of a larger batch).
/// Overwrites dlogits (which may alias probs).
template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                            std::int64_t rows, std::int64_t vocab, T dloss);
/// cross_entropy_backward as plain loops: the reference the kernel is tested against.
template <class T>
void cross_entropy_backward_reference(T* dlogits, const T* probs, const std::int32_t* targets,
                                      std::int64_t rows, std::int64_t vocab, T dloss);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_cross_entropy.h) on the Place's device and stream ----

/// cross_entropy_forward on `at`: the host kernel, or device_cross_entropy_forward on at's stream.
template <class T>
T cross_entropy_forward(const Place& at, T* probs, T* losses, const T* logits,
                        const std::int32_t* targets, std::int64_t rows, std::int64_t vocab);

/// cross_entropy_backward on `at`: the host kernel, or device_cross_entropy_backward on at's
/// stream.
template <class T>
void cross_entropy_backward(const Place& at, T* dlogits, const T* probs,
                            const std::int32_t* targets, std::int64_t rows, std::int64_t vocab,
                            T dloss);

}  // namespace dtw::kernels
