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
//      rank of chunk 0                       rank of the last chunk
//      grads[wte] += ─────── share of dwte ────── grads[wte]
//      allreduce(Σ g², loss) ◄──────────────────► allreduce(Σ g², loss)
//      clip, step wte and its units               clip, step its units
//      params[wte] ───────── stepped wte ───────► params[wte]
#include <array>

#include "collectives.h"  // chapter 01's allreduce (DEPENDS 01)
#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "pipeline_internal.h"

namespace dtw::ch05 {

template <class T>
StepContext<T>::StepContext(train::RankRun<T>& r, train::Replica<T>& rep, const StageMap& sm,
                            ExecutorOptions opts)
    : run(r), comm(r.comm()), replica(rep), map(sm), options(opts), rank(r.comm().rank()) {
  DTW_CHECK_ARG(map.ranks == comm.size(), "rank " << rank << ": a stage map for " << map.ranks
                                                  << " ranks in a world of " << comm.size());
  embed_rank = map.rank_of(0);
  head_rank = map.rank_of(map.chunk_count() - 1);
  const model::ModelConfig& c = replica.network().config();
  if (c.kind == model::ModelKind::kGpt && c.tied_head && embed_rank != head_rank) {
    const model::ParamView& wte = replica.layout().find("wte");
    wte_end = wte.offset + wte.size;  // wte opens the flat buffer (offset 0)
  }
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
  if (!b) b = train::make_batch(run.spec(), step, mb, m);
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
  std::array<double, 2> sums{0, 0};  // Σ g², loss
  // @lab 05.3: End the step: combine the tied wte's gradient, agree on the norm and the loss, clip, step, and send the stepped wte back.
  // @hint 1: In this order: (1) when wte_end > 0, the head's rank sends its share of wte's
  // @hint 1: gradient, replica.grads(0, wte_end), to the embedding's rank, which adds it in with
  // @hint 1: recv_reduce; (2) put {replica.local_sum_of_squares(), loss} into `sums` and sum it
  // @hint 1: over the ranks with one ch01::allreduce; (3) clip by sums[0] and step; (4) the
  // @hint 1: embedding's rank sends replica.params(0, wte_end) back to the head's rank, which
  // @hint 1: receives it into its copy.
  // @hint 2: head_rank and embed_rank are the two ranks, kTiedGradTag and kTiedParamTag the tags
  // @hint 2: (wte_end is 0 when there is no tied copy). Add the wte share before the allreduce:
  // @hint 2: only the embedding's rank steps wte, so its Σ g² counts wte once, and whole. Clip and
  // @hint 2: step inside run.phase("optimizer", ...) with replica.optimizer_cost()'s flops and
  // @hint 2: bytes.
  if (wte_end > 0 && rank == head_rank)
    comm.send(replica.grads(0, wte_end), embed_rank, kTiedGradTag);
  if (wte_end > 0 && rank == embed_rank)
    comm.recv_reduce(replica.grads(0, wte_end), head_rank, ReduceOp::kSum, kTiedGradTag);
  sums = {replica.local_sum_of_squares(), loss};
  ch01::allreduce(comm, std::span<double>(sums), ReduceOp::kSum);
  {
    const train::Cost c = replica.optimizer_cost();
    auto phase = run.phase("optimizer", {.flops = c.flops, .bytes = c.bytes});
    replica.clip(sums[0]);
    replica.step(step);
  }
  if (wte_end > 0 && rank == embed_rank)
    comm.send(replica.params(0, wte_end), head_rank, kTiedParamTag);
  if (wte_end > 0 && rank == head_rank)
    comm.recv(replica.params(0, wte_end), embed_rank, kTiedParamTag);
  // @end
  return sums[1];
}

template struct StepContext<float>;
template struct StepContext<double>;

}  // namespace dtw::ch05
