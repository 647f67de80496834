#pragma once
/// @file
/// The head permutes, a copy and a fill on a CUDA device (built only where
/// CUDA was found: DTW_HAVE_CUDA in dtw/config.h): the device twins of
/// dtw/kernels/permute.h, with the same arguments in the same order and the
/// stream last (a `cudaStream_t` passed as `void*`, nullptr for the default
/// stream, so that this header needs no CUDA header).
///
/// Every pointer is device (or managed) memory. Calls run on the current
/// device, enqueue on `stream` and return before the work finishes. Sizes
/// are checked before any CUDA call: a negative one raises
/// dtw::InvalidArgument naming the value (also on a machine without a GPU);
/// a size of 0 launches nothing; a failed launch raises dtw::CudaError. They
/// only move numbers, so the results are the host kernels' bits. T is float
/// or double.

#include <cstdint>

namespace dtw::kernels {

/// split_qkv on the device: qkv [batch·seq, 3·heads·head_dim] → q, k, v
/// [batch, heads, seq, head_dim].
template <class T>
void device_split_qkv(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
                      std::int64_t heads, std::int64_t head_dim, void* stream = nullptr);
/// join_qkv on the device: the inverse of device_split_qkv.
template <class T>
void device_join_qkv(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch,
                     std::int64_t seq, std::int64_t heads, std::int64_t head_dim,
                     void* stream = nullptr);
/// merge_heads on the device: [batch, heads, seq, head_dim] → [batch·seq, heads·head_dim].
template <class T>
void device_merge_heads(T* x, const T* per_head, std::int64_t batch, std::int64_t seq,
                        std::int64_t heads, std::int64_t head_dim, void* stream = nullptr);
/// split_heads on the device: the inverse of device_merge_heads.
template <class T>
void device_split_heads(T* per_head, const T* x, std::int64_t batch, std::int64_t seq,
                        std::int64_t heads, std::int64_t head_dim, void* stream = nullptr);
/// copy_values on the device (cudaMemcpyAsync; dst == src does nothing).
template <class T>
void device_copy_values(T* dst, const T* src, std::int64_t n, void* stream = nullptr);
/// fill_values on the device (device_fill, cuda_fill.h).
template <class T>
void device_fill_values(T* dst, std::int64_t n, T value, void* stream = nullptr);

}  // namespace dtw::kernels
