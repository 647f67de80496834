// The end of a pipeline step, the same for every schedule: after its last
// backward, each rank holds the whole batch's gradient of *its own* units
// (every micro-batch added weight × its gradient). What is left:
//
//   1. The tied embedding. A GPT's head multiplies by wte, the embedding
//      table of chunk 0, so both ends of the pipeline hold wte and each adds
//      its share of wte's gradient. The head's rank sends its share to the
//      embedding's rank, which adds it (recv_reduce): V·C values per step.
//   2. The clipping norm is the norm of the *whole* gradient, spread over p
//      ranks: one allreduce of Σ g² over each rank's optimizer ranges (wte
//      counted once: only the embedding's rank steps it). The loss, known
//      only where the last chunk runs, rides in the same allreduce.
//   3. Clip and step, exactly as the reference (Replica does both).
//   4. The embedding's rank sends the stepped wte back to the head's copy.
//
// Steps 2 and 3 are the end of the step proper (clip_and_step), which a
// composed run replaces through ExecutorHooks::end_of_step: data-parallel
// replicas of the pipeline first allreduce their gradients over their
// data-parallel group, then agree on the norm over the pipeline. Steps 1
// and 4 stay: they are the pipeline's own business.
//
//      rank of chunk 0                       rank of the last chunk
//      grads[wte] += ─────── share of dwte ────── grads[wte]
//      allreduce(Σ g², loss) ◄──────────────────► allreduce(Σ g², loss)
//      clip, step wte and its units               clip, step its units
//      params[wte] ───────── stepped wte ───────► params[wte]
#include <array>
#include <utility>

#include "collectives.h"  // chapter 01's allreduce (DEPENDS 01)
#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "pipeline_internal.h"

namespace dtw::ch05 {

template <class T>
StepContext<T>::StepContext(train::RankRun<T>& r, Comm& cm, train::Replica<T>& rep,
                            const StageMap& sm, ExecutorOptions opts, ExecutorHooks<T> h)
    : run(r), comm(cm), replica(rep), map(sm), options(opts), hooks(std::move(h)), rank(cm.rank()) {
  DTW_CHECK_ARG(map.ranks == comm.size(), "rank " << rank << ": a stage map for " << map.ranks
                                                  << " ranks in a world of " << comm.size());
  embed_rank = map.rank_of(0);
  head_rank = map.rank_of(map.chunk_count() - 1);
  const model::ModelConfig& c = replica.network().config();
  // wte opens the flat buffer (offset 0), so its end is the range to move.
  if (embed_rank != head_rank) wte_end = model::tied_wte(c, replica.layout()).end;
}

template <class T>
void StepContext<T>::begin_step(std::int64_t s, int micro_batches) {
  DTW_CHECK_ARG(micro_batches >= 1, "rank " << rank << ": step " << s << " with m = "
                                            << micro_batches << " micro-batches (at least 1)");
  step = s;
  m = micro_batches;
  loss = 0;
  batches.assign(static_cast<std::size_t>(m), std::nullopt);
}

template <class T>
const train::Batch& StepContext<T>::batch(int mb) {
  auto& b = batches[static_cast<std::size_t>(mb)];
  // By default the pipeline is the whole run: data-parallel rank 0 of 1.
  if (!b) b = hooks.micro_batches ? hooks.micro_batches(step, mb, m)
                                  : train::micro_batch(run.spec(), step, 0, 1, mb, m);
  return *b;
}

template <class T>
void StepContext<T>::check_action(const Action& a, std::size_t index) const {
  const int n = map.chunk_count();
  DTW_CHECK_ARG(a.chunk >= 0 && a.chunk < n && map.rank_of(a.chunk) == rank,
                "rank " << rank << ": action " << index << " (" << to_string(a) << ") is for chunk "
                        << a.chunk << ", which " << (a.chunk >= 0 && a.chunk < n ? "runs on rank " + std::to_string(map.rank_of(a.chunk)) : "does not exist (" + std::to_string(n) + " chunks)"));
  DTW_CHECK_ARG(a.mb >= 0 && a.mb < m, "rank " << rank << ": action " << index << " ("
                                               << to_string(a) << ") names micro-batch " << a.mb
                                               << ", but the step has m = " << m
                                               << " micro-batches");
  const bool to_next = (a.op == Op::kSend) == (a.dir == Dir::kActivation);
  DTW_CHECK_ARG(a.op == Op::kForward || a.op == Op::kBackward || (to_next ? a.chunk < n - 1 : a.chunk > 0),
                "rank " << rank << ": action " << index << " (" << to_string(a) << "): chunk "
                        << a.chunk << " has no " << (to_next ? "next" : "previous") << " chunk");
}

template <class T>
void StepContext<T>::check_complete(std::int64_t done) const {
  const std::int64_t want = static_cast<std::int64_t>(m) * map.virtual_stages;
  DTW_CHECK_ARG(done == want, "rank " << rank << ": step " << step << " forwarded and backwarded "
                                      << done << " (chunk, micro-batch) pairs of its "
                                      << map.virtual_stages << " chunk(s) × m = " << m << " (" << want
                                      << "): the schedule left some out");
}

template <class T>
double StepContext<T>::finish_step() {
  // @lab 05.3: Start the step's end: the head's rank sends its share of the tied wte's gradient to the embedding's rank, which adds it in.
  // @hint 1: A tied head uses the embedding table of chunk 0, so both ends of the pipeline hold a
  // @hint 1: share of its gradient. Before the norm, the whole gradient must be on the one rank
  // @hint 1: that steps the table: the head's rank sends its share there, and it is added, not
  // @hint 1: copied.
  // @hint 2: only when the head is tied and on another rank (wte_end > 0): the head's rank sends
  // @hint 2: its gradient of [0, wte_end); the embedding's rank receives it and adds it into its
  // @hint 2: own. Trap: this must come before the norm, which counts wte once, on the embedding's
  // @hint 2: rank.
  // @hint 3: comm.send(replica.grads(0, wte_end), embed_rank, kTiedGradTag);
  // @hint 3: comm.recv_reduce(replica.grads(0, wte_end), head_rank, ReduceOp::kSum, kTiedGradTag).
  if (wte_end > 0 && rank == head_rank)
    comm.send(replica.grads(0, wte_end), embed_rank, kTiedGradTag);
  if (wte_end > 0 && rank == embed_rank)
    comm.recv_reduce(replica.grads(0, wte_end), head_rank, ReduceOp::kSum, kTiedGradTag);
  // @end
  // The end of the step proper: clip_and_step below, or a composed run's own.
  const StepEnd<T> end{.run = run, .comm = comm, .replica = replica, .step = step, .loss = loss};
  const double global_loss = hooks.end_of_step ? hooks.end_of_step(end) : clip_and_step(end);
  // @lab 05.3: Finish the step: the embedding's rank sends the stepped wte back to the head's copy.
  // @hint 1: After the step only the embedding's rank has the new embedding table; the head's copy
  // @hint 1: must be the same before the next step's forward.
  // @hint 2: only when wte_end > 0: the embedding's rank sends its parameters [0, wte_end) to the
  // @hint 2: head's rank, which receives them into its copy. The head's copy has no optimizer
  // @hint 2: state: it is only ever overwritten here.
  // @hint 3: comm.send(replica.params(0, wte_end), head_rank, kTiedParamTag);
  // @hint 3: comm.recv(replica.params(0, wte_end), embed_rank, kTiedParamTag).
  if (wte_end > 0 && rank == embed_rank)
    comm.send(replica.params(0, wte_end), head_rank, kTiedParamTag);
  if (wte_end > 0 && rank == head_rank)
    comm.recv(replica.params(0, wte_end), embed_rank, kTiedParamTag);
  // @end
  return global_loss;
}

template <TrainElement T>
double clip_and_step(const StepEnd<T>& end) {
  std::array<double, 2> sums{0, 0};  // Σ g², loss
  // @lab 05.3: End a step of a pipeline that is the whole run: agree on the norm and the loss, then clip and step.
  // @hint 1: Every rank holds the gradient of its own units only, so the clipping norm is a sum
  // @hint 1: over the pipeline's ranks; the step's loss is known only where the last chunk runs.
  // @hint 1: One exchange of two numbers gives every rank both; then each clips and steps its own
  // @hint 1: units exactly as the reference does.
  // @hint 2: sums = {the rank's Σ g², its loss}; sum over the pipeline's ranks in one allreduce;
  // @hint 2: clip by sums[0] and step, inside the timeline's optimizer phase; return sums[1]. Trap:
  // @hint 2: a second allreduce for the loss would cost a second latency for nothing.
  // @hint 3: end.replica.local_sum_of_squares(), end.loss, ch01::allreduce(end.comm,
  // @hint 3: std::span<double>(sums), ReduceOp::kSum), end.run.phase("optimizer", {.flops =
  // @hint 3: c.flops, .bytes = c.bytes}) with c = end.replica.optimizer_cost(),
  // @hint 3: end.replica.clip(sums[0]), end.replica.step(end.step).
  sums = {end.replica.local_sum_of_squares(), end.loss};
  ch01::allreduce(end.comm, std::span<double>(sums), ReduceOp::kSum);
  {
    const train::Cost c = end.replica.optimizer_cost();
    auto phase = end.run.phase("optimizer", {.flops = c.flops, .bytes = c.bytes});
    end.replica.clip(sums[0]);
    end.replica.step(end.step);
  }
  // @end
  return sums[1];
}

template struct StepContext<float>;
template struct StepContext<double>;
template double clip_and_step<float>(const StepEnd<float>&);
template double clip_and_step<double>(const StepEnd<double>&);

}  // namespace dtw::ch05
