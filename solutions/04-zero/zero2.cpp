// ZeRO-2: shard the gradients too.
//
// After ZeRO-1's reduce-scatter a rank uses only its chunk of the gradient;
// the other (p−1)/p of the buffer were needed only to be sent. ZeRO-2 never
// keeps them: each unit's gradient lives in a temporary buffer from the
// moment backward starts writing it until the moment it is final, and is
// reduce-scattered right then, from the gradient-ready hook, while backward
// goes on with the units below. The rank keeps only its chunk, added into
// its shard, and frees the buffer.
//
//   backward:     head        h.1          h.0          embed
//   buffers:    [head]      [h.1]        [h.0]        [embed]    (one or two at a time)
//   hook:       RS head     RS h.1       RS h.0       RS embed   → shard += my chunk
//
// So the gradient memory is the shard (Ψ/p) plus the units in flight, never
// Ψ. The bytes are ZeRO-1's: the same reduce-scatter, unit by unit, and the
// same allgather of parameters after the step.
//
// The tied embedding is the case to think about: the head's backward adds
// its share into wte's gradient first, the embedding's backward adds the
// rest at the very end, and the hook reports the embedding only then. Its
// buffer lives through the whole backward; reduce-scatter it earlier and the
// embedding's share is lost (the pitfall "zero2-early-reduce" does).
//
// With micro-batches every micro-batch's hook reduce-scatters and *adds* to
// the shard: m times ZeRO-1's gradient bytes, the price of never holding the
// full gradient (DeepSpeed's ZeRO-2 does the same).
#include "collectives.h"  // chapter 01's solution (DEPENDS 01)
#include "dtw/kernels/activations.h"
#include "zero_run.h"

namespace dtw::ch04 {

template <TrainElement T>
ShardedGrads<T>::ShardedGrads(Comm& comm, const Sharding& sharding, train::Replica<T>& replica)
    : comm_(comm), sharding_(sharding), replica_(replica), buffers_(sharding.units().size()) {}

template <TrainElement T>
T* ShardedGrads<T>::grads(int unit) {
  Array<T>& buffer = buffers_.at(static_cast<std::size_t>(unit));
  // The backward may ask several times (the tied head, then the embedding):
  // the same buffer until the unit's hook.
  if (buffer.empty()) {
    buffer = Array<T>(replica_.exec(), sharding_.units()[static_cast<std::size_t>(unit)].size(),
                      MemoryCategory::kGradients);
    buffer.fill(T(0));
  }
  return buffer.data();
}

template <TrainElement T>
void ShardedGrads<T>::ready(std::int64_t begin, std::int64_t end) {
  const int u = sharding_.unit_of(begin, end), r = comm_.rank();
  Array<T>& buffer = buffers_[static_cast<std::size_t>(u)];
  DTW_CHECK_ARG(!buffer.empty() || begin == end,
                "rank " << r << ": ZeRO: unit " << sharding_.units()[static_cast<std::size_t>(u)].name
                        << " is ready, but the backward never wrote its gradient");
  // @lab 04.2: Reduce-scatter the unit's buffer in place, add this rank's chunk to its gradient shard, free the buffer.
  // @hint 1: ch01::reduce_scatter(comm_, all, chunk, ReduceOp::kSum) with all =
  // @hint 1: buffer.span() and chunk = sharding_.chunks(u).of(all, r); then the
  // @hint 1: shard is replica_.grads(sharding_.shard(u, r)): add the chunk into it
  // @hint 1: (kernels::add_into), do not overwrite: micro-batches accumulate there.
  // @hint 2: Free the buffer by assigning an empty Array<T>(): the ledger then
  // @hint 2: counts only the shard and the units still in flight.
  const std::span<T> all = buffer.span();
  const std::span<T> mine = sharding_.chunks(u).of(all, r);
  ch01::reduce_scatter(comm_, all, mine, ReduceOp::kSum);
  if (!mine.empty()) {  // a unit smaller than p leaves some ranks no chunk
    const std::span<T> shard = replica_.grads(sharding_.shard(u, r));
    kernels::add_into(shard.data(), mine.data(), static_cast<std::int64_t>(mine.size()));
  }
  buffer = Array<T>();
  // @end
}

template <TrainElement T>
int ShardedGrads<T>::live_units() const {
  int n = 0;
  for (const Array<T>& b : buffers_) n += b.empty() ? 0 : 1;
  return n;
}

template <class T>
void run_zero2(ZeroRun<T>& z) {
  const train::RunSpec& spec = z.spec();
  // Full parameters; gradients and optimizer state for this rank's shards.
  train::Replica<T> replica(spec, z.run().exec(), z.plan());
  replica.set_times(z.run().layer_times());
  ShardedGrads<T> grads(z.comm(), z.sharding(), replica);
  ZeroAccess<T> access(replica, grads);  // parameters: the replica's full copy
  const model::GradReady ready = [&](std::int64_t b, std::int64_t e) { grads.ready(b, e); };
  for (std::int64_t step = z.start(replica); step < spec.steps; ++step) {
    double loss = 0;
    for (int k = 0; k < z.options().micro_batches; ++k)
      loss += z.micro_batch(replica, step, k, ready, &access);
    z.end_step(replica, step, loss);
    auto phase = z.run().phase("allgather", {.compute = false});
    allgather_params(z.comm(), z.sharding(), replica);
  }
  z.finish(replica);
}

template class ShardedGrads<float>;
template class ShardedGrads<double>;
template void run_zero2<float>(ZeroRun<float>&);
template void run_zero2<double>(ZeroRun<double>&);

}  // namespace dtw::ch04
