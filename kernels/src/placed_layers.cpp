// The model's permutes and vocabulary-slice kernels on a Place (place.h), as
// placed.cpp does for the other training kernels: the host kernel, or its
// CUDA twin (cuda_permute.h, cuda_vocab_slice.h) on the Place's device and
// stream, the device call only compiled where CUDA was found (placed.h).
#include "dtw/kernels/cuda_permute.h"
#include "dtw/kernels/cuda_vocab_slice.h"
#include "dtw/kernels/permute.h"
#include "dtw/kernels/vocab_slice.h"
#include "placed.h"

namespace dtw::kernels {

using detail::on_device;

// ---- permute.h ----
template <class T>
void split_qkv(const Place& at, T* q, T* k, T* v, const T* qkv, std::int64_t batch,
               std::int64_t seq, std::int64_t heads, std::int64_t head_dim) {
  if (at.is_host()) return split_qkv(q, k, v, qkv, batch, seq, heads, head_dim);
  on_device(at, "split_qkv",
            [&](auto s) { device_split_qkv(q, k, v, qkv, batch, seq, heads, head_dim, s); });
}
template <class T>
void join_qkv(const Place& at, T* qkv, const T* q, const T* k, const T* v, std::int64_t batch,
              std::int64_t seq, std::int64_t heads, std::int64_t head_dim) {
  if (at.is_host()) return join_qkv(qkv, q, k, v, batch, seq, heads, head_dim);
  on_device(at, "join_qkv",
            [&](auto s) { device_join_qkv(qkv, q, k, v, batch, seq, heads, head_dim, s); });
}
template <class T>
void merge_heads(const Place& at, T* x, const T* per_head, std::int64_t batch, std::int64_t seq,
                 std::int64_t heads, std::int64_t head_dim) {
  if (at.is_host()) return merge_heads(x, per_head, batch, seq, heads, head_dim);
  on_device(at, "merge_heads",
            [&](auto s) { device_merge_heads(x, per_head, batch, seq, heads, head_dim, s); });
}
template <class T>
void split_heads(const Place& at, T* per_head, const T* x, std::int64_t batch, std::int64_t seq,
                 std::int64_t heads, std::int64_t head_dim) {
  if (at.is_host()) return split_heads(per_head, x, batch, seq, heads, head_dim);
  on_device(at, "split_heads",
            [&](auto s) { device_split_heads(per_head, x, batch, seq, heads, head_dim, s); });
}
template <class T>
void copy_values(const Place& at, T* dst, const T* src, std::int64_t n) {
  if (at.is_host()) return copy_values(dst, src, n);
  on_device(at, "copy_values", [&](auto s) { device_copy_values(dst, src, n, s); });
}
template <class T>
void fill_values(const Place& at, T* dst, std::int64_t n, T value) {
  if (at.is_host()) return fill_values(dst, n, value);
  on_device(at, "fill_values", [&](auto s) { device_fill_values(dst, n, value, s); });
}

// ---- vocab_slice.h ----
template <class T>
void vocab_embedding_forward(const Place& at, T* out, const std::int32_t* ids, const T* table,
                             std::int64_t n, std::int64_t dim, std::int64_t v0, std::int64_t v1) {
  if (at.is_host()) return vocab_embedding_forward(out, ids, table, n, dim, v0, v1);
  on_device(at, "vocab_embedding_forward",
            [&](auto s) { device_vocab_embedding_forward(out, ids, table, n, dim, v0, v1, s); });
}
template <class T>
void vocab_embedding_backward(const Place& at, T* dtable, const std::int32_t* ids, const T* dout,
                              std::int64_t n, std::int64_t dim, std::int64_t v0, std::int64_t v1) {
  if (at.is_host()) return vocab_embedding_backward(dtable, ids, dout, n, dim, v0, v1);
  on_device(at, "vocab_embedding_backward",
            [&](auto s) { device_vocab_embedding_backward(dtable, ids, dout, n, dim, v0, v1, s); });
}
template <class T>
void vocab_row_max(const Place& at, T* row_max, const T* logits, std::int64_t rows,
                   std::int64_t cols) {
  if (at.is_host()) return vocab_row_max(row_max, logits, rows, cols);
  on_device(at, "vocab_row_max",
            [&](auto s) { device_vocab_row_max(row_max, logits, rows, cols, s); });
}
template <class T>
void vocab_exp_sums(const Place& at, T* sums, const T* logits, const T* row_max,
                    const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                    std::int64_t v0) {
  if (at.is_host()) return vocab_exp_sums(sums, logits, row_max, targets, rows, cols, v0);
  on_device(at, "vocab_exp_sums", [&](auto s) {
    device_vocab_exp_sums(sums, logits, row_max, targets, rows, cols, v0, s);
  });
}
template <class T>
T vocab_cross_entropy(const Place& at, T* probs, T* losses, const T* logits, const T* row_max,
                      const T* sums, std::int64_t rows, std::int64_t cols) {
  if (at.is_host()) return vocab_cross_entropy(probs, losses, logits, row_max, sums, rows, cols);
  T loss{};
  on_device(at, "vocab_cross_entropy", [&](auto s) {
    loss = device_vocab_cross_entropy(probs, losses, logits, row_max, sums, rows, cols, s);
  });
  return loss;
}
template <class T>
void vocab_cross_entropy_backward(const Place& at, T* dlogits, const T* probs,
                                  const std::int32_t* targets, std::int64_t rows, std::int64_t cols,
                                  std::int64_t v0, T dloss) {
  if (at.is_host())
    return vocab_cross_entropy_backward(dlogits, probs, targets, rows, cols, v0, dloss);
  on_device(at, "vocab_cross_entropy_backward", [&](auto s) {
    device_vocab_cross_entropy_backward(dlogits, probs, targets, rows, cols, v0, dloss, s);
  });
}

#define DTW_PLACED(T)                                                                              \
  template void split_qkv(const Place&, T*, T*, T*, const T*, std::int64_t, std::int64_t,          \
                          std::int64_t, std::int64_t);                                             \
  template void join_qkv(const Place&, T*, const T*, const T*, const T*, std::int64_t,             \
                         std::int64_t, std::int64_t, std::int64_t);                                \
  template void merge_heads(const Place&, T*, const T*, std::int64_t, std::int64_t, std::int64_t,  \
                            std::int64_t);                                                         \
  template void split_heads(const Place&, T*, const T*, std::int64_t, std::int64_t, std::int64_t,  \
                            std::int64_t);                                                         \
  template void copy_values(const Place&, T*, const T*, std::int64_t);                             \
  template void fill_values(const Place&, T*, std::int64_t, T);                                    \
  template void vocab_embedding_forward(const Place&, T*, const std::int32_t*, const T*,           \
                                        std::int64_t, std::int64_t, std::int64_t, std::int64_t);   \
  template void vocab_embedding_backward(const Place&, T*, const std::int32_t*, const T*,          \
                                         std::int64_t, std::int64_t, std::int64_t, std::int64_t);  \
  template void vocab_row_max(const Place&, T*, const T*, std::int64_t, std::int64_t);             \
  template void vocab_exp_sums(const Place&, T*, const T*, const T*, const std::int32_t*,          \
                               std::int64_t, std::int64_t, std::int64_t);                          \
  template T vocab_cross_entropy(const Place&, T*, T*, const T*, const T*, const T*, std::int64_t, \
                                 std::int64_t);                                                    \
  template void vocab_cross_entropy_backward(const Place&, T*, const T*, const std::int32_t*,      \
                                             std::int64_t, std::int64_t, std::int64_t, T);

DTW_PLACED(float)
DTW_PLACED(double)
#undef DTW_PLACED

}  // namespace dtw::kernels
