#pragma once
/// @file
/// Chapter 07 — sequence parallelism: the contract the lab fills in.
///
/// Every rank holds the whole model but only T/p tokens of every sequence.
/// Everything in a block except attention works token by token, so it runs
/// on the rank's tokens alone; attention needs every key and value, and the
/// chapter gives three ways to supply them, each an `AttentionCore`
/// (dtw/model/attention_core.h) that the model calls in every block:
///   - 07.1 `GatheredAttention`: all-gather K and V, attend, reduce-scatter
///     dK and dV back: the baseline, which holds the whole sequence's K and V;
///   - 07.2 `UlyssesAttention` (DeepSpeed-Ulysses): two all-to-alls turn the
///     sequence-sharded q, k, v into head-sharded whole sequences, attention
///     runs on the local heads, and an all-to-all turns the output back;
///   - 07.3 `RingAttention`: queries stay, K/V blocks travel around the ring
///     (p−1 hops, each overlapped with the block at hand), partial results
///     are merged with their log-sum-exp (`merge_partial`);
///   - 07.4 the zig-zag split (`sequence_runs`) that balances the causal
///     ring's work, and the work table that predicts it (`causal_work`).
/// 07.1 is also the sequence-sharded model itself: who holds which tokens
/// (`sequence_runs`) and the training loop (`train_sequence_parallel`).
///
/// Layouts: q, k, v, out, dq, dk, dv are [B, H, t, D] (batch, heads, tokens,
/// head dim), row-major, as in dtw/kernels/attention.h; t is the rank's
/// tokens (T/p) on the sequence-sharded side. n = B·H·(T/p)·D is one such
/// tensor's element count on a rank; e the bytes per element.

#include <cstdint>
#include <string>
#include <vector>

#include "dtw/comm.h"
#include "dtw/errors.h"
#include "dtw/kernels/attention.h"
#include "dtw/model/attention_core.h"
#include "dtw/model/shard.h"
#include "dtw/train/strategy.h"
#include "dtw/types.h"

namespace dtw::ch07 {

using model::SequenceSplit;
using model::TokenRuns;

// ---- who holds which tokens (07.1, 07.4) -------------------------------------

/// The global positions of the tokens rank r of p holds when every sequence
/// has seq_len tokens, as runs in local order:
///   - contiguous (07.1): one run [r·T/p, (r+1)·T/p);
///   - zig-zag (07.4): the sequence cut into 2p chunks of c = T/(2p) tokens;
///     rank r holds chunk r then chunk 2p−1−r: runs [r·c, (r+1)·c) and
///     [(2p−1−r)·c, (2p−r)·c).
/// Equals model::ModelShard::sequence(r, p, split).positions(seq_len).
/// InvalidArgument naming seq_len, p and the rank when T does not divide
/// into p parts (2p chunks for zig-zag), or r is outside [0, p).
TokenRuns sequence_runs(int r, int p, SequenceSplit split, std::int64_t seq_len);

/// The causal attention work of rank r of p, in query-key pairs per
/// (sequence, head): Σ over its query positions i of the keys j ≤ i, i.e.
/// i + 1 (07.4), for the runs sequence_runs gives rank r under `split`.
/// Closed form wanted (derive it), no loop over tokens. It equals
/// visible_pairs(sequence_runs(r, ...), [0, T), true) on every split.
/// InvalidArgument as sequence_runs.
std::int64_t causal_work(int r, int p, SequenceSplit split, std::int64_t seq_len);

/// Query-key pairs that attention of queries at `q` over keys at `k` takes
/// into account: with `causal`, the pairs with key position ≤ query
/// position; without, all |q|·|k|. Given (not a lab step): what the cores
/// record as their work.
std::int64_t visible_pairs(const TokenRuns& q, const TokenRuns& k, bool causal);

// ---- the per-block math (given) -----------------------------------------------

/// Overwrites out [B, H, |q|, D] and lse [B, H, |q|] with the attention of
/// the queries q (at positions q_pos) over one block of keys and values
/// k, v [B, H, |k|, D] (at k_pos), masked by position when `causal`. A query
/// row that sees no key of the block gets out = 0 and lse = −∞. shape's
/// q_len and kv_len are ignored (the runs' sizes rule). Returns the visible
/// pairs it computed; a block with none is skipped without any arithmetic.
template <TrainElement T>
std::int64_t attend_block(T* out, T* lse, const T* q, const TokenRuns& q_pos, const T* k,
                          const T* v, const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                          bool causal);

/// The gradient contribution of one key/value block, given the *final* out
/// and lse of the queries (after every block was merged): accumulates (+=)
/// into dq (the queries') and dk, dv (the block's). Skips a block with no
/// visible pair.
template <TrainElement T>
void attend_block_backward(T* dq, T* dk, T* dv, const T* dout, const T* out, const T* lse,
                           const T* q, const TokenRuns& q_pos, const T* k, const T* v,
                           const TokenRuns& k_pos, const kernels::AttentionShape& shape,
                           bool causal);

// ---- the merge of partial results (07.3) ----------------------------------------

/// Folds a partial result (part_out, part_lse) — attention over some keys,
/// normalised over those keys only — into the running result (out, lse),
/// in place, for `rows` query rows of head_dim values each:
///   lse' = log(e^lse + e^part_lse),
///   out' = e^(lse − lse')·out + e^(part_lse − lse')·part_out.
/// Exact up to rounding in any order of blocks. A side with lse = −∞ (no
/// key seen yet) contributes nothing; both −∞ leaves the row at 0, −∞.
template <TrainElement T>
void merge_partial(T* out, T* lse, const T* part_out, const T* part_lse, std::int64_t rows,
                   std::int64_t head_dim);

// ---- the cores -------------------------------------------------------------------

/// What a sequence-parallel core did on this rank since it was made.
struct Tally {
  std::int64_t all_to_alls = 0;  ///< all-to-all calls (Ulysses)
  std::int64_t ring_hops = 0;    ///< messages sent to the next rank of the ring
  std::int64_t pairs = 0;        ///< visible query-key pairs computed, forward only
};

/// Where the cores run: the group, the whole sequence's length, the split
/// every rank uses, and whether attention is causal (the GPT's always is).
struct CoreSetup {
  Comm* comm = nullptr;       ///< the sequence-parallel group
  std::int64_t seq_len = 0;   ///< T: tokens of a whole sequence
  SequenceSplit split = SequenceSplit::kContiguous;  ///< how every rank holds its tokens
  bool causal = true;         ///< mask by position
};

/// The runs of every rank of setup.comm, from the model's shard
/// (model::ModelShard::sequence(o, p, split).positions(T), which
/// sequence_runs must equal), checking first that this rank's equal `mine`
/// (the positions the core was given): an InvalidArgument naming both when
/// they differ. Given, not a lab step; it does not call sequence_runs, so the
/// cores run on a zig-zag split before 07.4 is written.
std::vector<TokenRuns> runs_of_every_rank(const CoreSetup& setup, const TokenRuns& mine);

/// Checks a run of a sequence-parallel core before any message: T divisible
/// into p parts (2p for zig-zag) and, for Ulysses, heads divisible by p
/// (which also refuses p > heads). InvalidArgument naming the method, the
/// values and `rank` (−1: before any rank runs).
void check_setup(const char* method, std::int64_t seq_len, std::int64_t heads, int p,
                 SequenceSplit split, bool ulysses, int rank);

/// The baseline core (07.1): every rank all-gathers every rank's K and V (the
/// whole sequence's: 2·p·n elements held), attends its queries block by
/// block, merging with kernels::attention_merge; the backward gathers K and
/// V again and returns each block's dK, dV to its owner with a reduce-scatter
/// (a sum). Forward leaves the merged log-sum-exp in cache.lse [B, H, t].
/// Per layer each rank sends exactly 6(p−1)·n elements: 2(p−1)·n for
/// each of the two ring all-gathers and 2(p−1)·n for the ring reduce-scatter.
template <TrainElement T>
class GatheredAttention final : public model::AttentionCore<T> {
 public:
  /// A core on setup.comm (kept by reference).
  explicit GatheredAttention(CoreSetup setup);
  void forward(T* out, model::CoreCache<T>& cache, const T* q, const T* k, const T* v,
               const kernels::AttentionShape& shape, const TokenRuns& positions,
               int layer) override;
  void backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                const model::CoreCache<T>& cache, const T* q, const T* k, const T* v,
                const kernels::AttentionShape& shape, const TokenRuns& positions,
                int layer) override;
  std::int64_t cache_elements(const kernels::AttentionShape& shape) const override;
  /// What this core did so far.
  const Tally& tally() const { return tally_; }

 private:
  CoreSetup setup_;
  Tally tally_;
};

/// DeepSpeed-Ulysses (07.2). Forward: three all-to-alls turn q, k, v from
/// [B, H, T/p, D] (every head, this rank's tokens) into [B, H/p, T, D]
/// (heads [r·H/p, (r+1)·H/p), every token, in the order of the ranks that
/// held them), attention runs on those local heads over the whole sequence,
/// and one all-to-all turns the output back. Backward: one all-to-all brings
/// dout to the heads, three bring dq, dk, dv back to the tokens.
/// Per layer (forward + backward): 8 all-to-alls (Tally::all_to_alls),
/// each rank sending (p−1)/p·n elements in each: 8·(p−1)/p·n in all, which
/// falls as 1/p for a fixed T.
/// Precondition: H divisible by p (check_setup, which forward calls first).
/// Forward leaves in the cache what backward reads: cache.saved = [qh; kh;
/// vh; oh], the head side's q, k, v and output (n values each, in that
/// order), and cache.lse = the head side's log-sum-exp [B, H/p, T]. The
/// head side's positions are every rank's runs, rank 0's first.
template <TrainElement T>
class UlyssesAttention final : public model::AttentionCore<T> {
 public:
  /// A core on setup.comm (kept by reference).
  explicit UlyssesAttention(CoreSetup setup);
  void forward(T* out, model::CoreCache<T>& cache, const T* q, const T* k, const T* v,
               const kernels::AttentionShape& shape, const TokenRuns& positions,
               int layer) override;
  void backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                const model::CoreCache<T>& cache, const T* q, const T* k, const T* v,
                const kernels::AttentionShape& shape, const TokenRuns& positions,
                int layer) override;
  std::int64_t cache_elements(const kernels::AttentionShape& shape) const override;
  /// What this core did so far.
  const Tally& tally() const { return tally_; }

  /// The all-to-all from the sequence side to the head side: x is
  /// [B, H, t, D] on this rank (shape: H and t = shape.q_len); returns
  /// [B, H/p, p·t, D] holding heads [r·H/p, (r+1)·H/p) of every rank's
  /// tokens, rank i's tokens at [i·t, (i+1)·t). One all-to-all; each rank
  /// sends (p−1)/p of x.
  std::vector<T> to_heads(const T* x, const kernels::AttentionShape& shape);
  /// The inverse all-to-all: x_heads is [B, H/p, p·t, D] as to_heads returns
  /// it; writes this rank's tokens of every head into x [B, H, t, D].
  void to_tokens(T* x, const std::vector<T>& x_heads, const kernels::AttentionShape& shape);

 private:
  CoreSetup setup_;
  Tally tally_;
};

/// Ring attention (07.3). Forward: rank r keeps its queries; at hop s
/// (0 ≤ s < p) it holds the K/V block of rank (r − s) mod p, starts sending
/// it to rank r+1 and receiving the next from rank r−1 (non-blocking), then
/// attends its queries to the block it holds and merges the result
/// (merge_partial) while the next block travels. Backward: the same K/V
/// ring again (re-received, never reused from a hop before), and beside it
/// the block's dK, dV accumulated by every rank it visits, so each block's
/// gradient arrives at its owner after p hops.
/// Forward leaves the merged log-sum-exp of its queries in cache.lse
/// [B, H, t], which backward reads with out.
/// Per layer, for p > 1, each rank sends 2(p−1)·n elements forward (K and V,
/// p−1 hops) and 2(p−1)·n + 2p·n backward (K, V again; dK, dV, p hops), and
/// Tally::ring_hops grows by p−1 in the forward and 2p−1 in the backward.
/// At p = 1 there is no ring: no message, no hop (0 bytes, ring_hops 0).
/// Memory, as communication buffers on the ledger: two K/V blocks (4·n) in
/// the forward (allocated before the step's region); in the backward at most
/// two K/V blocks and three [dK; dV] buffers (10·n), which the step
/// allocates itself. Keeps only the lse (n/D) between the two: no T×T scores.
template <TrainElement T>
class RingAttention final : public model::AttentionCore<T> {
 public:
  /// A core on setup.comm (kept by reference).
  explicit RingAttention(CoreSetup setup);
  void forward(T* out, model::CoreCache<T>& cache, const T* q, const T* k, const T* v,
               const kernels::AttentionShape& shape, const TokenRuns& positions,
               int layer) override;
  void backward(T* dq, T* dk, T* dv, const T* dout, const T* out,
                const model::CoreCache<T>& cache, const T* q, const T* k, const T* v,
                const kernels::AttentionShape& shape, const TokenRuns& positions,
                int layer) override;
  std::int64_t cache_elements(const kernels::AttentionShape& shape) const override;
  /// What this core did so far.
  const Tally& tally() const { return tally_; }

 private:
  CoreSetup setup_;
  Tally tally_;
};

// ---- training (07.1) -------------------------------------------------------------

/// Which core a sequence-parallel run uses.
enum class Method { kGathered, kUlysses, kRing, kRingZigZag };
/// "sp-allgather", "sp-ulysses", "sp-ring", "sp-ring-zigzag".
const char* name_of(Method method);

/// Checks a sequence-parallel run of `spec` on p ranks before any rank runs
/// (rank −1) or at a rank's start: a GPT, and check_setup's conditions.
void check_sp_run(const train::RunSpec& spec, int p, Method method, int rank);

/// One step's loss and gradients of a sequence-parallel rank (07.1): the
/// forward and backward of `replica` (made for `shard`: this rank's tokens)
/// on step `step`'s batch, the loss and the gradients weighted by the rank's
/// share of the batch's tokens, then both summed over comm's ranks (chapter
/// 01's ring allreduce). Returns the batch's mean loss and leaves on every
/// rank replica.grads() = the batch's mean gradient, what a single device
/// computes on the whole batch (before clipping and the optimizer).
template <TrainElement T>
double sum_weighted_gradients(train::Replica<T>& replica, Comm& comm, std::int64_t step,
                              const model::ModelShard& shard);

/// Trains spec's GPT sequence-parallel on run.comm() (07.1): every rank holds
/// every parameter and T/p tokens of every sequence (the method's split),
/// the attention core is the method's; each step sum_weighted_gradients,
/// then clipping and the optimizer as the reference's. Records the global
/// mean loss and reports the parameters.
/// Bytes per step and rank beyond the core's: 2(p−1)/p·(Ψ + 1)·e.
template <TrainElement T>
void train_sequence_parallel(train::RankRun<T>& run, Method method);

/// The registered strategies.
template <TrainElement T>
void sp_allgather(train::RankRun<T>& run);
/// Ulysses, contiguous split.
template <TrainElement T>
void sp_ulysses(train::RankRun<T>& run);
/// Ring attention, contiguous split.
template <TrainElement T>
void sp_ring(train::RankRun<T>& run);
/// Ring attention, zig-zag split.
template <TrainElement T>
void sp_ring_zigzag(train::RankRun<T>& run);

}  // namespace dtw::ch07
