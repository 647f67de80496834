#pragma once
/// @file
/// Embedding lookup: row `ids[i]` of a table becomes row i of the output.
/// Token and position embeddings are both this kernel (positions are ids
/// 0..T−1). Conventions: activations.h.

#include <cstdint>

#include "dtw/kernels/place.h"

namespace dtw::kernels {

/// `out[i][:] = table[ids[i]][:]` for n ids, rows of length dim, table of
/// `table_rows` rows. An id outside [0, table_rows) raises InvalidArgument
/// naming the index, the id and table_rows. With `accumulate`, adds instead of
/// overwriting (token + position embedding in two calls).
template <class T>
void embedding_forward(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                       std::int64_t dim, std::int64_t table_rows, bool accumulate = false);
/// embedding_forward as plain loops: the reference the kernel is tested against.
template <class T>
void embedding_forward_reference(T* out, const std::int32_t* ids, const T* table, std::int64_t n,
                                 std::int64_t dim, std::int64_t table_rows,
                                 bool accumulate = false);

/// `dtable[ids[i]][:] += dout[i][:]` (accumulates; repeated ids sum).
template <class T>
void embedding_backward(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                        std::int64_t dim, std::int64_t table_rows);
/// embedding_backward as plain loops: the reference the kernel is tested against.
template <class T>
void embedding_backward_reference(T* dtable, const std::int32_t* ids, const T* dout, std::int64_t n,
                                  std::int64_t dim, std::int64_t table_rows);

// ---- the same kernels on a Place (place.h): the host kernel above, or its
// CUDA twin (cuda_embedding.h) on the Place's device and stream ----

/// embedding_forward on `at`: the host kernel, or device_embedding_forward on at's stream.
template <class T>
void embedding_forward(const Place& at, T* out, const std::int32_t* ids, const T* table,
                       std::int64_t n, std::int64_t dim, std::int64_t table_rows,
                       bool accumulate = false);

/// embedding_backward on `at`: the host kernel, or device_embedding_backward on at's stream.
template <class T>
void embedding_backward(const Place& at, T* dtable, const std::int32_t* ids, const T* dout,
                        std::int64_t n, std::int64_t dim, std::int64_t table_rows);

}  // namespace dtw::kernels
