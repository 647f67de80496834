#pragma once
/// @file
/// A vocabulary slice's embedding and cross-entropy pieces on a CUDA device
/// (built only where CUDA was found: DTW_HAVE_CUDA in dtw/config.h): the
/// device twins of dtw/kernels/vocab_slice.h, with the same arguments in the
/// same order and the stream last (a `cudaStream_t` passed as `void*`,
/// nullptr for the default stream).
///
/// Every pointer is device (or managed) memory. Calls run on the current
/// device and enqueue on `stream`; all but device_vocab_cross_entropy (which
/// returns the mean loss, so waits) return before the work finishes. Sizes
/// are checked as on the host, before any CUDA call (InvalidArgument naming
/// them, also without a GPU). No floating-point atomics: every result is the
/// same bits run to run. The lookup, its backward (token order), the row
/// maxima and the backward of the loss are the host kernels' bits; the sums
/// of exponentials (a fixed tree in double over CUDA's exp), the losses,
/// probabilities and the mean differ from them by rounding. T is float or double.

#include <cstdint>

namespace dtw::kernels {

/// vocab_embedding_forward on the device: one thread per output element.
template <class T>
void device_vocab_embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                                    std::int64_t dim, std::int64_t v0, std::int64_t v1,
                                    void* stream = nullptr);
/// vocab_embedding_backward on the device: the ids made local (−1 outside the
/// slice), then device_embedding_backward (a stable sort, each row's tokens
/// summed in token order; the −1s dropped). Takes about 16·n bytes of
/// scratch from the stream's memory pool. Needs n ≤ INT32_MAX.
template <class T>
void device_vocab_embedding_backward(T* dtable, const std::int32_t* ids, const T* dout,
                                     std::int64_t n, std::int64_t dim, std::int64_t v0,
                                     std::int64_t v1, void* stream = nullptr);
/// vocab_row_max on the device: one block per row, a fixed tree.
template <class T>
void device_vocab_row_max(T* row_max, const T* logits, std::int64_t rows, std::int64_t cols,
                          void* stream = nullptr);
/// vocab_exp_sums on the device: one block per row, the sum a fixed tree in double.
template <class T>
void device_vocab_exp_sums(T* sums, const T* logits, const T* row_max, const std::int32_t* targets,
                           std::int64_t rows, std::int64_t cols, std::int64_t v0,
                           void* stream = nullptr);
/// vocab_cross_entropy on the device; the mean is a fixed tree in double,
/// copied back after waiting on `stream`.
template <class T>
T device_vocab_cross_entropy(T* probs, T* losses, const T* logits, const T* row_max, const T* sums,
                             std::int64_t rows, std::int64_t cols, void* stream = nullptr);
/// vocab_cross_entropy_backward on the device: one thread per element, the
/// host's `dloss·p`, then `− dloss` at the target, unfused.
template <class T>
void device_vocab_cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                                         std::int64_t rows, std::int64_t cols, std::int64_t v0,
                                         T dloss, void* stream = nullptr);

}  // namespace dtw::kernels
