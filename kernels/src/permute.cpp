// The head permutes, a copy and a fill as Kokkos kernels, next to the plain
// loops they must match. They only move numbers, so any order gives the same
// bits: the kernels take one Kokkos index per row of the [batch·seq, width]
// side and move its heads' runs; the references walk single elements.
#include "dtw/kernels/permute.h"

#include <algorithm>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"
#include "layout_checks.h"

namespace dtw::kernels {
namespace {

using detail::check_dims;
using detail::check_count;

using detail::host_range;

// Offset of [b, h, t, 0] in the per-head layout, and of row b·seq + t, head h
// in the [rows, width] layout (width = heads·head_dim, or 3× that for qkv).
struct Layout {
  std::int64_t seq, heads, head_dim;
  std::int64_t per_head(std::int64_t b, std::int64_t h, std::int64_t t) const {
    return ((b * heads + h) * seq + t) * head_dim;
  }
};

// Calls move(row, per_head_offset, column) for every (row, head) pair, one
// Kokkos index per row of the [batch·seq, width] side.
template <class Move>
void for_each_run(const char* name, std::int64_t batch, const Layout& l, Move move) {
  if (batch * l.seq * l.heads * l.head_dim == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for(name, host_range(0, batch * l.seq), [=](std::int64_t row) {
    const std::int64_t b = row / l.seq, t = row - b * l.seq;
    for (std::int64_t h = 0; h < l.heads; ++h) move(row, l.per_head(b, h, t), h * l.head_dim);
  });
}

}  // namespace

template <class T>
void split_qkv(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
               std::int64_t heads, std::int64_t head_dim) {
  check_dims("split_qkv", batch, seq, heads, head_dim);
  const std::int64_t W = heads * head_dim, D = head_dim;
  for_each_run("dtw::split_qkv", batch, {seq, heads, head_dim},
               [=](std::int64_t row, std::int64_t dst, std::int64_t col) {
                 const T* src = qkv + row * 3 * W + col;
                 std::copy_n(src, D, q + dst);
                 std::copy_n(src + W, D, k + dst);
                 std::copy_n(src + 2 * W, D, v + dst);
               });
}

template <class T>
void join_qkv(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch, std::int64_t seq,
              std::int64_t heads, std::int64_t head_dim) {
  check_dims("join_qkv", batch, seq, heads, head_dim);
  const std::int64_t W = heads * head_dim, D = head_dim;
  for_each_run("dtw::join_qkv", batch, {seq, heads, head_dim},
               [=](std::int64_t row, std::int64_t src, std::int64_t col) {
                 T* dst = qkv + row * 3 * W + col;
                 std::copy_n(q + src, D, dst);
                 std::copy_n(k + src, D, dst + W);
                 std::copy_n(v + src, D, dst + 2 * W);
               });
}

template <class T>
void merge_heads(T* x, const T* per_head, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim) {
  check_dims("merge_heads", batch, seq, heads, head_dim);
  const std::int64_t W = heads * head_dim, D = head_dim;
  for_each_run("dtw::merge_heads", batch, {seq, heads, head_dim},
               [=](std::int64_t row, std::int64_t src, std::int64_t col) {
                 std::copy_n(per_head + src, D, x + row * W + col);
               });
}

template <class T>
void split_heads(T* per_head, const T* x, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                 std::int64_t head_dim) {
  check_dims("split_heads", batch, seq, heads, head_dim);
  const std::int64_t W = heads * head_dim, D = head_dim;
  for_each_run("dtw::split_heads", batch, {seq, heads, head_dim},
               [=](std::int64_t row, std::int64_t dst, std::int64_t col) {
                 std::copy_n(x + row * W + col, D, per_head + dst);
               });
}

// The references: one element at a time, indexed from scratch.
template <class T>
void split_qkv_reference(T* q, T* k, T* v, const T* qkv, std::int64_t batch, std::int64_t seq,
                         std::int64_t heads, std::int64_t head_dim) {
  check_dims("split_qkv_reference", batch, seq, heads, head_dim);
  const std::int64_t W = heads * head_dim;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < seq; ++t)
        for (std::int64_t d = 0; d < head_dim; ++d) {
          const std::int64_t i = ((b * heads + h) * seq + t) * head_dim + d;
          const std::int64_t j = (b * seq + t) * 3 * W + h * head_dim + d;
          q[i] = qkv[j];
          k[i] = qkv[j + W];
          v[i] = qkv[j + 2 * W];
        }
}

template <class T>
void join_qkv_reference(T* qkv, const T* q, const T* k, const T* v, std::int64_t batch,
                        std::int64_t seq, std::int64_t heads, std::int64_t head_dim) {
  check_dims("join_qkv_reference", batch, seq, heads, head_dim);
  const std::int64_t W = heads * head_dim;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < seq; ++t)
        for (std::int64_t d = 0; d < head_dim; ++d) {
          const std::int64_t i = ((b * heads + h) * seq + t) * head_dim + d;
          const std::int64_t j = (b * seq + t) * 3 * W + h * head_dim + d;
          qkv[j] = q[i];
          qkv[j + W] = k[i];
          qkv[j + 2 * W] = v[i];
        }
}

template <class T>
void merge_heads_reference(T* x, const T* per_head, std::int64_t batch, std::int64_t seq,
                           std::int64_t heads, std::int64_t head_dim) {
  check_dims("merge_heads_reference", batch, seq, heads, head_dim);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < seq; ++t)
        for (std::int64_t d = 0; d < head_dim; ++d)
          x[((b * seq + t) * heads + h) * head_dim + d] =
              per_head[((b * heads + h) * seq + t) * head_dim + d];
}

template <class T>
void split_heads_reference(T* per_head, const T* x, std::int64_t batch, std::int64_t seq,
                           std::int64_t heads, std::int64_t head_dim) {
  check_dims("split_heads_reference", batch, seq, heads, head_dim);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t t = 0; t < seq; ++t)
        for (std::int64_t d = 0; d < head_dim; ++d)
          per_head[((b * heads + h) * seq + t) * head_dim + d] =
              x[((b * seq + t) * heads + h) * head_dim + d];
}

template <class T>
void copy_values(T* dst, const T* src, std::int64_t n) {
  check_count("copy_values", n);
  if (n > 0 && dst != src) std::copy_n(src, n, dst);
}

template <class T>
void copy_values_reference(T* dst, const T* src, std::int64_t n) {
  check_count("copy_values_reference", n);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

template <class T>
void fill_values(T* dst, std::int64_t n, T value) {
  check_count("fill_values", n);
  if (n > 0) std::fill_n(dst, n, value);
}

template <class T>
void fill_values_reference(T* dst, std::int64_t n, T value) {
  check_count("fill_values_reference", n);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = value;
}

#define DTW_INSTANTIATE(T)                                                                       \
  template void split_qkv<T>(T*, T*, T*, const T*, std::int64_t, std::int64_t, std::int64_t,     \
                             std::int64_t);                                                      \
  template void split_qkv_reference<T>(T*, T*, T*, const T*, std::int64_t, std::int64_t,         \
                                       std::int64_t, std::int64_t);                              \
  template void join_qkv<T>(T*, const T*, const T*, const T*, std::int64_t, std::int64_t,        \
                            std::int64_t, std::int64_t);                                         \
  template void join_qkv_reference<T>(T*, const T*, const T*, const T*, std::int64_t,            \
                                      std::int64_t, std::int64_t, std::int64_t);                 \
  template void merge_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,           \
                               std::int64_t);                                                    \
  template void merge_heads_reference<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t, \
                                         std::int64_t);                                          \
  template void split_heads<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t,           \
                               std::int64_t);                                                    \
  template void split_heads_reference<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t, \
                                         std::int64_t);                                          \
  template void copy_values<T>(T*, const T*, std::int64_t);                                      \
  template void copy_values_reference<T>(T*, const T*, std::int64_t);                            \
  template void fill_values<T>(T*, std::int64_t, T);                                             \
  template void fill_values_reference<T>(T*, std::int64_t, T);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
