#pragma once
// What plain and blockwise attention share: argument checks and the score scale.
#include <cmath>
#include <cstdint>

#include "dtw/errors.h"
#include "dtw/kernels/attention.h"

namespace dtw::kernels::detail {

inline void check_attention_shape(const char* fn, const AttentionShape& s) {
  DTW_CHECK_ARG(s.batch >= 0 && s.heads >= 0 && s.q_len >= 0 && s.kv_len >= 0 && s.head_dim >= 0,
                fn << ": sizes must not be negative (batch " << s.batch << ", heads " << s.heads
                   << ", q_len " << s.q_len << ", kv_len " << s.kv_len << ", head_dim "
                   << s.head_dim << ")");
}

// Without offsets, query i and key i share a position only when both
// sequences are the same length; causal masking needs that.
inline void check_attention_causal(const char* fn, const AttentionShape& s, bool causal) {
  DTW_CHECK_ARG(!causal || s.q_len == s.kv_len,
                fn << ": causal attention needs q_len == kv_len, got q_len " << s.q_len
                   << " and kv_len " << s.kv_len
                   << " (attention_block_forward takes positions as offsets)");
}

// 1/√d; head_dim 0 has empty dot products, and 1 keeps the scores finite (0).
template <class T>
T score_scale(std::int64_t head_dim) {
  return head_dim > 0 ? T(1) / std::sqrt(static_cast<T>(head_dim)) : T(1);
}

}  // namespace dtw::kernels::detail
