// The two strategies: Megatron tensor parallelism (`tp`) and with its
// sequence parallelism (`tp-sp`), on the whole world as one group.
//
// Every rank sees the whole batch and holds its slice of every layer
// (megatron_shard); the model's own forward and backward run on the slice and
// call the seams, where the chapter's collectives are. What stays whole on
// every rank -- the norms, the row-parallel biases, wpe -- is *replicated*:
// the plan names it (Replication::uncut), the clipping norm counts it once
// (clip_sum_of_squares skips it on every rank but the group's first), and
// check_replicated proves after every step that the copies are still equal.
//
// Per step, tp sends 4L + 2 allreduces of B·T·C values, the loss's two small ones and
// the clipping norm; tp-sp sends 6L + 3 allgathers (the backward gathers each sublayer's
// and the head's input again) and 4L + 2 reduce-scatters of B·T·C values in all, the
// loss's two small allreduces, the replicated gradients and the norm (formulas.cpp).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "collectives.h"
#include "dtw/kernels/optim.h"
#include "dtw/train/network.h"
#include "dtw/train/replicated.h"
#include "dtw/train/sequence_batch.h"
#include "phased_seams.h"
#include "tensor_parallel.h"

namespace dtw::ch06 {
namespace {

// Pitfall: every rank keeps its own vocabulary statistics (NVIDIA/Megatron-LM#737).
template <class T>
class LocalStatistics final : public MegatronSeams<T> {
 public:
  using MegatronSeams<T>::MegatronSeams;
  void vocab_max(std::span<T>) override {}
  void vocab_sum(std::span<T>) override {}
};

// Pitfall: the vocabulary padded to t·⌈V/t⌉ with zero rows that stay in the
// softmax (their logit 0 is not masked to −∞; NVIDIA/Megatron-LM#1754).
template <class T>
class PaddedVocabulary final : public MegatronSeams<T> {
 public:
  PaddedVocabulary(Comm& group, std::int64_t pad_rows) : MegatronSeams<T>(group), pad_(pad_rows) {}
  void vocab_max(std::span<T> m) override {
    if (pad_ > 0)
      for (T& v : m) v = std::max(v, T(0));
    MegatronSeams<T>::vocab_max(m);
    max_.assign(m.begin(), m.end());
  }
  void vocab_sum(std::span<T> s) override {
    for (std::size_t i = 0; i < max_.size(); ++i) s[i] += T(pad_) * std::exp(-max_[i]);
    MegatronSeams<T>::vocab_sum(s);
  }

 private:
  std::int64_t pad_;
  std::vector<T> max_;
};

// Σ g² for the clip: each replicated element once (or, the pitfall, once per rank).
template <class T>
double clip_sum(Comm& group, train::Replica<T>& replica, const Faults& faults) {
  if (!faults.clip_counts_copies) return clip_sum_of_squares(group, replica);
  double sum = 0;
  for (T g : replica.grads()) sum += static_cast<double>(g) * static_cast<double>(g);
  ch01::allreduce(group, std::span<double>(&sum, 1), ReduceOp::kSum, ch01::AllreduceAlgo::kRing);
  return sum;
}

// Every LayerNorm's gradients (the pitfall keeps them unreduced).
template <class T>
std::vector<std::pair<std::string, std::vector<T>>> norm_grads(train::Replica<T>& replica) {
  std::vector<std::pair<std::string, std::vector<T>>> out;
  for (const model::ParamView& v : replica.layout().views())
    if (v.name.find("ln") != std::string::npos) {
      const std::span<T> g = replica.tensor(v.name).grads;
      out.emplace_back(v.name, std::vector<T>(g.begin(), g.end()));
    }
  return out;
}

template <class T>
train::Replica<T> make_replica(train::RankRun<T>& run, const model::ModelShard& shard) {
  const train::RunSpec& spec = run.spec();
  const int r = run.comm().rank(), t = run.comm().size();
  const model::ParamLayout local = model::param_layout(spec.config(), shard);
  train::Replica<T> replica(spec, run.exec(),
                            train::ReplicaPlan::slice(spec, shard, train::Replication::uncut(local, r, t)));
  replica.set_times(run.layer_times());
  return replica;
}

}  // namespace

template <TrainElement T>
double clip_sum_of_squares(Comm& group, train::Replica<T>& replica) {
  DTW_TODO("06.5: The clipping norm's Σ g² over the group, each replicated tensor counted once.");
}

void check_tp_run(const train::RunSpec& spec, int ranks, int rank, bool sp) {
  const model::ModelConfig c = spec.config();
  const int r = rank < 0 ? 0 : rank;
  // A GPT whose heads and hidden units divide (a vocabulary is never
  // refused: it is cut unevenly).
  megatron_shard(c, r, ranks, false);
  if (sp)
    DTW_CHECK_ARG(spec.sequence() % ranks == 0,
                  (rank >= 0 ? "rank " + std::to_string(rank) + ": " : std::string())
                      << "tp-sp: a sequence of " << spec.sequence()
                      << " tokens does not split over t = " << ranks << " ranks");
}

template <TrainElement T>
void tensor_parallel(train::RankRun<T>& run, const Faults& faults) {
  Comm& group = run.comm();
  const train::RunSpec& spec = run.spec();
  const int t = group.size(), r = group.rank();
  check_tp_run(spec, t, r, false);
  const model::ModelConfig c = spec.config();
  const model::ModelShard shard = megatron_shard(c, r, t);
  train::Replica<T> replica = make_replica(run, shard);
  const train::Cost pass = replica.pass_cost(replica.network().all(), train::make_batch(spec, 0), true);
  const train::Cost update = replica.optimizer_cost();

  MegatronSeams<T> megatron(group);
  LocalStatistics<T> local_statistics(group);
  const std::int64_t padded = (c.vocab + t - 1) / t;  // rows per rank after padding
  PaddedVocabulary<T> padding(group, padded - (shard.vocab.end - shard.vocab.begin));
  PhasedSeams<T> seams(faults.local_vocab_statistics ? local_statistics
                       : faults.pad_vocabulary       ? padding
                                                     : static_cast<MegatronSeams<T>&>(megatron),
                       run, c, shard, spec.batch, spec.sequence(), false, pass);
  replica.set_seams(&seams);
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    {
      // Every rank sees the whole batch: its loss already is the global mean.
      seams.begin_pass();  // compute phases between the collectives
      loss = replica.forward_backward(step, 0, 1);
      seams.end_pass();
    }
    {
      auto phase = run.phase("optimizer", {.flops = update.flops, .bytes = update.bytes});
      replica.clip(clip_sum(group, replica, faults));
      replica.step(step);
    }
    try {
      train::check_replicated(replica, group, "after step " + std::to_string(step + 1));
    } catch (const InvalidArgument& e) {
      // The generic advice (sum the gradients) is SP's fix; under tp it is the wrong one.
      throw InvalidArgument(
          std::string(e.what()) +
          ". Under tp (no SP) every rank computes the replicated tensors from the same whole "
          "activations, so their gradients are equal by construction and need no sum: a "
          "difference means a seam's f or g is missing or misplaced (MegatronSeams, step 06.1)");
    }
    run.record_loss(step, loss);
  }
  run.report(replica);
}

template <TrainElement T>
void tensor_parallel_sp(train::RankRun<T>& run, const Faults& faults) {
  Comm& group = run.comm();
  const train::RunSpec& spec = run.spec();
  const int t = group.size(), r = group.rank();
  check_tp_run(spec, t, r, true);
  const model::ModelConfig c = spec.config();
  // The heads, hidden units and vocabulary cut as in tp; every rank is given
  // the whole batch, and its seams cut the residual stream between the
  // embedding and the head into t contiguous ranges of every sequence.
  model::ModelShard shard = megatron_shard(c, r, t);
  shard.sequence_shard = r;
  shard.sequence_shards = t;
  shard.split = model::SequenceSplit::kContiguous;
  shard.cut_by_seams = true;
  train::Replica<T> replica = make_replica(run, shard);
  // The sublayers and the head run on the whole sequence (after the
  // allgather): their work is tp's, which the modeled fabric needs; the
  // norms' share is small.
  const auto sublayers = train::Network<T>::make(c, megatron_shard(c, r, t));
  const train::Batch whole = train::make_batch(spec, 0);
  const train::Cost pass{
      3 * sublayers->forward_flops(sublayers->all(), whole),
      3 * static_cast<double>(replica.network().activation_bytes(replica.network().all(), whole))};
  const train::Cost update = replica.optimizer_cost();
  SequenceParallelSeams<T> sequence(group, spec.batch, spec.sequence(), c.dim);
  PhasedSeams<T> seams(sequence, run, c, shard, spec.batch, spec.sequence(), true, pass);
  replica.set_seams(&seams);
  kernels::Vector<T> buffer(group.exec().place());
  for (std::int64_t step = 0; step < spec.steps; ++step) {
    // The head gathers every token back: each rank's loss is the batch's
    // mean, as under tp.
    seams.begin_pass();
    const double loss = replica.forward_backward(step, 0, 1);
    seams.end_pass();
    {
      auto phase = run.phase("allreduce", {.compute = false});
      // The pitfall puts the norms' partial gradients back as they were.
      const auto kept = faults.norm_grads_not_reduced ? norm_grads(replica)
                                                      : decltype(norm_grads(replica)){};
      reduce_replicated_grads(group, replica, buffer);
      for (const auto& [name, g] : kept) std::copy(g.begin(), g.end(), replica.tensor(name).grads.begin());
    }
    {
      auto phase = run.phase("optimizer", {.flops = update.flops, .bytes = update.bytes});
      replica.clip(clip_sum(group, replica, faults));
      replica.step(step);
    }
    train::check_replicated(replica, group, "after step " + std::to_string(step + 1));
    run.record_loss(step, loss);
  }
  run.report(replica);
}

template double clip_sum_of_squares<float>(Comm&, train::Replica<float>&);
template double clip_sum_of_squares<double>(Comm&, train::Replica<double>&);
template void tensor_parallel<float>(train::RankRun<float>&, const Faults&);
template void tensor_parallel<double>(train::RankRun<double>&, const Faults&);
template void tensor_parallel_sp<float>(train::RankRun<float>&, const Faults&);
template void tensor_parallel_sp<double>(train::RankRun<double>&, const Faults&);

}  // namespace dtw::ch06
