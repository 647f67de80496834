// The attention cores (attention_core.h): plain, and blockwise over runs of
// positions with the log-sum-exp merge.
#include "dtw/model/attention_core.h"

#include <algorithm>
#include <limits>

#include "dtw/errors.h"
#include "dtw/kernels/permute.h"

namespace dtw::model {
namespace {

// Local index of the first token of each run.
std::vector<std::int64_t> run_starts(const TokenRuns& pos) {
  std::vector<std::int64_t> starts;
  std::int64_t t = 0;
  for (const IndexRange& r : pos.runs) {
    starts.push_back(t);
    t += r.end - r.begin;
  }
  return starts;
}

void check_whole(const char* who, const TokenRuns& positions, const kernels::AttentionShape& s) {
  DTW_CHECK_ARG(positions.whole() && positions.size() == s.q_len && s.q_len == s.kv_len,
                who << ": plain attention needs the whole sequence of " << s.q_len
                    << " tokens at positions [0, " << s.q_len
                    << "); this rank holds a shard (use BlockwiseAttention or a sequence-parallel "
                       "core)");
}

}  // namespace

template <TrainElement T>
void PlainAttention<T>::forward(T* out, CoreCache<T>& cache, const T* q, const T* k, const T* v,
                                const kernels::AttentionShape& shape, const TokenRuns& positions,
                                int /*layer*/) {
  check_whole("PlainAttention", positions, shape);
  cache.probs.set_place(this->place());
  cache.probs.resize(static_cast<std::size_t>(cache_elements(shape)));
  kernels::attention_forward(this->place(), out, cache.probs.data(), q, k, v, shape, true);
}

template <TrainElement T>
void PlainAttention<T>::backward(T* dq, T* dk, T* dv, const T* dout, const T* /*out*/,
                                 const CoreCache<T>& cache, const T* q, const T* k, const T* v,
                                 const kernels::AttentionShape& shape, const TokenRuns& positions,
                                 int /*layer*/) {
  check_whole("PlainAttention", positions, shape);
  kernels::attention_backward(this->place(), dq, dk, dv, dout, cache.probs.data(), q, k, v, shape);
}

template <TrainElement T>
std::int64_t PlainAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return s.batch * s.heads * s.q_len * s.kv_len;
}

template <TrainElement T>
void attend_runs_forward(T* out, T* lse, const T* q, const TokenRuns& q_pos, const T* k, const T* v,
                         const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                         const kernels::Place& at) {
  const std::int64_t Q = q_pos.size(), K = k_pos.size(), D = shape.head_dim;
  const std::vector<std::int64_t> qs = run_starts(q_pos), ks = run_starts(k_pos);
  kernels::Vector<T> part_out(at), part_lse(at);
  // Every (sequence, head) pair and every pair of runs is one kernel block:
  // the runs are contiguous in position, so the kernel's offsets mask them.
  for (std::int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    for (std::size_t i = 0; i < q_pos.runs.size(); ++i) {
      const std::int64_t qn = q_pos.runs[i].end - q_pos.runs[i].begin;
      T* o = out + (bh * Q + qs[i]) * D;
      T* l = lse + bh * Q + qs[i];
      part_out.resize(static_cast<std::size_t>(qn * D));
      part_lse.resize(static_cast<std::size_t>(qn));
      for (std::size_t j = 0; j < k_pos.runs.size(); ++j) {
        const std::int64_t kn = k_pos.runs[j].end - k_pos.runs[j].begin;
        kernels::attention_block_forward(at, part_out.data(), part_lse.data(),
                                         q + (bh * Q + qs[i]) * D, k + (bh * K + ks[j]) * D,
                                         v + (bh * K + ks[j]) * D, {1, 1, qn, kn, D},
                                         q_pos.runs[i].begin, k_pos.runs[j].begin, true);
        kernels::attention_merge(at, o, l, static_cast<const T*>(part_out.data()),
                                 static_cast<const T*>(part_lse.data()), qn, D);
      }
    }
  }
}

template <TrainElement T>
void attend_runs_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                          const T* q, const TokenRuns& q_pos, const T* k, const T* v,
                          const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                          const kernels::Place& at) {
  const std::int64_t Q = q_pos.size(), K = k_pos.size(), D = shape.head_dim;
  const std::vector<std::int64_t> qs = run_starts(q_pos), ks = run_starts(k_pos);
  for (std::int64_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    for (std::size_t i = 0; i < q_pos.runs.size(); ++i) {
      const std::int64_t qn = q_pos.runs[i].end - q_pos.runs[i].begin, qa = (bh * Q + qs[i]) * D;
      for (std::size_t j = 0; j < k_pos.runs.size(); ++j) {
        const std::int64_t kn = k_pos.runs[j].end - k_pos.runs[j].begin, ka = (bh * K + ks[j]) * D;
        kernels::attention_block_backward(
            at, dq + qa, dk + ka, dv + ka, dout + qa, out + qa, lse + bh * Q + qs[i], q + qa,
            k + ka, v + ka, {1, 1, qn, kn, D}, q_pos.runs[i].begin, k_pos.runs[j].begin, true);
      }
    }
  }
}

template <TrainElement T>
void BlockwiseAttention<T>::forward(T* out, CoreCache<T>& cache, const T* q, const T* k,
                                    const T* v, const kernels::AttentionShape& shape,
                                    const TokenRuns& positions, int /*layer*/) {
  DTW_CHECK_ARG(positions.size() == shape.q_len && shape.q_len == shape.kv_len,
                "BlockwiseAttention: " << shape.q_len << " queries and " << shape.kv_len
                                       << " keys but " << positions.size() << " positions");
  const std::int64_t rows = shape.batch * shape.heads * shape.q_len;
  // The merge starts from out = 0, lse = −∞ (no keys seen yet).
  kernels::fill_values(this->place(), out, rows * shape.head_dim, T(0));
  cache.lse.set_place(this->place());
  cache.lse.resize(static_cast<std::size_t>(rows));
  kernels::fill_values(this->place(), cache.lse.data(), rows, -std::numeric_limits<T>::infinity());
  attend_runs_forward(out, cache.lse.data(), q, positions, k, v, positions, shape, this->place());
}

template <TrainElement T>
void BlockwiseAttention<T>::backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                                     const CoreCache<T>& cache, const T* q, const T* k,
                                     const T* v, const kernels::AttentionShape& shape,
                                     const TokenRuns& positions, int /*layer*/) {
  const std::int64_t n = shape.batch * shape.heads * shape.q_len * shape.head_dim;
  // attend_runs_backward accumulates: start from 0.
  kernels::fill_values(this->place(), dq, n, T(0));
  kernels::fill_values(this->place(), dk, n, T(0));
  kernels::fill_values(this->place(), dv, n, T(0));
  attend_runs_backward(dq, dk, dv, dout, out, cache.lse.data(), q, positions, k, v, positions,
                       shape, this->place());
}

template <TrainElement T>
std::int64_t BlockwiseAttention<T>::cache_elements(const kernels::AttentionShape& s) const {
  return s.batch * s.heads * s.q_len;
}

#define DTW_INSTANTIATE(T)                                                                      \
  template class PlainAttention<T>;                                                             \
  template class BlockwiseAttention<T>;                                                         \
  template void attend_runs_forward<T>(T*, T*, const T*, const TokenRuns&, const T*, const T*,  \
                                       const TokenRuns&, const kernels::AttentionShape&,        \
                                       const kernels::Place&);                                  \
  template void attend_runs_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,     \
                                        const TokenRuns&, const T*, const T*, const TokenRuns&, \
                                        const kernels::AttentionShape&, const kernels::Place&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::model
