// Who holds which tokens, and how much causal work that gives each rank.
//
// Contiguous: rank r holds one run of T/p tokens. Simple, but under a causal
// mask a query at position i looks at i + 1 keys, so the rank holding the
// end of the sequence does far more work than the rank holding its start:
//
//     T = 8, p = 4        rank 0   rank 1   rank 2   rank 3
//     positions           0 1      2 3      4 5      6 7
//     visible pairs       1+2=3    3+4=7    5+6=11   7+8=15     (max/min 5)
//
// Zig-zag: cut the sequence into 2p chunks and give rank r chunk r (early,
// cheap) and chunk 2p−1−r (late, dear): the two always add up the same.
//
//     T = 8, p = 4, c = 1  rank 0   rank 1   rank 2   rank 3
//     positions           0, 7     1, 6     2, 5     3, 4
//     visible pairs       1+8=9    2+7=9    3+6=9    4+5=9      (max/min 1)
#include <sstream>

#include "sequence_parallelism.h"

namespace dtw::ch07 {
namespace {

const char* split_name(SequenceSplit split) {
  return split == SequenceSplit::kZigZag ? "zig-zag" : "contiguous";
}

}  // namespace

TokenRuns sequence_runs(int r, int p, SequenceSplit split, std::int64_t seq_len) {
  DTW_CHECK_ARG(p >= 1 && r >= 0 && r < p,
                "sequence_runs: rank " << r << " is not one of the " << p << " ranks");
  const std::int64_t parts = split == SequenceSplit::kZigZag ? 2 * p : p;
  DTW_CHECK_ARG(seq_len > 0 && seq_len % parts == 0,
                "rank " << r << ": a sequence of " << seq_len << " tokens does not cut into "
                        << parts << (split == SequenceSplit::kZigZag ? " zig-zag chunks (2p, p = "
                                                                     : " equal parts (p = ")
                        << p << ")");
  TokenRuns out;
  if (split == SequenceSplit::kContiguous) {
    DTW_TODO("07.1: Give rank r its one run of T/p consecutive positions.");
  } else {
    DTW_TODO("07.4: Give rank r the zig-zag chunks r and 2p-1-r, in that order.");
  }
  return out;
}

std::int64_t causal_work(int r, int p, SequenceSplit split, std::int64_t seq_len) {
  sequence_runs(r, p, split, seq_len);  // the same checks, the same message
  DTW_TODO("07.4: Predict rank r's causal work in query-key pairs, in closed form.");
}

namespace {
std::string describe(const TokenRuns& t) {
  std::ostringstream o;
  for (const auto& r : t.runs) o << "[" << r.begin << ", " << r.end << ")";
  return o.str();
}
}  // namespace

std::vector<TokenRuns> runs_of_every_rank(const CoreSetup& setup, const TokenRuns& mine) {
  const int p = setup.comm->size(), r = setup.comm->rank();
  std::vector<TokenRuns> all;
  // The model's shards (which sequence_runs must equal): the cores do not
  // depend on the lab's sequence_runs, so Ulysses and the ring run on a
  // zig-zag split before 07.4 is written.
  for (int o = 0; o < p; ++o)
    all.push_back(model::ModelShard::sequence(o, p, setup.split).positions(setup.seq_len));
  // The same positions in the same local order (the model merges adjacent runs).
  const TokenRuns& own = all[static_cast<std::size_t>(r)];
  bool same = own.size() == mine.size();
  for (std::int64_t t = 0; same && t < own.size(); ++t) same = own.position(t) == mine.position(t);
  DTW_CHECK_ARG(same, "rank " << r << " of " << p << ": the " << split_name(setup.split)
                              << " split of " << setup.seq_len << " tokens gives this rank "
                              << describe(all[static_cast<std::size_t>(r)])
                              << " but it holds the tokens at " << describe(mine)
                              << " (sequence_runs must give the model's runs, in its order)");
  return all;
}

void check_setup(const char* method, std::int64_t seq_len, std::int64_t heads, int p,
                 SequenceSplit split, bool ulysses, int rank) {
  std::ostringstream who;
  who << method << (rank >= 0 ? " on rank " + std::to_string(rank) : std::string()) << ", p = "
      << p << ": ";
  const std::int64_t parts = split == SequenceSplit::kZigZag ? 2 * p : p;
  DTW_CHECK_ARG(seq_len > 0 && seq_len % parts == 0,
                who.str() << "a sequence of " << seq_len << " tokens does not cut into " << parts
                          << " " << split_name(split) << " parts");
  if (!ulysses) return;
  DTW_CHECK_ARG(p <= heads, who.str() << "Ulysses gives each rank whole heads, and " << p
                                      << " ranks exceed the " << heads << " heads");
  DTW_CHECK_ARG(heads % p == 0, who.str() << "Ulysses needs the heads divisible by the ranks: "
                                          << heads << " heads do not split over " << p
                                          << " ranks");
}

}  // namespace dtw::ch07
