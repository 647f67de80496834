#pragma once
// What chapter 07's tests share: random attention inputs, single-device
// attention in double as the oracle (kernels/attention.h), a launch that runs
// a sequence-parallel core's forward and backward on every rank's tokens and
// compares out, lse, dq, dk and dv with the oracle's rows of those tokens,
// naming the tensor, the sequence, the head and the position of the first
// difference; and the small training runs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dtw/train/reference.h"
#include "dtw_expect_error.h"
#include "dtw_train_test.h"
#include "sequence_parallelism.h"

namespace dtw::ch07::testing {

/// One attention problem: B sequences of T tokens, H heads of D features.
struct Problem {
  std::int64_t batch = 1, heads = 4, seq = 16, head_dim = 4;
  bool causal = true;
  SequenceSplit split = SequenceSplit::kContiguous;
  /// Take every rank's positions from the model's shard instead of the lab's
  /// sequence_runs (a test of another step than 07.4 on a zig-zag split).
  bool model_runs = false;
  /// Rank r's positions: sequence_runs, or the model's shard with model_runs.
  TokenRuns runs(int r, int p) const {
    return model_runs ? model::ModelShard::sequence(r, p, split).positions(seq)
                      : sequence_runs(r, p, split, seq);
  }
  std::string describe(int p) const {
    std::ostringstream o;
    o << "p " << p << ", batch " << batch << ", heads " << heads << ", T " << seq << ", D "
      << head_dim << (causal ? ", causal" : ", not causal")
      << (split == SequenceSplit::kZigZag ? ", zig-zag" : ", contiguous");
    return o.str();
  }
};

/// The whole problem's tensors and the oracle's answers, in double.
struct Whole {
  std::vector<double> q, k, v, dout, out, lse, dq, dk, dv;
};

inline std::vector<double> random_values(std::int64_t n, unsigned seed, double scale = 1) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (double& e : x) e = dist(gen);
  return x;
}

/// Single-device attention on the whole sequence: plain forward and backward,
/// and the log-sum-exp of every row from the blockwise kernel over one block.
inline Whole oracle(const Problem& pr) {
  const std::int64_t n = pr.batch * pr.heads * pr.seq * pr.head_dim;
  Whole w;
  w.q = random_values(n, 1, 1.5);
  w.k = random_values(n, 2, 1.5);
  w.v = random_values(n, 3);
  w.dout = random_values(n, 4);
  const kernels::AttentionShape s{pr.batch, pr.heads, pr.seq, pr.seq, pr.head_dim};
  std::vector<double> probs(static_cast<std::size_t>(pr.batch * pr.heads * pr.seq * pr.seq));
  std::vector<double> tmp(static_cast<std::size_t>(n));
  w.out.resize(tmp.size());
  w.lse.resize(static_cast<std::size_t>(n / pr.head_dim));
  w.dq.resize(tmp.size());
  w.dk.resize(tmp.size());
  w.dv.resize(tmp.size());
  kernels::attention_forward(w.out.data(), probs.data(), w.q.data(), w.k.data(), w.v.data(), s,
                             pr.causal);
  kernels::attention_block_forward(tmp.data(), w.lse.data(), w.q.data(), w.k.data(), w.v.data(),
                                   s, 0, 0, pr.causal);
  kernels::attention_backward(w.dq.data(), w.dk.data(), w.dv.data(), w.dout.data(), probs.data(),
                              w.q.data(), w.k.data(), w.v.data(), s);
  return w;
}

/// The rows of `x` ([B, H, T, D], D values per row; D = 1 for the lse) at
/// positions `pos`, in local order.
template <class T>
std::vector<T> cut(const std::vector<double>& x, const Problem& pr, const TokenRuns& pos,
                   std::int64_t d) {
  std::vector<T> out;
  for (std::int64_t bh = 0; bh < pr.batch * pr.heads; ++bh)
    for (const auto& r : pos.runs)
      for (std::int64_t i = r.begin; i < r.end; ++i)
        for (std::int64_t e = 0; e < d; ++e)
          out.push_back(static_cast<T>(x[static_cast<std::size_t>((bh * pr.seq + i) * d + e)]));
  return out;
}

/// "" when got equals expected within tol (relative to max(1, |expected|));
/// otherwise the first difference: "rank 1, dk[sequence 0, head 2, position
/// 13, feature 1]: expected 0.25, got 0.5".
template <class T>
std::string first_difference(int rank, const char* tensor, const std::vector<double>& expected,
                             const T* got, const Problem& pr, const TokenRuns& pos,
                             std::int64_t d, double tol) {
  std::int64_t at = 0;
  for (std::int64_t bh = 0; bh < pr.batch * pr.heads; ++bh)
    for (const auto& r : pos.runs)
      for (std::int64_t i = r.begin; i < r.end; ++i)
        for (std::int64_t e = 0; e < d; ++e, ++at) {
          const double x = expected[static_cast<std::size_t>((bh * pr.seq + i) * d + e)];
          const double g = static_cast<double>(got[at]);
          const bool both_inf = std::isinf(x) && std::isinf(g) && (x < 0) == (g < 0);
          if (!both_inf && !(std::abs(x - g) <= tol * std::max(1.0, std::abs(x)))) {
            std::ostringstream o;
            o << "rank " << rank << ", " << tensor << "[sequence " << bh / pr.heads << ", head "
              << bh % pr.heads << ", position " << i;
            if (d > 1) o << ", feature " << e;
            o << "]: expected " << x << ", got " << g;
            return o.str();
          }
        }
  return {};
}

/// Expects that no rank of the launch failed (a deadlock, a timeout, a send
/// never waited for), showing the first error: read a report's traffic and
/// memory only when this is true, or a deadlock reads as a byte count.
inline bool no_rank_failed(const Report& report) {
  if (report.ok()) return true;
  const RankError& e = report.errors.front();
  ADD_FAILURE() << "rank " << e.rank << " failed (" << e.kind
                << "), so the launch's traffic and memory are not checked: " << e.message;
  return false;
}

/// Which core a test runs.
enum class Kind { kUlysses, kRing, kGathered };

/// Checks a rank's tally inside the rank (so the MPI twin checks every process).
using TallyCheck = std::function<void(int rank, const Tally& tally)>;

/// Runs the core's forward and backward on p ranks and compares out, lse
/// (ring and gathered: the rank's rows; Ulysses: the rank's heads over the
/// whole sequence), dq, dk, dv with the oracle. Returns the launch's report.
template <class T>
Report run_core(Kind kind, const Problem& pr, int p, double tol, const TallyCheck& check = {}) {
  const Whole w = oracle(pr);
  const Report report = dtw::testing::launch_bounded(p, [&](Comm& comm) {
    const int r = comm.rank();
    const TokenRuns pos = pr.runs(r, p);
    const kernels::AttentionShape s{pr.batch, pr.heads, pos.size(), pos.size(), pr.head_dim};
    const std::vector<T> q = cut<T>(w.q, pr, pos, pr.head_dim), k = cut<T>(w.k, pr, pos, pr.head_dim),
                         v = cut<T>(w.v, pr, pos, pr.head_dim),
                         dout = cut<T>(w.dout, pr, pos, pr.head_dim);
    std::vector<T> out(q.size()), dq(q.size()), dk(q.size()), dv(q.size());
    model::CoreCache<T> cache;
    const CoreSetup setup{.comm = &comm, .seq_len = pr.seq, .split = pr.split, .causal = pr.causal};
    std::unique_ptr<model::AttentionCore<T>> core;
    const Tally* tally = nullptr;
    if (kind == Kind::kUlysses) {
      auto c = std::make_unique<UlyssesAttention<T>>(setup);
      tally = &c->tally();
      core = std::move(c);
    } else if (kind == Kind::kRing) {
      auto c = std::make_unique<RingAttention<T>>(setup);
      tally = &c->tally();
      core = std::move(c);
    } else {
      auto c = std::make_unique<GatheredAttention<T>>(setup);
      tally = &c->tally();
      core = std::move(c);
    }
    core->forward(out.data(), cache, q.data(), k.data(), v.data(), s, pos, 0);
    core->backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), cache, q.data(),
                   k.data(), v.data(), s, pos, 0);
    const std::int64_t D = pr.head_dim;
    std::string bad = first_difference(r, "out", w.out, out.data(), pr, pos, D, tol);
    if (bad.empty()) {
      if (kind == Kind::kUlysses) {
        // The head side's lse: heads [r·H/p, (r+1)·H/p) over every rank's tokens in rank order.
        Problem mine = pr;
        mine.heads = pr.heads / p;
        std::vector<double> expected;
        for (std::int64_t b = 0; b < pr.batch; ++b)
          for (std::int64_t h = r * mine.heads; h < (r + 1) * mine.heads; ++h)
            for (int o = 0; o < p; ++o)
              for (const auto& run : pr.runs(o, p).runs)
                for (std::int64_t i = run.begin; i < run.end; ++i)
                  expected.push_back(w.lse[static_cast<std::size_t>((b * pr.heads + h) * pr.seq + i)]);
        Problem flat{.batch = 1, .heads = 1, .seq = static_cast<std::int64_t>(expected.size())};
        bad = first_difference(r, "lse (head side)", expected, cache.lse.data(), flat,
                               TokenRuns{{{0, flat.seq}}}, 1, tol);
      } else {
        bad = first_difference(r, "lse", w.lse, cache.lse.data(), pr, pos, 1, tol);
      }
    } else if (kind == Kind::kRing &&
             first_difference(r, "lse", w.lse, cache.lse.data(), pr, pos, 1, tol).empty())
      bad += " (lse is right, out is not: the merge weighs each side's output by "
             "e^(lse_side − lse), lse the merged log-sum-exp, never adds them as they are)";
    if (bad.empty()) {
      bad = first_difference(r, "dq", w.dq, dq.data(), pr, pos, D, tol);
      if (!bad.empty() && kind == Kind::kRing)
        bad += " (the forward is right, dq is not: each hop's backward must use that hop's K/V "
               "block, the one received on that hop, not the first hop's)";
    }
    for (const auto& [name, expected, got] :
         {std::tuple{"dk", &w.dk, dk.data()}, std::tuple{"dv", &w.dv, dv.data()}}) {
      if (!bad.empty()) break;
      bad = first_difference(r, name, *expected, got, pr, pos, D, tol);
      if (bad.empty() || kind != Kind::kRing) continue;
      // A neighbour block's whole gradient on this rank: the sum stopped one hop short.
      for (int o = 0; o < p; ++o)
        if (o != r && first_difference(r, name, *expected, got, pr, pr.runs(o, p), D, tol).empty()) {
          bad += " -- it is rank " + std::to_string(o) + "'s block's " + name +
                 ": the running dK/dV must travel p hops to return to its owner (after the "
                 "last block, receive your own block's sum from the left)";
          break;
        }
    }
    if (!bad.empty()) ADD_FAILURE() << bad;
    if (check) check(r, *tally);
  });
  // The ring's messages: a send never waited for is not counted (and may be
  // withdrawn), whether or not the numbers came out right.
  if (kind == Kind::kRing && p > 1 && no_rank_failed(report))
    for (int r = 0; r < p; ++r) {
      const int right = (r + 1) % p;
      const std::int64_t hops = 3 * p - 2;
      if (report.traffic.messages(r, right) == hops) continue;
      ADD_FAILURE() << "rank " << r << " completed " << report.traffic.messages(r, right)
                    << " sends to rank " << right << ", a layer sends " << hops
                    << " (3p − 2): a send whose Request is dropped or assigned over before "
                    << "wait is withdrawn or never counted. Wait for every isend before "
                    << "reusing its buffer or its Request.";
      break;
    }
  return report;
}

/// Bytes rank r sent in a launch, from the traffic record.
inline std::int64_t bytes_sent(const Report& report, int r) {
  std::int64_t b = 0;
  for (int d = 0; d < report.world_size; ++d) b += report.traffic.bytes(r, d);
  return b;
}

/// gpt-tiny in double, `steps` steps of `batch` sequences of `seq` tokens.
inline train::RunSpec tiny(std::int64_t seq = 32, std::int64_t steps = 3, std::int64_t batch = 3) {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = steps;
  spec.batch = batch;
  spec.seq_len = seq;
  spec.warmup_steps = 1;
  spec.clip_norm = 0.05;  // binds: a wrongly summed gradient would show in the norm
  spec.dtype = train::DType::kFloat64;
  return spec;
}

inline train::HarnessOptions on(int ranks) {
  train::HarnessOptions o;
  o.ranks = ranks;
  o.timeout = std::chrono::seconds(20);
  return o;
}

/// Trains `strategy` and expects the reference's parameters and losses.
inline train::RunOutcome expect_matches(const train::RunSpec& spec, int p,
                                        const std::function<void(train::RankRun<double>&)>& strategy) {
  DTW_TRACE_RUN(spec, p, train::Knobs{});
  const train::RunOutcome out = train::run_ranks<double>(spec, on(p), strategy);
  if (!no_rank_failed(out.report)) return out;
  EXPECT_TRUE(out.matches) << "T " << spec.sequence() << " on " << p << " ranks: " << out.mismatch;
  EXPECT_EQ(out.losses.size(), static_cast<std::size_t>(spec.steps));
  return out;
}

// The bad-input check shared by the training chapters (tests/support).
using dtw::testing::expect_error;

}  // namespace dtw::ch07::testing
