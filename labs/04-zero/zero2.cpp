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
  DTW_TODO("04.2: Return where the backward adds unit `unit`'s gradient: its full-size buffer, made and zeroed on the first call of the pass.");
}

template <TrainElement T>
void ShardedGrads<T>::ready(std::int64_t begin, std::int64_t end) {
  const int u = sharding_.unit_of(begin, end), r = comm_.rank();
  Array<T>& buffer = buffers_[static_cast<std::size_t>(u)];
  DTW_CHECK_ARG(!buffer.empty() || begin == end,
                "rank " << r << ": ZeRO: unit " << sharding_.units()[static_cast<std::size_t>(u)].name
                        << " is ready, but the backward never wrote its gradient");
  DTW_TODO("04.2: Reduce-scatter the unit's buffer in place, add this rank's chunk to its gradient shard, free the buffer.");
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
  DTW_TODO("04.2: Train every step the ZeRO-2 way: the backward's gradients go through a ShardedGrads whose hook reduce-scatters each unit as it becomes final.");
  z.finish(replica);
}

template class ShardedGrads<float>;
template class ShardedGrads<double>;
template void run_zero2<float>(ZeroRun<float>&);
template void run_zero2<double>(ZeroRun<double>&);

}  // namespace dtw::ch04
