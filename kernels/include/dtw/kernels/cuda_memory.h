#pragma once
/// @file
/// Device memory for kernels::Vector (vector.h), built only where CUDA was
/// found (DTW_HAVE_CUDA in dtw/config.h). Every call works on the current
/// device; streams are `void*` (a cudaStream_t, nullptr for the default
/// stream) so this header needs no CUDA header. Each throws dtw::CudaError
/// naming the call when CUDA fails.

#include <cstddef>

namespace dtw::kernels {

/// `bytes` of device memory from the stream-ordered pool (cudaMallocAsync).
void* device_allocate(std::size_t bytes, void* stream);
/// Returns memory from device_allocate to the pool, ordered on `stream`
/// (cudaFreeAsync); never throws (a failure is dropped: this runs in destructors).
void device_free(void* data, void* stream) noexcept;
/// Copies `bytes` between any two pointers (host or device, any device),
/// ordered on `stream`; waits for the copy when `sync` (a host side is involved).
void device_copy(void* dst, const void* src, std::size_t bytes, void* stream, bool sync);
/// Sets `bytes` bytes at `data` to zero, ordered on `stream`.
void device_zero(void* data, std::size_t bytes, void* stream);

}  // namespace dtw::kernels
