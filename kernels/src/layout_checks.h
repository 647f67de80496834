#pragma once
// The argument checks the permute and vocabulary-slice kernels share with their
// CUDA twins (permute.cpp, vocab_slice.cpp and cuda/*.cu), so the host and the
// device refuse the same sizes with the same words. Each raises InvalidArgument
// naming `kernel` and the values; callers check before any kernel runs.
#include <cstdint>

#include "dtw/errors.h"

namespace dtw::kernels::detail {

/// batch, seq, heads and head_dim of a head permute, none negative.
inline void check_dims(const char* kernel, std::int64_t batch, std::int64_t seq,
                       std::int64_t heads, std::int64_t head_dim) {
  DTW_CHECK_ARG(batch >= 0 && seq >= 0 && heads >= 0 && head_dim >= 0,
                kernel << ": sizes must not be negative (batch " << batch << ", seq " << seq
                       << ", heads " << heads << ", head_dim " << head_dim << ")");
}

/// An element count, not negative.
inline void check_count(const char* kernel, std::int64_t n) {
  DTW_CHECK_ARG(n >= 0, kernel << ": count " << n << " is negative");
}

/// n lookups of dim values into the slice [v0, v1) of a vocabulary.
inline void check_lookup(const char* kernel, std::int64_t n, std::int64_t dim, std::int64_t v0,
                         std::int64_t v1) {
  DTW_CHECK_ARG(n >= 0 && dim >= 0 && v0 >= 0 && v1 >= v0,
                kernel << ": sizes must not be negative and the slice [" << v0 << ", " << v1
                       << ") not reversed (n " << n << ", dim " << dim << ")");
}

/// rows × cols logits of a slice: rows not negative, at least one column.
inline void check_rows(const char* kernel, std::int64_t rows, std::int64_t cols) {
  DTW_CHECK_ARG(rows >= 0 && cols >= 1, kernel << ": rows " << rows << " must not be negative and "
                                               << "cols " << cols << " must be at least 1");
}

}  // namespace dtw::kernels::detail
