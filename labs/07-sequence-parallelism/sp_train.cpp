// Training sequence-parallel: every rank holds every parameter and T/p
// tokens of every sequence. The embedding, the norms, the MLP, the
// projections and the loss work token by token, so they run on the rank's
// own tokens with no message; only attention reaches other tokens, and the
// method's core (Ulysses, ring, or the all-gather baseline) supplies them.
//
//     rank 0: tokens [0, T/p)      rank 1: tokens [T/p, 2T/p)   ...
//       forward/backward on its tokens (attention core: messages inside)
//       loss_r = mean over its tokens;  gradients of its tokens' loss
//     Σ_r (t_r/T)·loss_r = the batch's mean loss; the same weights on the
//     gradients, then an allreduce (sum) gives every rank the batch's gradient
//
// So the parameter update is data parallelism's (chapter 02), over tokens
// instead of rows: each rank's share is the fraction of the tokens it holds
// (Batch::weight of its sequence shard), and the sum needs no division.
// Bytes per step beyond the attention core: 2(p−1)/p·(Ψ + 1)·e (ring allreduce).
#include <memory>
#include <span>

#include "collectives.h"  // chapter 01's allreduce (DEPENDS 01)
#include "dtw/model/seams.h"
#include "dtw/train/sequence_batch.h"
#include "sequence_parallelism.h"

namespace dtw::ch07 {
namespace {

// The seams of a sequence-parallel rank: everything is the identity except
// the attention core.
template <class T>
class CoreSeams final : public model::Seams<T> {
 public:
  explicit CoreSeams(model::AttentionCore<T>& core) : core_(core) {}
  model::AttentionCore<T>& attention() override { return core_; }

 private:
  model::AttentionCore<T>& core_;
};

SequenceSplit split_of(Method m) {
  return m == Method::kRingZigZag ? SequenceSplit::kZigZag : SequenceSplit::kContiguous;
}

template <class T>
std::unique_ptr<model::AttentionCore<T>> make_core(Method m, const CoreSetup& setup) {
  switch (m) {
    case Method::kGathered: return std::make_unique<GatheredAttention<T>>(setup);
    case Method::kUlysses: return std::make_unique<UlyssesAttention<T>>(setup);
    case Method::kRing:
    case Method::kRingZigZag: return std::make_unique<RingAttention<T>>(setup);
  }
  return nullptr;
}

}  // namespace

const char* name_of(Method method) {
  switch (method) {
    case Method::kGathered: return "sp-allgather";
    case Method::kUlysses: return "sp-ulysses";
    case Method::kRing: return "sp-ring";
    case Method::kRingZigZag: return "sp-ring-zigzag";
  }
  return "?";
}

void check_sp_run(const train::RunSpec& spec, int p, Method method, int rank) {
  const model::ModelConfig config = spec.config();
  DTW_CHECK_ARG(config.kind == model::ModelKind::kGpt,
                name_of(method) << ": sequence parallelism cuts sequences, and " << config.name
                                << " has none (use a GPT)");
  check_setup(name_of(method), spec.sequence(), config.heads, p, split_of(method),
              method == Method::kUlysses, rank);
}

template <TrainElement T>
double sum_weighted_gradients(train::Replica<T>& replica, Comm& comm, std::int64_t step,
                              const model::ModelShard& shard) {
  const train::RunSpec& spec = replica.spec();
  DTW_TODO("07.1: Weigh this rank's loss and gradients by its share of the tokens; sum both over the ranks.");
}

template <TrainElement T>
void train_sequence_parallel(train::RankRun<T>& run, Method method) {
  Comm& comm = run.comm();
  const train::RunSpec& spec = run.spec();
  const int p = comm.size(), r = comm.rank();
  check_sp_run(spec, p, method, r);  // before any message, on every rank
  const SequenceSplit split = split_of(method);
  const std::unique_ptr<model::AttentionCore<T>> core =
      make_core<T>(method, {.comm = &comm, .seq_len = spec.sequence(), .split = split});
  CoreSeams<T> seams(*core);

  // Every parameter, and this rank's tokens of every sequence.
  const model::ModelShard shard = model::ModelShard::sequence(r, p, split);
  train::Replica<T> replica(spec, run.exec(), train::ReplicaPlan::slice(spec, shard));
  replica.set_seams(&seams);
  replica.set_times(run.layer_times());
  const train::Cost pass = replica.pass_cost(
      replica.network().all(), train::sequence_shard_of(train::make_batch(spec, 0), shard), true);
  const train::Cost update = replica.optimizer_cost();

  for (std::int64_t step = 0; step < spec.steps; ++step) {
    double loss = 0;
    {
      auto phase = run.phase("forward-backward", {.flops = pass.flops, .bytes = pass.bytes});
      loss = sum_weighted_gradients(replica, comm, step, shard);
    }
    {
      auto phase = run.phase("optimizer", {.flops = update.flops, .bytes = update.bytes});
      replica.clip(replica.local_sum_of_squares());  // whole gradients: the local norm is global
      replica.step(step);
    }
    run.record_loss(step, loss);
  }
  run.report(replica);
}

template <TrainElement T>
void sp_allgather(train::RankRun<T>& run) {
  train_sequence_parallel(run, Method::kGathered);
}
template <TrainElement T>
void sp_ulysses(train::RankRun<T>& run) {
  train_sequence_parallel(run, Method::kUlysses);
}
template <TrainElement T>
void sp_ring(train::RankRun<T>& run) {
  train_sequence_parallel(run, Method::kRing);
}
template <TrainElement T>
void sp_ring_zigzag(train::RankRun<T>& run) {
  train_sequence_parallel(run, Method::kRingZigZag);
}

#define DTW_INSTANTIATE(T)                                                   \
  template double sum_weighted_gradients<T>(train::Replica<T>&, Comm&, std::int64_t, \
                                            const model::ModelShard&);          \
  template void train_sequence_parallel<T>(train::RankRun<T>&, Method);      \
  template void sp_allgather<T>(train::RankRun<T>&);                         \
  template void sp_ulysses<T>(train::RankRun<T>&);                           \
  template void sp_ring<T>(train::RankRun<T>&);                              \
  template void sp_ring_zigzag<T>(train::RankRun<T>&);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch07
