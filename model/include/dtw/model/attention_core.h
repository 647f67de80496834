#pragma once
/// @file
/// The attention core: softmax(q kᵀ/√D + causal mask) v on a rank's tokens,
/// the part of a block that needs other tokens than its own. Sequence
/// parallelism (chapter 07) plugs in here: Ulysses wraps a core in two
/// all-to-alls (sequence-sharded → head-sharded and back), ring attention
/// replaces it with one that passes key/value blocks around the ring and
/// merges the partial results with their log-sum-exp.
///
/// Layout: q, k, v and the output are [batch, heads, tokens, head_dim] (the
/// kernels' layout, attention.h); `positions` gives the global position of
/// each local token (shard.h: contiguous or zig-zag runs), so the causal mask
/// compares positions, never local indices.
///
/// Two cores ship: PlainAttention (the probabilities materialised; the whole
/// sequence only) and BlockwiseAttention (one block of keys at a time with the
/// log-sum-exp merge; any runs). Both equal full causal attention up to
/// rounding; attend_runs_forward/backward are the building block a ring
/// attention core calls once per hop with the block that arrived.

#include <cstdint>
#include <vector>

#include "dtw/kernels/attention.h"
#include "dtw/kernels/place.h"
#include "dtw/kernels/vector.h"
#include "dtw/model/shard.h"
#include "dtw/types.h"

namespace dtw::model {

/// What a core keeps between forward and backward (a core uses what it needs).
template <class T>
struct CoreCache {
  kernels::Vector<T> probs;  ///< PlainAttention: [batch, heads, tokens, tokens]
  kernels::Vector<T> lse;    ///< blockwise cores: log-sum-exp per query row [batch, heads, tokens]
  kernels::Vector<T> saved;  ///< free for a core's own use (e.g. exchanged heads)
};

/// The attention core interface (see the file comment).
template <class T>
class AttentionCore {
 public:
  virtual ~AttentionCore() = default;
  /// Overwrites out (shaped like q) with causal attention of this rank's
  /// queries over the keys and values; keeps what backward needs in cache.
  /// `shape.q_len == shape.kv_len ==` positions.size(); `layer` is the block.
  virtual void forward(T* out, CoreCache<T>& cache, const T* q, const T* k, const T* v,
                       const kernels::AttentionShape& shape, const TokenRuns& positions,
                       int layer) = 0;
  /// Overwrites dq, dk, dv from dout, given the forward's out and cache.
  virtual void backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                        const CoreCache<T>& cache, const T* q, const T* k, const T* v,
                        const kernels::AttentionShape& shape, const TokenRuns& positions,
                        int layer) = 0;
  /// Elements the cache holds after forward (for the memory ledger).
  virtual std::int64_t cache_elements(const kernels::AttentionShape& shape) const = 0;

  /// Where this core runs its kernels: the Place of the q, k, v and outputs
  /// it is given (the host by default). Set by whoever owns the core, before
  /// the passes; the sublayers check it is theirs (gpt_layers.h). A core
  /// shared by rank threads on different Places cannot serve them all: the
  /// shared identity_seams() keep theirs on the host, and a Gpt on a device
  /// uses an identity core of its own (Gpt::set_place).
  void set_place(const kernels::Place& at) { place_ = at; }
  /// The Place set by set_place.
  const kernels::Place& place() const { return place_; }

 private:
  kernels::Place place_ = kernels::Place::host();
};

/// Plain causal attention (kernels::attention_forward): the probabilities are
/// kept for the backward. Needs the whole sequence (positions [0, T)):
/// InvalidArgument naming the runs otherwise.
template <TrainElement T>
class PlainAttention final : public AttentionCore<T> {
 public:
  void forward(T* out, CoreCache<T>& cache, const T* q, const T* k, const T* v,
               const kernels::AttentionShape& shape, const TokenRuns& positions,
               int layer) override;
  void backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const CoreCache<T>& cache,
                const T* q, const T* k, const T* v, const kernels::AttentionShape& shape,
                const TokenRuns& positions, int layer) override;
  std::int64_t cache_elements(const kernels::AttentionShape& shape) const override;
};

/// Causal attention over this rank's own keys, one run of keys at a time,
/// merged with the log-sum-exp (keeps lse, not the probabilities). On the
/// whole sequence it equals PlainAttention; on a shard it is the first hop of
/// ring attention (the rank's own block).
template <TrainElement T>
class BlockwiseAttention final : public AttentionCore<T> {
 public:
  void forward(T* out, CoreCache<T>& cache, const T* q, const T* k, const T* v,
               const kernels::AttentionShape& shape, const TokenRuns& positions,
               int layer) override;
  void backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const CoreCache<T>& cache,
                const T* q, const T* k, const T* v, const kernels::AttentionShape& shape,
                const TokenRuns& positions, int layer) override;
  std::int64_t cache_elements(const kernels::AttentionShape& shape) const override;
};

/// Merges into (out, lse) the attention of queries q (at q_pos) over one block
/// of keys and values k, v (at k_pos), causally by position: the ring
/// attention hop. out, q are [batch, heads, q_pos.size(), D], lse [batch,
/// heads, q_pos.size()] (start from out = 0, lse = −∞), k, v [batch, heads,
/// k_pos.size(), D]; shape's q_len/kv_len are ignored (the runs' sizes rule).
/// The kernels run on `at`, and so does the scratch that holds each block's
/// partial result before the merge (kernels::Vector).
template <TrainElement T>
void attend_runs_forward(T* out, T* lse, const T* q, const TokenRuns& q_pos, const T* k, const T* v,
                         const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                         const kernels::Place& at = kernels::Place::host());

/// The gradient contribution of one key block, given the final out and lse of
/// every query row (after all blocks merged): accumulates (+=) into dq (the
/// queries') and dk, dv (the block's); the kernels run on `at`.
template <TrainElement T>
void attend_runs_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                          const T* q, const TokenRuns& q_pos, const T* k, const T* v,
                          const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                          const kernels::Place& at = kernels::Place::host());

}  // namespace dtw::model
