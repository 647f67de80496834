// The per-block math every core of the chapter stands on (given, not a lab
// step): attention of a rank's queries over one block of keys and values, by
// global position, and its gradient. A block here is any set of runs of
// positions: a contiguous shard is one run, a zig-zag shard two, the whole
// sequence as Ulysses sees it p (or 2p) runs. Each pair of runs is one call
// of the kernel (kernels/attention.h) with the runs' first positions as
// offsets, so the causal mask compares positions, never local indices.
#include <algorithm>
#include <limits>
#include <vector>

#include "sequence_parallelism.h"

namespace dtw::ch07 {
namespace {

// Local index of each run's first token.
std::vector<std::int64_t> starts_of(const TokenRuns& pos) {
  std::vector<std::int64_t> s;
  std::int64_t t = 0;
  for (const model::IndexRange& r : pos.runs) {
    s.push_back(t);
    t += r.end - r.begin;
  }
  return s;
}

// Visible pairs between one run of queries and one run of keys.
std::int64_t run_pairs(const model::IndexRange& q, const model::IndexRange& k, bool causal) {
  if (!causal) return (q.end - q.begin) * (k.end - k.begin);
  std::int64_t n = 0;
  for (std::int64_t i = q.begin; i < q.end; ++i)
    n += std::clamp<std::int64_t>(i - k.begin + 1, 0, k.end - k.begin);
  return n;
}

}  // namespace

std::int64_t visible_pairs(const TokenRuns& q, const TokenRuns& k, bool causal) {
  std::int64_t n = 0;
  for (const auto& qr : q.runs)
    for (const auto& kr : k.runs) n += run_pairs(qr, kr, causal);
  return n;
}

template <TrainElement T>
std::int64_t attend_block(T* out, T* lse, const T* q, const TokenRuns& q_pos, const T* k,
                          const T* v, const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                          bool causal) {
  const std::int64_t Q = q_pos.size(), K = k_pos.size(), D = shape.head_dim;
  const std::int64_t BH = shape.batch * shape.heads;
  std::fill_n(out, BH * Q * D, T(0));
  std::fill_n(lse, BH * Q, -std::numeric_limits<T>::infinity());
  const std::int64_t pairs = visible_pairs(q_pos, k_pos, causal);
  if (pairs == 0) return 0;  // a block wholly in the future of every query
  const auto qs = starts_of(q_pos), ks = starts_of(k_pos);
  std::vector<T> part_out, part_lse;
  for (std::int64_t bh = 0; bh < BH; ++bh)
    for (std::size_t i = 0; i < q_pos.runs.size(); ++i) {
      const model::IndexRange& qr = q_pos.runs[i];
      const std::int64_t qn = qr.end - qr.begin, qa = bh * Q + qs[i];
      part_out.resize(static_cast<std::size_t>(qn * D));
      part_lse.resize(static_cast<std::size_t>(qn));
      for (std::size_t j = 0; j < k_pos.runs.size(); ++j) {
        const model::IndexRange& kr = k_pos.runs[j];
        if (run_pairs(qr, kr, causal) == 0) continue;
        const std::int64_t kn = kr.end - kr.begin, ka = bh * K + ks[j];
        kernels::attention_block_forward(part_out.data(), part_lse.data(), q + qa * D, k + ka * D,
                                         v + ka * D, {1, 1, qn, kn, D}, qr.begin, kr.begin, causal);
        kernels::attention_merge(out + qa * D, lse + qa, part_out.data(), part_lse.data(), qn, D);
      }
    }
  return BH * pairs;
}

template <TrainElement T>
void attend_block_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                           const T* q, const TokenRuns& q_pos, const T* k, const T* v,
                           const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                           bool causal) {
  const std::int64_t Q = q_pos.size(), K = k_pos.size(), D = shape.head_dim;
  const auto qs = starts_of(q_pos), ks = starts_of(k_pos);
  for (std::int64_t bh = 0; bh < shape.batch * shape.heads; ++bh)
    for (std::size_t i = 0; i < q_pos.runs.size(); ++i) {
      const model::IndexRange& qr = q_pos.runs[i];
      const std::int64_t qn = qr.end - qr.begin, qa = bh * Q + qs[i];
      for (std::size_t j = 0; j < k_pos.runs.size(); ++j) {
        const model::IndexRange& kr = k_pos.runs[j];
        if (run_pairs(qr, kr, causal) == 0) continue;
        const std::int64_t kn = kr.end - kr.begin, ka = bh * K + ks[j];
        kernels::attention_block_backward(dq + qa * D, dk + ka * D, dv + ka * D, dout + qa * D,
                                          out + qa * D, lse + qa, q + qa * D, k + ka * D,
                                          v + ka * D, {1, 1, qn, kn, D}, qr.begin, kr.begin,
                                          causal);
      }
    }
}

#define DTW_INSTANTIATE(T)                                                                     \
  template std::int64_t attend_block<T>(T*, T*, const T*, const TokenRuns&, const T*,          \
                                        const T*, const TokenRuns&,                            \
                                        const kernels::AttentionShape&, bool);                 \
  template void attend_block_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,   \
                                         const TokenRuns&, const T*, const T*,                 \
                                         const TokenRuns&, const kernels::AttentionShape&, bool);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch07
