#pragma once
/// @file
/// Fused softmax cross-entropy on a CUDA device (built only where CUDA was
/// found: DTW_HAVE_CUDA in dtw/config.h): cross_entropy.h's functions with the
/// prefix `device_`, the same arguments, then a stream. The stream is a
/// `void*` so that this header needs no CUDA header; pass a `cudaStream_t`, or
/// nullptr for the default stream. All pointers (targets included) are device
/// memory. Sizes are checked before any CUDA call (dtw::InvalidArgument naming
/// them); a failed CUDA call throws dtw::CudaError. Results are bitwise the
/// same on every run.
///
/// Targets live in device memory, so the host cannot check them before the
/// launch as cross_entropy.h does: the forward kernel checks them itself and
/// the call, which waits for its result anyway, throws; the backward call
/// does not wait, so it marks a bad row with NaN instead (see each function).

#include <cstdint>

namespace dtw::kernels {

/// cross_entropy_forward on the device: probs = softmax(logits) and
/// `losses[r] = logsumexp(logits[r]) − logits[r][targets[r]]`, and returns
/// the mean loss over the rows (0 for no rows), summed in double in a fixed
/// order on the device. Unlike the other device_ calls this one WAITS for the
/// stream (it copies the mean back to the host). A target outside [0, vocab)
/// raises InvalidArgument naming the first such row, its target and vocab, as
/// on the host, but only after the kernels ran: probs and the other rows'
/// losses are then written, and that row's loss is NaN.
template <class T>
T device_cross_entropy_forward(T* probs, T* losses, const T* logits, const std::int32_t* targets,
                               std::int64_t rows, std::int64_t vocab, void* stream = nullptr);

/// cross_entropy_backward on the device: `dlogits[r][c] = dloss · (probs[r][c]
/// − [c == targets[r]])`, enqueued without waiting. Overwrites dlogits (which
/// may alias probs). The targets are NOT checked on the host (that would mean
/// waiting for a copy); they are expected to be the ones the forward call
/// accepted. A row whose target is outside [0, vocab) is never indexed by it:
/// every element of that row's dlogits becomes NaN, so the mistake shows in
/// the gradients instead of corrupting memory.
template <class T>
void device_cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                                   std::int64_t rows, std::int64_t vocab, T dloss,
                                   void* stream = nullptr);

}  // namespace dtw::kernels
