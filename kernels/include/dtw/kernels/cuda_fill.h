#pragma once
/// @file
/// Filling device memory with one value (built only where CUDA was found:
/// DTW_HAVE_CUDA in dtw/config.h). The stream is a `void*` so that this header
/// needs no CUDA header; pass a `cudaStream_t`, or nullptr for the default stream.

#include <cstddef>
#include <cstdint>

namespace dtw::kernels {

/// Sets `count` elements of `elem_bytes` bytes each (1, 2, 4 or 8; a
/// dtw::InvalidArgument otherwise) at device pointer `data` to the bytes at
/// host pointer `value`, on the current device, enqueued on `stream`. Throws
/// dtw::CudaError when the launch fails.
void device_fill(void* data, std::int64_t count, const void* value, std::size_t elem_bytes,
                 void* stream = nullptr);

}  // namespace dtw::kernels
