#pragma once
/// @file
/// Kernels that only move numbers: the attention's head permutes, a copy and
/// a fill. Nothing is rounded, so every twin (cuda_permute.h) gives the host
/// kernel's bits. Conventions: activations.h.
///
/// The permutes move head_dim-long runs between the two layouts of multi-head
/// attention: row r = b·seq + t of a [batch·seq, heads·head_dim] matrix holds,
/// for each head h, the run at columns h·D … h·D + D − 1, which belongs at
/// [b, h, t, :] of the per-head layout [batch, heads, seq, head_dim]. Inputs
/// and outputs must not overlap.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// qkv [batch·seq, 3·heads·head_dim] (columns [q; k; v], heads contiguous in
/// each) → q, k, v [batch, heads, seq, head_dim]. Negative sizes raise
/// InvalidArgument naming them.
template <class T>
void split_qkv(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
               std::int64_t heads, std::int64_t head_dim);
/// split_qkv as plain loops: the reference the kernel is tested against.
template <class T>
void split_qkv_reference(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
                         std::int64_t heads, std::int64_t head_dim);

/// The inverse of split_qkv (used on gradients: dq, dk, dv → dqkv).
template <class T>
void join_qkv(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch, std::int64_t seq,
              std::int64_t heads, std::int64_t head_dim);
/// join_qkv as plain loops: the reference the kernel is tested against.
template <class T>
void join_qkv_reference(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch,
                        std::int64_t seq, std::int64_t heads, std::int64_t head_dim);

/// per_head [batch, heads, seq, head_dim] → x [batch·seq, heads·head_dim].
template <class T>
void merge_heads(T* x, const T* per_head, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim);
/// merge_heads as plain loops: the reference the kernel is tested against.
template <class T>
void merge_heads_reference(T* x, const T* per_head, std::int64_t batch, std::int64_t seq,
                           std::int64_t heads, std::int64_t head_dim);

/// The inverse of merge_heads: x [batch·seq, heads·head_dim] → per_head.
template <class T>
void split_heads(T* per_head, const T* x, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim);
/// split_heads as plain loops: the reference the kernel is tested against.
template <class T>
void split_heads_reference(T* per_head, const T* x, std::int64_t batch, std::int64_t seq,
                           std::int64_t heads, std::int64_t head_dim);

/// `dst[i] = src[i]` for n elements (dst == src: nothing to do; otherwise
/// they must not overlap). A negative n raises InvalidArgument naming it.
template <class T>
void copy_values(T* dst, const T* src, std::int64_t n);
/// copy_values as a plain loop: the reference the kernel is tested against.
template <class T>
void copy_values_reference(T* dst, const T* src, std::int64_t n);

/// `dst[i] = value` for n elements. A negative n raises InvalidArgument naming it.
template <class T>
void fill_values(T* dst, std::int64_t n, T value);
/// fill_values as a plain loop: the reference the kernel is tested against.
template <class T>
void fill_values_reference(T* dst, std::int64_t n, T value);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_permute.h) on the Place's device and stream ----

/// split_qkv on `at`: the host kernel, or device_split_qkv on at's stream.
template <class T>
void split_qkv(const Place& at, T* q, T* k, T* v, const T* qkv, std::int64_t batch,
               std::int64_t seq, std::int64_t heads, std::int64_t head_dim);
/// join_qkv on `at`: the host kernel, or device_join_qkv on at's stream.
template <class T>
void join_qkv(const Place& at, T* qkv, const T* q, const T* k, const T* v, std::int64_t batch,
              std::int64_t seq, std::int64_t heads, std::int64_t head_dim);
/// merge_heads on `at`: the host kernel, or device_merge_heads on at's stream.
template <class T>
void merge_heads(const Place& at, T* x, const T* per_head, std::int64_t batch, std::int64_t seq,
                 std::int64_t heads, std::int64_t head_dim);
/// split_heads on `at`: the host kernel, or device_split_heads on at's stream.
template <class T>
void split_heads(const Place& at, T* per_head, const T* x, std::int64_t batch, std::int64_t seq,
                 std::int64_t heads, std::int64_t head_dim);
/// copy_values on `at`: the host kernel, or device_copy_values on at's stream.
template <class T>
void copy_values(const Place& at, T* dst, const T* src, std::int64_t n);
/// fill_values on `at`: the host kernel, or device_fill_values on at's stream.
template <class T>
void fill_values(const Place& at, T* dst, std::int64_t n, T value);

}  // namespace dtw::kernels
