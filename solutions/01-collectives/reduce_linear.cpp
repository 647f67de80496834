// Step 01.2, linear reduce: afterwards the root's `data` holds op over every
// rank's `data`, element by element; the other ranks' `data` is scratch.
//
// Contract: every rank calls with the same count, op, root and tag (p >= 2
// here; op is never kAvg: dispatch.cpp sums and divides). The root's own
// values are one of the operands. A message of another count than data.size()
// must end in an error, never in a wrong sum. For floats the root must combine
// the ranks in the same order on every run (rank order), so that two runs give
// the same bits.
//
// Bytes on the wire: every non-root rank sends its n elements to the root
// once; the root receives (p-1)·n and does all (p-1)·n reductions itself.
// Cost (p-1)(α + nβ + nγ).
#include "algorithms.h"

namespace dtw::ch01::detail {

template <class T>
void reduce_linear(Comm& comm, std::span<T> data, ReduceOp op, int root, int tag) {
  const int p = comm.size(), r = comm.rank();
  if (p == 1) return;

  // @lab 01.2: Reduce onto the root, one rank after the other.
  // @hint 1: Every other rank hands its vector to the root; the root folds each one into its own,
  // @hint 1: taking the ranks in a fixed order so that floats round the same way on every run.
  // @hint 1: The root's own values stay in the result: combine, never overwrite.
  // @hint 2: root: for src = 0..p-1, src != root: combine the message from src into data. Others:
  // @hint 2: send data to the root. Trap: a plain receive replaces the partial result instead of
  // @hint 2: adding to it (the chapter's "Fusing the receive into the reduction").
  // @hint 3: On the root comm.recv_reduce(data, src, op, tag) (it checks the count too); elsewhere
  // @hint 3: comm.send(data, root, tag).
  // How this solution works (the lab shows none of it):
  // Linear reduce: every rank sends its whole vector to the root, which folds
  // them into its own, one rank after another.
  //
  //          1 ──╮
  //          2 ──┼──► root: data = data ⊕ data_1 ⊕ data_2 ⊕ ...
  //        p-1 ──╯
  //
  // Cost: (p-1)(α + nβ + nγ): the root's link receives (p-1)n elements and the
  // root alone performs all (p-1)n reductions. It is the first half of the
  // parameter-server pattern (allreduce_naive.cpp).
  //
  // The root reduces in a fixed rank order, so for floats the result is the same
  // on every run (not necessarily the same as another order would give).
  //
  // Worked example, p = 4, root 2, each rank holding one value r + 1:
  //
  //   rank 2 starts with 3, then receives and adds rank 0's 1 (→ 4),
  //   rank 1's 2 (→ 6) and rank 3's 4 (→ 10).
  //   Ranks 0, 1 and 3 each send one message and are done.
  //
  // Bytes on the wire: each non-root rank sends n elements; the root receives
  // (p-1)·n elements and performs (p-1)·n reductions, one after another.
  //
  // Why the order of the receives matters little here: a blocking send is
  // synchronous on the threads backend, so ranks 1, 3, ... wait in their send
  // until the root gets to them. They are idle, but nothing deadlocks: the root
  // takes them one at a time, and each waits only for the root.
  //
  // Why recv_reduce rather than recv + a loop: the threads backend adds the
  // message straight from the sender's buffer into ours, one pass over memory
  // instead of a copy into scratch and then an addition. On a network backend
  // it does the same two steps you would write, but you write one line.
  //
  // Pitfalls:
  // - The root's own data is the first operand: it must not be overwritten by
  //   a plain receive (that would drop the root's contribution).
  // - Non-root ranks' data is left untouched here, but callers must not rely on
  //   it: the contract says it is scratch (the binomial version changes it).
  // - kAvg never reaches this function; dispatch.cpp sums and then divides.
  //
  // When to use: p = 2, tiny p, or as the reference in your head when the
  // binomial version gives a different answer.
  //
  // Check yourself:
  // - How many additions does the root perform? (p-1)·n, alone.
  // - What happens if rank 3 passes 5 elements while the others pass 4?
  //   recv_reduce refuses a message of the wrong size and names both counts.
  // - Why does the root receive in rank order? So that float results are the
  //   same on every run; any order would give the right integer result.
  // - Which rank waits longest? The last in line, rank p-1 (or p-2 if it is
  //   the root): its synchronous send completes only when the root reaches it.
  //
  // Try it: the traffic table of a linear reduce has one busy column, the
  // root's; a binomial reduce spreads the same bytes over lg p columns.
  if (r == root) {
    // recv_reduce checks that the message has exactly data.size() elements,
    // so a rank with another count fails here instead of corrupting the sum.
    for (int src = 0; src < p; ++src)
      if (src != root) comm.recv_reduce(data, src, op, tag);
  } else {
    comm.send(data, root, tag);
  }
  // @end
}

#define DTW_INSTANTIATE(T) template void reduce_linear<T>(Comm&, std::span<T>, ReduceOp, int, int);
DTW_CH01_FOR_EACH_TYPE(DTW_INSTANTIATE)
#undef DTW_INSTANTIATE

}  // namespace dtw::ch01::detail
