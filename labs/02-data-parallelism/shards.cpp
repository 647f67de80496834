// What each rank trains on, and the knobs of the chapter's strategies.
//
// Data parallelism splits every step's batch of B rows into p shards, one per
// rank. The single device computes the gradient of the *mean* loss over all
// B rows:
//
//     g = (1/B) Σ_rows ∇ℓ(row) = Σ_r (B_r/B) · g_r,    g_r = (1/B_r) Σ_{rows of r} ∇ℓ(row)
//
// where g_r is what rank r's backward computes (the gradient of its shard's
// mean loss) and B_r its rows. So the weight of rank r is B_r/B. When p
// divides B every B_r is B/p and the weight is the textbook 1/p; when it
// does not, the training layer's sampler (train::shard_rows) gives the first
// B mod p ranks one row more:
//
//     B = 12, p = 5:   rows  3   3   2   2   2      weights 3/12 3/12 2/12 2/12 2/12
//                     rank  0   1   2   3   4
//
// and averaging with 1/p would give rank 4's rows 2/12·(12/10) = 20% too much
// weight and rank 0's 20% too little: every replica agrees, and all are wrong.
// PyTorch's DDP divides by the world size, which is why its samplers pad or
// drop rows so that every rank has the same count. This workbench weighs
// instead, so a batch of any size reproduces the reference exactly.
//
// Each rank multiplies its loss and its gradient by its weight *before* the
// sum (the loss_scale of Replica::forward_backward), so the allreduce yields
// the mean directly and no rank divides afterwards. (PyTorch divides after,
// or before with gradient_predivide_factor to keep fp16 sums from overflowing.)
#include <limits>
#include <string>

#include "data_parallelism.h"

namespace dtw::ch02 {

std::int64_t default_bucket_kib(const train::RunSpec& spec) {
  // About a quarter of the model's gradients per bucket, as PyTorch's 25 MiB
  // is about a quarter of ResNet-50's 100 MB: enough buckets for backward to
  // hide most of them, few enough that their latencies do not add up. The
  // chapter's sweep (docs/results/02-data-parallelism.md) shows the U-shaped
  // curve this default sits near the bottom of.
  //
  // The quarter is counted in values, not bytes: 256·⌊Ψ/1024⌋ values (at
  // least 256), which is ⌊Ψ/1024⌋ KiB in float and twice that in double. A
  // cap fixed in bytes would hold half as many doubles, so a double run
  // would cut twice the buckets of the same run in float and the two would
  // not be the same schedule.
  const std::int64_t psi = model::param_layout(spec.config()).size();
  const std::int64_t element_bytes = spec.dtype == train::DType::kFloat64 ? 8 : 4;
  return std::max<std::int64_t>(1, psi / 1024) * element_bytes / 4;
}

namespace {
// "rank 2: " in a rank's messages; nothing before the run (rank −1).
std::string on_rank(int rank) { return rank >= 0 ? "rank " + std::to_string(rank) + ": " : ""; }

// The rule of every micro-batched split: each of ranks × m shards gets a row.
void check_micro_batches(const train::RunSpec& spec, int rank, int ranks, std::int64_t m) {
  DTW_CHECK_ARG(ranks >= 1, on_rank(rank) << "a world of " << ranks << " ranks");
  DTW_CHECK_ARG(m >= 1, on_rank(rank) << "micro_batches=" << m
                                      << ": a step needs at least one micro-batch");
  DTW_CHECK_ARG(m <= spec.batch / ranks,
                on_rank(rank) << "a global batch of " << spec.batch << " rows cannot feed "
                              << ranks << " ranks x " << m << " micro-batches = " << ranks * m
                              << " micro-batches of at least one row each");
}
}  // namespace

std::vector<train::Knob> ddp_knobs(bool buckets, bool accumulate) {
  // Declared here, beside the function that reads them, so the two agree.
  std::vector<train::Knob> k;
  if (buckets)
    k.push_back({.name = "bucket_kib",
                 .default_value = "Ψe/4096",
                 .help = "largest gradient bucket in KiB (> 0); default: a quarter of the "
                         "model's gradients (Ψ/4 values, the same buckets in float and double)",
                 .default_for = [](const train::RunSpec& spec, int, const train::Knobs&) {
                   return std::to_string(default_bucket_kib(spec));
                 }});
  if (accumulate)
    k.push_back({.name = "micro_batches",
                 .default_value = std::to_string(DdpOptions{}.micro_batches),
                 .help = "micro-batches per step (>= 1); gradients are allreduced in the last"});
  k.push_back({.name = "check_every",
               .default_value = std::to_string(DdpOptions{}.check_every),
               .help = "compare the replicas every N steps and after the last (0: only at the start)"});
  return k;
}

DdpOptions ddp_options(const train::Knobs& knobs, const train::RunSpec& spec, int rank) {
  DdpOptions o;
  const std::int64_t kib = knobs.get_int("bucket_kib", default_bucket_kib(spec));
  // A cap of zero would make every tensor its own bucket anyway, so it is
  // more likely a typo than a wish: refuse it, as PyTorch refuses bucket_cap_mb <= 0.
  DTW_CHECK_ARG(kib > 0 && kib <= (std::int64_t{1} << 40),
                on_rank(rank) << "bucket_kib=" << kib
                              << ": the bucket cap must be at least 1 KiB (and at most 2^40 KiB)");
  o.bucket_bytes = kib * 1024;
  o.micro_batches = knobs.get_int("micro_batches", o.micro_batches);
  DTW_CHECK_ARG(o.micro_batches >= 1, on_rank(rank) << "micro_batches=" << o.micro_batches
                                                    << ": a step needs at least one micro-batch");
  o.check_every = knobs.get_int("check_every", o.check_every);
  DTW_CHECK_ARG(o.check_every >= 0, on_rank(rank) << "check_every=" << o.check_every
                                                  << " must be 0 (only at the start) or more");
  return o;
}

DdpOptions check_ddp_run(const train::Knobs& knobs, const train::RunSpec& spec, int ranks,
                         int rank, bool accumulate) {
  const DdpOptions o = ddp_options(knobs, spec, rank);
  if (accumulate) check_micro_batches(spec, rank, ranks, o.micro_batches);
  else train::shard_rows(spec, 0, ranks);  // the sampler's rule: a row for every rank
  return o;
}

double shard_weight(const train::RunSpec& spec, std::int64_t shard, std::int64_t shards) {
  // The sampler's rule (train::shard_rows) checks the split first: it throws
  // when there are more shards than rows.
  (void)train::shard_rows(spec, shard, shards);
  if (spec.batch % shards == 0) return 1.0 / static_cast<double>(shards);
  DTW_TODO("02.5: The batch does not divide: weigh the shard by its share of the batch's rows, as the sampler splits them.");
}

std::vector<std::int64_t> micro_batch_shards(const train::RunSpec& spec, int rank, int ranks,
                                             std::int64_t micro_batches) {
  DTW_CHECK_ARG(ranks >= 1 && rank >= 0 && rank < ranks,
                "rank " << rank << " is outside a world of " << ranks);
  check_micro_batches(spec, rank, ranks, micro_batches);
  // The reference's batch cut into p·m shards, rank r taking m consecutive
  // ones: together the ranks' micro-batches are exactly the batch, whether
  // or not it divides. (Cutting rank r's own shard into m pieces would do
  // as well; consecutive shards keep every micro-batch's rows contiguous.)
  //
  //     B = 8, p = 2, m = 2:   rows 0-1 | 2-3 | 4-5 | 6-7
  //                            r0 mb0  r0 mb1 r1 mb0 r1 mb1
  std::vector<std::int64_t> shards;
  DTW_TODO("02.4: List the micro_batches shards (of ranks*micro_batches) that rank `rank` trains on, in order.");
  return shards;
}

}  // namespace dtw::ch02
