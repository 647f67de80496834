// Interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", 2021): each rank runs v chunks
// that are p apart (rank r: chunks r, r+p, …), so a micro-batch visits every
// rank v times on its way through the model.
//
// Why it helps: the bubble is the time the pipeline takes to fill and drain,
// p−1 "stage times" at each end. A chunk is 1/v of a stage, so filling takes
// (p−1) chunk times = (p−1)/v stage times while the work per rank stays m
// stage times:
//
//     bubble = ((p−1)/v) / (m + (p−1)/v) = (p−1) / (v·m + p − 1)     (m ≥ p)
//
// The price: v times as many messages (each micro-batch crosses p·v − 1
// chunk boundaries instead of p − 1), and the activations of the first
// chunks wait longer. With m < p interleaving gains nothing: a group of m
// micro-batches leaves every rank idle p − m chunk times per lap.
//
// The order, p = 2, v = 2, m = 4 (chunk 0, 1 on rank 0, 1; chunks 2, 3 on
// rank 0, 1 again; "F2'" is micro-batch 2 in the rank's second chunk):
// micro-batches go through in groups of p, each group first through the
// rank's first chunk, then its second, …; backwards visit the chunks in the
// opposite order:
//
//     forwards  rank r:  F0 F1 F0' F1'  F2 F3 F2' F3'
//     backwards rank r:  B0' B1' B0 B1  B2' B3' B2 B3
//
// and the rank runs them 1F1B-style: a warm-up of forwards, then one forward
// one backward, then the remaining backwards. The warm-up is Megatron's:
// micro-batch 0 must get through the rank's first v−1 chunks together with
// its group ((v−1)·group forwards), and then its gradient must travel down
// to the last rank and back up (2(p−r−1) more).
//
// When m is not a multiple of p, the groups cannot all be p. A last group
// smaller than p makes that warm-up too short for the dependencies (p = 4,
// m = 5, v = 3 deadlocks); a last group larger than p makes ranks reach a
// backward before its forward. Putting the remainder into the *first* group
// (p + m mod p micro-batches, then groups of p; one group of m when m ≤ p)
// and counting the warm-up with the first group's size keeps every list
// valid and deadlock-free, with exactly the bubble above: a dry run
// (check_schedule) confirms it for every p ≤ 10, m ≤ 48, v ≤ 5, and the
// tests sweep a part of that on every run.
#include <algorithm>
#include <utility>
#include <vector>

#include "dtw/errors.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05 {

Schedule interleaved_schedule(int p, int m, int v) {
  DTW_CHECK_ARG(p >= 1 && m >= 1 && v >= 1, "interleaved schedule: p = "
                                                << p << ", m = " << m << ", v = " << v
                                                << ": each must be at least 1");
  Schedule s;
  s.kind = ScheduleKind::kInterleaved;
  s.ranks = p;
  s.micro_batches = m;
  s.virtual_stages = v;
  s.actions.resize(static_cast<std::size_t>(p));
  // @lab 05.4: Interleaved 1F1B: order each rank's forwards and backwards over its v chunks, then run them 1F1B-style.
  // @hint 1: Each rank runs v chunks p apart, so a micro-batch visits every rank v times.
  // @hint 1: Micro-batches go through in groups: a group passes through the rank's first chunk,
  // @hint 1: then its second, and so on, and the backwards visit the chunks in the opposite order.
  // @hint 1: The rank runs them 1F1B-style: a warm-up, one forward one backward, the rest. The
  // @hint 1: remainder of m over p goes into the first group.
  // @hint 2: groups: the first of p + m mod p micro-batches (all m when m ≤ p), then groups of p.
  // @hint 2: Per rank r, forwards: for each group, for k = 0 … v−1, the group's micro-batches on
  // @hint 2: chunk r + k·p; backwards the same with k = v−1 … 0. Warm up with min(m·v, 2(p − r − 1)
  // @hint 2: + (v − 1)·g) forwards, g the first group's size; then alternate; then the remaining
  // @hint 2: backwards. Trap: a smaller last group makes the warm-up too short (p = 4, m = 5, v = 3
  // @hint 2: deadlocks); a larger one reaches a backward before its forward.
  // @hint 3: s.forward(chunk, mb) and s.backward(chunk, mb) for the (chunk, mb) pairs of the two
  // @hint 3: orders, kept in two std::vector<std::pair<int, int>>.
  std::vector<std::pair<int, int>> groups;  // (first micro-batch, size)
  groups.push_back({0, m <= p ? m : p + m % p});
  for (int first = groups[0].second; first < m; first += p) groups.push_back({first, p});
  for (int r = 0; r < p; ++r) {
    std::vector<std::pair<int, int>> forwards, backwards;  // (chunk, mb)
    for (const auto& [first, size] : groups) {
      for (int k = 0; k < v; ++k)
        for (int mb = first; mb < first + size; ++mb) forwards.push_back({r + k * p, mb});
      for (int k = v - 1; k >= 0; --k)
        for (int mb = first; mb < first + size; ++mb) backwards.push_back({r + k * p, mb});
    }
    const int total = m * v;
    const int warmup = std::min(total, 2 * (p - r - 1) + (v - 1) * groups.front().second);
    int f = 0, b = 0;
    for (; f < warmup; ++f) s.forward(forwards[f].first, forwards[f].second);
    while (f < total) {
      s.forward(forwards[f].first, forwards[f].second);
      ++f;
      s.backward(backwards[b].first, backwards[b].second);
      ++b;
    }
    for (; b < total; ++b) s.backward(backwards[b].first, backwards[b].second);
  }
  // @end
  return s;
}

}  // namespace dtw::ch05
