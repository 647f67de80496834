#pragma once
/// @file
/// The element-wise local reduction every collective is built on.

#include <cstdint>

#include "dtw/types.h"

namespace dtw::kernels {

/// `dst[i] = op(dst[i], src[i])` for i in [0, count), as a Kokkos kernel on
/// the host execution space. `kAvg` reduces like `kSum` (the caller divides).
/// Safe to call from many rank threads at once. dst and src must not overlap.
/// Built for int32_t, int64_t, float and double; any other T stops the compile
/// with a message naming them (NumericElement).
template <NumericElement T>
void reduce_into(T* dst, const T* src, std::int64_t count, ReduceOp op);

/// The same reduction on untyped views; `dst` and `src` must have the same
/// type and count (InvalidArgument otherwise) and not be raw bytes.
void reduce_into(Buffer dst, ConstBuffer src, ReduceOp op);

/// `data[i] = data[i] / divisor` in place on the host (truncating integer
/// division for integer types): what ReduceOp::kAvg adds to a sum. The host
/// twin of device_divide (cuda_reduce.h). `divisor` must be positive and
/// `data` not raw bytes (InvalidArgument otherwise).
void divide(Buffer data, int divisor);

/// Plain sequential loop computing exactly what reduce_into computes: the
/// reference the kernels are tested against (the same four types).
template <NumericElement T>
void reduce_into_reference(T* dst, const T* src, std::int64_t count, ReduceOp op);

/// Initializes Kokkos once per process (idempotent, thread-safe) and finalizes it at exit.
void ensure_kokkos_initialized();

}  // namespace dtw::kernels
