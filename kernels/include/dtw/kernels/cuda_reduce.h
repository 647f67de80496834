#pragma once
/// @file
/// The local reduction on a CUDA device (built only where CUDA was found:
/// DTW_HAVE_CUDA in dtw/config.h). Streams are passed as `void*` so that this
/// header needs no CUDA header; pass a `cudaStream_t`, or nullptr for the
/// default stream.

#include <cstdint>

#include "dtw/types.h"

namespace dtw::kernels {

/// `dst[i] = op(dst[i], src[i])` for i in [0, count) on the current device,
/// enqueued on `stream` (the call returns before the kernel finishes). Both
/// pointers are device (or managed) memory and must not overlap. `kAvg`
/// reduces like `kSum` (the caller divides). Where dst and src are equally
/// aligned the kernel moves 16 bytes per load and store; other elements take a
/// scalar path. Throws dtw::CudaError when the launch fails.
template <class T>
void device_reduce_into(T* dst, const T* src, std::int64_t count, ReduceOp op,
                        void* stream = nullptr);

/// The same on untyped views: dst and src must have the same type and count
/// and not be raw bytes (dtw::InvalidArgument otherwise).
void device_reduce_into(Buffer dst, ConstBuffer src, ReduceOp op, void* stream = nullptr);

/// `data[i] = data[i] / divisor` in place on the current device (truncating
/// integer division for integer types: what ReduceOp::kAvg does after a sum),
/// enqueued on `stream`. `divisor` must be positive and `data` not raw bytes
/// (dtw::InvalidArgument otherwise); count 0 and divisor 1 launch nothing.
/// Throws dtw::CudaError when the launch fails.
void device_divide(Buffer data, int divisor, void* stream = nullptr);

}  // namespace dtw::kernels
