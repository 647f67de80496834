#pragma once
/// @file
/// Chapter 02 — data parallelism: the contract the lab fills in.
///
/// Four strategies train the model of `model/` on p ranks, each rank on its
/// shard of every batch, and must reproduce the single-device reference
/// (`train_reference`) to 1e-9 in double:
///   - 02.1 `dp_server`: a central model server (rank 0) sums the gradients,
///     steps and sends the new parameters back ("data parallelism 1.0");
///   - 02.2 `dp_allreduce`: every rank keeps a replica and its optimizer and
///     sums the gradients with chapter 01's ring allreduce ("1.1"), starting
///     from rank 0's parameters and checking that the replicas stay equal;
///   - 02.3 `ddp_bucketed`: the allreduce cut into buckets, each started the
///     moment backward has finished its gradients (PyTorch's DDP);
///   - 02.4 `ddp_accumulate`: m micro-batches per step, communicating only
///     during the last one's backward (DDP's `no_sync`);
///   - 02.5 `shard_weight`: batches that do not divide by p, weighted by rows.
///
/// Every strategy is a rank function of the training layer
/// (`dtw/train/strategy.h`): all ranks call it together; it records each
/// step's global mean loss and reports its parameters, which the harness
/// compares with the reference. Strategy parameters come from the knobs
/// (`dtw train --set bucket_kib=256`), read by `ddp_options`.
///
/// Ψ below is the number of parameters, e the bytes per value, p the ranks.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dtw/comm.h"
#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "dtw/model/units.h"
#include "dtw/train/replica.h"
#include "dtw/train/strategy.h"
#include "dtw/types.h"
#include "nonblocking.h"  // chapter 01's iallreduce (solution library)

namespace dtw::ch02 {

// ---- the strategies' parameters --------------------------------------------------

/// The knobs of this chapter's strategies, read and checked once per rank.
struct DdpOptions {
  /// Largest bucket in bytes (knob `bucket_kib`, in KiB; default
  /// `default_bucket_kib`). A tensor larger than the cap gets a bucket of its own.
  std::int64_t bucket_bytes = 0;
  /// Micro-batches per step of ddp_accumulate (knob `micro_batches`, default 4).
  std::int64_t micro_batches = 4;
  /// Compare the replicas' fingerprints after every `check_every`-th step and
  /// after the last (knob `check_every`, default 1); 0: only at the start.
  std::int64_t check_every = 1;
};

/// The default bucket cap in KiB for `spec`'s model in `spec.dtype`: a
/// quarter of its gradients, 256·⌊Ψ/1024⌋ values (at least 256), so
/// ⌊Ψ/1024⌋ KiB in float and twice that in double. The cap holds the same
/// number of values in both precisions, so a float and a double run cut the
/// same buckets. See the chapter text ("How big a bucket?") for why it is
/// scaled to the model.
std::int64_t default_bucket_kib(const train::RunSpec& spec);

/// Reads the knobs. Throws InvalidArgument naming the rank, the knob and its
/// value for a bucket cap ≤ 0, micro-batches < 1 or a negative check interval
/// (rank −1, a check before any rank runs: the message names no rank).
DdpOptions ddp_options(const train::Knobs& knobs, const train::RunSpec& spec, int rank);

/// The knobs a strategy of this chapter declares (train::Strategy::knobs):
/// `check_every` for all three that keep replicas; `bucket_kib` with
/// `buckets` (ddp_bucketed, ddp_accumulate); `micro_batches` with
/// `accumulate` (ddp_accumulate). Their values are read and checked by
/// ddp_options.
std::vector<train::Knob> ddp_knobs(bool buckets, bool accumulate);

/// What dp_allreduce, ddp_bucketed and ddp_accumulate check first, on every
/// rank and before any message, and what their registrations check before
/// any rank runs (train::Strategy::check, rank −1): the knobs (ddp_options),
/// and a global batch with a row for each of the `ranks` shards, or (with
/// `accumulate`) for each of ranks × micro_batches (micro_batch_shards's rule).
DdpOptions check_ddp_run(const train::Knobs& knobs, const train::RunSpec& spec, int ranks,
                         int rank, bool accumulate);

// ---- 02.5: shards of a batch that does not divide ------------------------------------

/// The weight of data shard `shard` of `shards` in the global mean: its rows
/// over the batch (train::shard_rows). It is 1/shards when the batch
/// divides; otherwise the first batch % shards shards hold one row more and
/// weigh more. A rank scales its loss and its gradient by it, so the sum
/// over the ranks is exactly the gradient of the mean over the whole batch.
/// Throws InvalidArgument when there are more shards than rows.
double shard_weight(const train::RunSpec& spec, std::int64_t shard, std::int64_t shards);

// ---- 02.2: replicas that agree ------------------------------------------------------

/// The replicas of a data-parallel run no longer hold the same parameters
/// (or never did). The message names the first rank and tensor that differ.
class ReplicasDiverged : public Error {
 public:
  using Error::Error;
  const char* kind() const override { return "ReplicasDiverged"; }
};

/// One 64-bit hash per tensor of `layout` (in layout order) of the bits of
/// `params` (the whole flat buffer): equal replicas have equal fingerprints,
/// and a single changed bit changes its tensor's.
template <TrainElement T>
std::vector<std::uint64_t> fingerprint(const model::ParamLayout& layout, std::span<const T> params);

/// Collective: every rank shares its fingerprint of `params`; if a rank's
/// differs from rank 0's, every rank throws ReplicasDiverged naming the
/// lowest such rank, its first differing tensor in layout order, the step
/// (`steps_done` steps trained; 0: at the start) and both hashes, in this
/// form (the tests look for it): `rank 1's wte differs from rank 0's
/// (fingerprint 0x… vs 0x…)` — hex() in replicas.cpp writes one. The hashes
/// travel on the runtime's own channel (dtw::allgather_results), so the
/// traffic matrix shows only the training's bytes.
template <TrainElement T>
void check_replicas(Comm& comm, const model::ParamLayout& layout, std::span<const T> params,
                    std::int64_t steps_done);

/// Collective, before any training message: every rank shares
/// `spec.describe()`; ranks that would train a different model or run (a
/// different model, seed, batch, optimizer, ...) make every rank throw
/// InvalidArgument naming the first such rank, rank 0 and the first field
/// that differs. (PyTorch's DDP checks the parameter shapes the same way
/// when it is constructed.)
void check_same_run(Comm& comm, const train::RunSpec& spec);

/// Step 02.2's start of every replicated strategy: rank 0's parameters are
/// broadcast to every rank (chapter 01's binomial broadcast), then the
/// replicas are checked (check_replicas at step 0).
template <TrainElement T>
void broadcast_parameters(Comm& comm, train::Replica<T>& replica);

// ---- 02.3: gradient buckets -------------------------------------------------------

/// Groups the tensors of `layout` into buckets in the order backward
/// finishes their gradients: from the last tensor of the flat buffer to the
/// first. A bucket takes tensors while it stays within `cap_bytes` (at
/// `element_bytes` per value); a tensor larger than the cap is a bucket of
/// its own. So every bucket is a contiguous range, the buckets cover
/// [0, layout.size()) exactly once, and bucket i + 1 ends where bucket i
/// begins. Throws InvalidArgument for cap_bytes or element_bytes ≤ 0.
std::vector<train::Range> make_buckets(const model::ParamLayout& layout, std::int64_t cap_bytes,
                                       std::int64_t element_bytes);

/// Sums gradients over the ranks bucket by bucket while backward runs. Give
/// hook() to Replica::forward_backward: each range it reports is marked in
/// its buckets, and every bucket that became complete gets its allreduce
/// started with chapter 01's non-blocking `iallreduce` (in bucket order on
/// every rank, as collectives must be); every call of the hook also advances
/// the allreduces in flight, so they progress between the layers of
/// backward. finish() waits for all of them. After finish(), every rank's
/// gradients of every bucket hold the sum over the ranks. Until then a
/// started bucket's gradients must not be touched, so call finish() after
/// every backward that had the hook, before another backward adds into the
/// gradients (PyTorch's reducer finalizes at the end of such a backward).
/// Ranges must be reported at most once per pass.
template <TrainElement T>
class BucketReducer {
 public:
  /// Buckets from make_buckets over `replica`'s gradients (whole model).
  BucketReducer(Comm& comm, train::Replica<T>& replica, std::vector<train::Range> buckets);
  /// The gradient-ready hook for forward_backward (valid while this lives).
  model::GradReady hook();
  /// Marks [begin, end) final; starts the allreduce of every bucket, in
  /// order, whose gradients are now all final, and advances those in flight.
  void ready(std::int64_t begin, std::int64_t end);
  /// Waits for every bucket's allreduce; afterwards gradients are summed and
  /// the reducer is ready for the next pass. InvalidArgument (naming the
  /// rank and the bucket) if a bucket never became complete: "rank R: bucket B
  /// [begin, end) still misses N gradient elements ...".
  void finish();
  /// The buckets, in ready order.
  const std::vector<train::Range>& buckets() const { return buckets_; }

 private:
  Comm& comm_;
  train::Replica<T>& replica_;
  std::vector<train::Range> buckets_;
  std::vector<std::int64_t> missing_;  // elements of each bucket not final yet
  std::size_t next_ = 0;               // the next bucket to start
  std::vector<ch01::PendingCollective> inflight_;  // started allreduces, bucket order
};

// ---- 02.4: micro-batches ----------------------------------------------------------

/// The data shards rank `rank` of `ranks` trains on, one per micro-batch,
/// when every step's batch is cut into ranks × micro_batches shards: shard
/// indices of make_batch(spec, step, shard, ranks · micro_batches), in order.
/// Throws InvalidArgument (naming the values) when the batch has fewer rows
/// than ranks × micro_batches.
std::vector<std::int64_t> micro_batch_shards(const train::RunSpec& spec, int rank, int ranks,
                                             std::int64_t micro_batches);

// ---- the strategies (one file each) -----------------------------------------------

/// 02.1 DP 1.0. Rank 0 is the server and also a worker: it holds the model
/// and the optimizer; the other ranks hold parameters and gradients only.
/// Per step each worker sends its weighted gradient (and loss) to the
/// server, which sums them, clips, steps and sends the parameters back.
/// Bytes per step on the server's link: (p−1)·Ψ·e in and (p−1)·Ψ·e out.
template <TrainElement T>
void dp_server(train::RankRun<T>& run);

/// 02.2 DP 1.1. Every rank holds a replica and its optimizer, starts from
/// rank 0's parameters (broadcast_parameters), sums the weighted gradients
/// and the loss with chapter 01's ring allreduce and steps; the replicas
/// are compared every `check_every` steps. Bytes per step on every rank:
/// 2(p−1)/p·Ψ·e sent and received.
template <TrainElement T>
void dp_allreduce(train::RankRun<T>& run);

/// 02.3 DDP: dp_allreduce with the allreduce cut into buckets of at most
/// `bucket_kib`, each started during backward the moment its gradients are
/// final. The same bytes as dp_allreduce (per bucket, chunk rounding aside).
template <TrainElement T>
void ddp_bucketed(train::RankRun<T>& run);

/// 02.4 DDP with gradient accumulation: `micro_batches` forward-backward
/// passes per step on the micro_batch_shards, gradients summed locally; the
/// buckets are allreduced only during the last pass's backward. The bytes
/// per step of ddp_bucketed, for micro_batches times the samples per rank.
template <TrainElement T>
void ddp_accumulate(train::RankRun<T>& run);

// ---- pitfalls: broken on purpose (dtw run pitfall NAME) -------------------------

/// Bugs from the field, each a strategy above with one thing done wrong, for
/// `dtw run pitfall` and the tests that the workbench catches them.
namespace pitfalls {
/// ddp_accumulate that allreduces on micro-batch 0 instead of the last one
/// (modelscope/FunASR#3472): ranks end with different gradients.
template <TrainElement T>
void sync_on_first_micro_batch(train::RankRun<T>& run);
/// ddp_accumulate that decides whether to sync when a micro-batch starts,
/// from a flag it sets only after that (karpathy/build-nanogpt#30: DDP reads
/// require_backward_grad_sync in the forward): the last micro-batch never syncs.
template <TrainElement T>
void sync_flag_set_after_forward(train::RankRun<T>& run);
/// dp_allreduce whose ranks each draw their own initial weights and skip
/// the broadcast from rank 0: the replicas differ from the first step.
template <TrainElement T>
void skip_initial_broadcast(train::RankRun<T>& run);
/// dp_allreduce that averages with 1/p instead of each shard's rows: on a
/// batch that does not divide, every replica agrees and all are wrong.
template <TrainElement T>
void average_by_world_size(train::RankRun<T>& run);
}  // namespace pitfalls

}  // namespace dtw::ch02
