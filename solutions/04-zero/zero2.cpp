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
#include "dtw/kernels/permute.h"  // copy_values (a planted bug of 04.2 overwrites with it)
#include "zero_run.h"

namespace dtw::ch04 {

template <TrainElement T>
ShardedGrads<T>::ShardedGrads(Comm& comm, const Sharding& sharding, train::Replica<T>& replica)
    : comm_(comm), sharding_(sharding), replica_(replica), buffers_(sharding.units().size()) {}

template <TrainElement T>
T* ShardedGrads<T>::grads(int unit) {
  Array<T>& buffer = buffers_.at(static_cast<std::size_t>(unit));
  // @lab 04.2: Return where the backward adds unit `unit`'s gradient: its full-size buffer, made and zeroed on the first call of the pass.
  // @hint 1: A unit's gradient lives in a temporary buffer from the moment the
  // @hint 1: backward starts writing it until its hook; the backward may ask
  // @hint 1: several times (the tied head, then the embedding).
  // @hint 2: if the unit has no buffer: make one of the unit's size, counted as
  // @hint 2: gradients, and fill it with zeros (the backward adds into it).
  // @hint 2: Return the same buffer on every later call until the hook frees it.
  // @hint 3: if (buffer.empty()) { buffer = Array<T>(replica_.exec(), sharding_.units()[unit].size(),
  // @hint 3: MemoryCategory::kGradients); buffer.fill(T(0)); } return buffer.data();
  if (buffer.empty()) {
    buffer = Array<T>(replica_.exec(), sharding_.units()[static_cast<std::size_t>(unit)].size(),
                      MemoryCategory::kGradients);
    buffer.fill(T(0));
  }
  return buffer.data();
  // @end
}

template <TrainElement T>
void ShardedGrads<T>::ready(std::int64_t begin, std::int64_t end) {
  const int u = sharding_.unit_of(begin, end), r = comm_.rank();
  Array<T>& buffer = buffers_[static_cast<std::size_t>(u)];
  DTW_CHECK_ARG(!buffer.empty() || begin == end,
                "rank " << r << ": ZeRO: unit " << sharding_.units()[static_cast<std::size_t>(u)].name
                        << " is ready, but the backward never wrote its gradient");
  // @lab 04.2: Reduce-scatter the unit's buffer in place, add this rank's chunk to its gradient shard, free the buffer.
  // @hint 1: The unit's gradient of this pass is final: sum it over the ranks
  // @hint 1: into the owners' chunks (ZeRO-1's reduce-scatter, for one unit, now,
  // @hint 1: while the backward goes on), keep only this rank's chunk, and let
  // @hint 1: the full buffer go.
  // @hint 2: reduce-scatter the buffer (sum) so that this rank's chunk holds the
  // @hint 2: sum; shard += chunk (ADD: the micro-batches of a step accumulate in
  // @hint 2: the shard, so overwriting keeps only the last one); free the buffer.
  // @hint 2: Trap: a unit smaller than p leaves this rank an empty chunk and no
  // @hint 2: shard to add to, but it still takes part in the reduce-scatter.
  // @hint 3: all = buffer.span(); mine = sharding_.chunks(u).of(all, r);
  // @hint 3: ch01::reduce_scatter(comm_, all, mine, ReduceOp::kSum); shard =
  // @hint 3: replica_.grads(sharding_.shard(u, r)); kernels::add_into(comm_.exec().place(),
  // @hint 3: shard.data(), mine.data(), mine.size()) if mine is not empty (on the rank's
  // @hint 3: Place: the host, or its GPU); buffer = Array<T>().
  const std::span<T> all = buffer.span();
  const std::span<T> mine = sharding_.chunks(u).of(all, r);
  ch01::reduce_scatter(comm_, all, mine, ReduceOp::kSum);
  if (!mine.empty()) {  // a unit smaller than p leaves some ranks no chunk
    const std::span<T> shard = replica_.grads(sharding_.shard(u, r));
    kernels::add_into(comm_.exec().place(), shard.data(), static_cast<const T*>(mine.data()),
                      static_cast<std::int64_t>(mine.size()));
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
  // @lab 04.2: Train every step the ZeRO-2 way: the backward's gradients go through a ShardedGrads whose hook reduce-scatters each unit as it becomes final.
  // @hint 1: The step is ZeRO-1's, except that the reduce-scatter moves into the
  // @hint 1: backward: unit by unit, from the gradient-ready hook, and no full
  // @hint 1: gradient of the model is ever held.
  // @hint 2: grads = a ShardedGrads of the replica; access = a ZeroAccess over the
  // @hint 2: replica's parameters and those grads (the model writes gradients
  // @hint 2: through it); ready = a hook calling grads.ready. Then per step: the
  // @hint 2: micro-batches with the hook and the access, end the step, allgather.
  // @hint 2: Trap: no reduce-scatter after the backward: the hook did it.
  // @hint 3: ShardedGrads<T> grads(z.comm(), z.sharding(), replica); ZeroAccess<T>
  // @hint 3: access(replica, grads); model::GradReady ready = [&](b, e) { grads.ready(b, e); };
  // @hint 3: loss += z.micro_batch(replica, step, k, ready, &access); z.end_step(...);
  // @hint 3: z.communicate("allgather", [&] { allgather_params(...); }).
  ShardedGrads<T> grads(z.comm(), z.sharding(), replica);
  ZeroAccess<T> access(replica, grads);  // parameters: the replica's full copy
  const model::GradReady ready = [&](std::int64_t b, std::int64_t e) { grads.ready(b, e); };
  for (std::int64_t step = z.start(replica); step < spec.steps; ++step) {
    double loss = 0;
    for (int k = 0; k < z.options().micro_batches; ++k)
      loss += z.micro_batch(replica, step, k, ready, &access);
    z.end_step(replica, step, loss);
    z.communicate("allgather", [&] { allgather_params(z.comm(), z.sharding(), replica); });
  }
  // @end
  z.finish(replica);
}

template class ShardedGrads<float>;
template class ShardedGrads<double>;
template void run_zero2<float>(ZeroRun<float>&);
template void run_zero2<double>(ZeroRun<double>&);

}  // namespace dtw::ch04
