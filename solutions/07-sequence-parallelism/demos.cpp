// Chapter 07's strategies for `dtw train --strategy` and `dtw bench train`
// (with the bytes formula the benchmark prints beside its measurement), its
// demos for `dtw run` and `dtw tour`, and its pitfalls for `dtw run pitfall`.
// Solution only: tools/gen-labs does not copy demos.cpp, so the pitfalls'
// broken variants (near-complete solutions of their steps) stay out of labs/.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>

#include "dtw/demo.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "sequence_parallelism.h"
#include "sp_bench.h"

namespace dtw::ch07 {
namespace {

using bench::expect_oracle;
using bench::Mine;
using train::FormulaInput;

// ---- bytes the busiest rank sends per step ------------------------------------------

// Elements of one [B, H, T/p, D] tensor on a rank: B·(T/p)·C.
double per_rank_tensor(const FormulaInput& in) {
  const model::ModelConfig c = in.spec.config();
  return static_cast<double>(in.spec.batch) * static_cast<double>(in.spec.sequence()) /
         in.ranks * static_cast<double>(c.dim);
}

// Every layer's core, forward and backward, then the ring allreduce of the
// gradients and the loss (chunk rounding aside).
double bytes_with(const FormulaInput& in, double core_elements_per_layer) {
  const double p = in.ranks, layers = static_cast<double>(in.spec.config().layers);
  const double allreduce = 2 * (p - 1) / p * static_cast<double>(in.params + 1);
  return (layers * core_elements_per_layer + allreduce) * static_cast<double>(in.element_bytes);
}
double ulysses_bytes(const FormulaInput& in) {
  return bytes_with(in, 8 * (in.ranks - 1.0) / in.ranks * per_rank_tensor(in));
}
double ring_bytes(const FormulaInput& in) {  // 4(p−1)·n + 2p·n; none at p = 1 (no ring)
  const double p = in.ranks;
  return bytes_with(in, p == 1 ? 0 : (4 * (p - 1) + 2 * p) * per_rank_tensor(in));
}
double gathered_bytes(const FormulaInput& in) {
  return bytes_with(in, 6 * (in.ranks - 1.0) * per_rank_tensor(in));
}

void register_strategy_of(Method m, const char* description,
                          std::function<double(const FormulaInput&)> bytes,
                          train::RankFunctions run) {
  train::register_strategy(
      {.name = name_of(m), .chapter = "07", .description = description, .min_ranks = 1,
       .run = std::move(run), .bytes_formula = std::move(bytes), .peak_formula = nullptr,
       .bubble_formula = nullptr,
       .check = [m](const train::RunSpec& spec, int ranks, const train::Knobs&) {
         check_sp_run(spec, ranks, m, -1);
       }});
}

// ---- demos: a strategy on gpt-tiny, checked against the reference --------------------

train::RunSpec demo_run() {
  train::RunSpec spec = train::standard_run("gpt-tiny");
  spec.steps = 3;
  spec.batch = 4;
  spec.warmup_steps = 1;
  spec.dtype = train::DType::kFloat64;
  return spec;
}

DemoCheck train_and_compare(Comm& comm, Method m) {
  const train::RunSpec spec = demo_run();
  train::RankRun<double> run(comm, spec, {});
  train_sequence_parallel(run, m);
  double most = 0;
  for (const auto& [begin, values] : run.reported()) {
    const train::ReferenceCheck c = train::compare_to_reference<double>(
        comm.rank(), spec, run.losses(), values, begin, train::kDoubleTolerance, spec.steps);
    if (!c.ok) return {false, c.message, 0};
    most = std::max(most, c.max_abs_diff);
  }
  char detail[160];
  std::snprintf(detail, sizeof detail,
                "gpt-tiny, %lld tokens cut over %d ranks: equal to the reference (max |dθ| %.1e)",
                static_cast<long long>(spec.sequence()), comm.size(), most);
  return {true, detail, 0};
}

void register_training_demo(Method m, const char* description, int max_ranks) {
  register_demo({.name = std::string(name_of(m)), .chapter = "07", .description = description,
                 .default_ranks = 4, .min_ranks = 1, .max_ranks = max_ranks,
                 .expects_deadlock = false, .catches = "",
                 .run = [m](Comm& comm) { return train_and_compare(comm, m); }});
}

// ---- pitfalls from the field, each caught by a check that names the fault ------------

// A causal ring on a contiguous split: the work table shows the last rank
// doing ~(2p−1)x the first one's pairs (zhuzilin/ring-flash-attention#2).
DemoCheck causal_ring_imbalance(Comm& comm) {
  const int p = comm.size();
  const bench::Problem pr(1, 2, 16 * p, 4);
  const Mine m(pr, comm.rank(), p, SequenceSplit::kContiguous);
  RingAttention<double> core({.comm = &comm, .seq_len = pr.seq});
  std::vector<double> out(m.q.size());
  model::CoreCache<double> cache;
  core.forward(out.data(), cache, m.q.data(), m.k.data(), m.v.data(), m.shape, m.pos, 0);
  std::vector<std::int64_t> pairs(static_cast<std::size_t>(p));
  const std::int64_t mine = core.tally().pairs;
  comm.reference_allgather(as_buffer(std::span<const std::int64_t>(&mine, 1)),
                           as_buffer(std::span<std::int64_t>(pairs)));
  std::ostringstream table;
  for (int r = 0; r < p; ++r) table << " " << pairs[static_cast<std::size_t>(r)];
  const auto [lo, hi] = std::minmax_element(pairs.begin(), pairs.end());
  DTW_CHECK_ARG(*hi == *lo, "causal ring imbalance: query-key pairs per rank" << table.str() << ": rank "
                                << hi - pairs.begin() << " does " << double(*hi) / double(*lo)
                                << "x the work of rank " << lo - pairs.begin()
                                << "; zig-zag gives every rank "
                                << pr.heads * causal_work(0, p, SequenceSplit::kZigZag, pr.seq));
  return {true, "balanced", 0};
}

// Ring attention whose hops add partial outputs without the log-sum-exp weights.
DemoCheck merge_without_lse(Comm& comm) {
  const int p = comm.size(), r = comm.rank();
  bench::Problem pr(1, 2, 8 * p, 4);
  pr.solve();
  const Mine m(pr, r, p, SequenceSplit::kContiguous);
  const std::int64_t n = static_cast<std::int64_t>(m.q.size()), rows = n / pr.head_dim;
  std::vector<double> kv = m.k, next(2 * n), out(n, 0.0), part(n), part_lse(rows);
  kv.insert(kv.end(), m.v.begin(), m.v.end());
  for (int s = 0; s < p; ++s) {
    attend_block(part.data(), part_lse.data(), m.q.data(), m.pos, kv.data(), kv.data() + n,
                 sequence_runs((r - s + p) % p, p, SequenceSplit::kContiguous, pr.seq), m.shape,
                 true);
    for (std::int64_t i = 0; i < n; ++i) out[i] += part[i];  // the bug: no rescaling
    if (s + 1 < p) {
      comm.sendrecv(kv, (r + 1) % p, next, (r + p - 1) % p, 7100);
      kv.swap(next);
    }
  }
  expect_oracle(pr, m, "out", pr.out, out, r, "partial results merged without the log-sum-exp");
  return {true, "equal", 0};
}

// The ring backward attends every hop to the K/V it started with
// (huggingface/diffusers#14265): the forward is right, the gradients are not.
DemoCheck ring_backward_first_kv(Comm& comm) {
  const int p = comm.size(), r = comm.rank();
  bench::Problem pr(1, 2, 8 * p, 4);
  pr.solve();
  const Mine m(pr, r, p, SequenceSplit::kContiguous);
  RingAttention<double> core({.comm = &comm, .seq_len = pr.seq});
  const std::int64_t n = static_cast<std::int64_t>(m.q.size());
  std::vector<double> out(n), dq(n, 0.0), acc(2 * n), in(2 * n);
  model::CoreCache<double> cache;
  core.forward(out.data(), cache, m.q.data(), m.k.data(), m.v.data(), m.shape, m.pos, 0);
  expect_oracle(pr, m, "out", pr.out, out, r, "the forward itself is wrong");
  for (int s = 0; s < p; ++s) {
    std::fill(acc.begin(), acc.end(), 0.0);
    // The bug: m.k, m.v (hop 0's block) every hop, at the positions of the hop's owner.
    attend_block_backward(dq.data(), acc.data(), acc.data() + n, m.dout.data(), out.data(),
                          cache.lse.data(), m.q.data(), m.pos, m.k.data(), m.v.data(),
                          sequence_runs((r - s + p) % p, p, SequenceSplit::kContiguous, pr.seq),
                          m.shape, true);
    if (s > 0) for (std::int64_t i = 0; i < 2 * n; ++i) acc[i] += in[i];
    if (p > 1) comm.sendrecv(acc, (r + 1) % p, in, (r + p - 1) % p, 7200);
  }
  expect_oracle(pr, m, "dq", pr.dq, dq, r,
                "the forward equals full attention, but the backward reused the first hop's K/V");
  return {true, "equal", 0};
}

// Ulysses' send buffer cut as one slice per rank (deepspeedai/DeepSpeed#5808):
// right for batch 1, batch rows and heads swapped for batch 2.
DemoCheck ulysses_transposed_reshape(Comm& comm) {
  const int p = comm.size(), r = comm.rank();
  std::string batch_one = "?";
  for (std::int64_t batch : {1, 2}) {
    bench::Problem pr(batch, 2 * p, 4 * p, 4);
    pr.solve();
    const Mine m(pr, r, p, SequenceSplit::kContiguous);
    const std::int64_t n = static_cast<std::int64_t>(m.q.size()), t = m.pos.size();
    const std::int64_t Hl = pr.heads / p, D = pr.head_dim;
    UlyssesAttention<double> core({.comm = &comm, .seq_len = pr.seq});
    const auto broken_to_heads = [&](const std::vector<double>& x) {
      std::vector<double> recv(n), heads(n);
      comm.reference_alltoall(as_buffer(std::span<const double>(x)),  // block j = x[j·n/p ...]
                              as_buffer(std::span<double>(recv)));
      for (int i = 0; i < p; ++i)
        for (std::int64_t bh = 0; bh < batch * Hl; ++bh)
          std::copy_n(recv.data() + i * (n / p) + bh * t * D, t * D,
                      heads.data() + (bh * p * t + i * t) * D);
      return heads;
    };
    const auto qh = broken_to_heads(m.q), kh = broken_to_heads(m.k), vh = broken_to_heads(m.v);
    std::vector<double> oh(n), lse(n / D), out(n);
    const TokenRuns whole{{{0, pr.seq}}};
    attend_block(oh.data(), lse.data(), qh.data(), whole, kh.data(), vh.data(), whole,
                 {batch, Hl, pr.seq, pr.seq, D}, true);
    core.to_tokens(out.data(), oh, m.shape);
    expect_oracle(pr, m, "out", pr.out, out, r,
                  "batch " + std::to_string(batch) + " (batch 1 was " + batch_one +
                      "): the all-to-all sent each rank one slice of [B, H, t, D], which "
                      "swaps batch rows and heads when B > 1");
    batch_one = "right";
  }
  return {true, "equal", 0};
}

void register_pitfall(const char* name, const char* description, const char* catches,
                      int ranks, int max_ranks, std::function<DemoCheck(Comm&)> fn) {
  register_demo({.name = name, .chapter = "07", .description = description,
                 .default_ranks = ranks, .min_ranks = 2, .max_ranks = max_ranks,
                 .expects_deadlock = false, .catches = catches, .run = std::move(fn)});
}

const bool kRegistered = [] {
  register_strategy_of(Method::kGathered, "all-gather K and V (the baseline)", gathered_bytes,
                       [](auto& run) { sp_allgather(run); });
  register_strategy_of(Method::kUlysses, "DeepSpeed-Ulysses: all-to-all to heads and back",
                       ulysses_bytes, [](auto& run) { sp_ulysses(run); });
  register_strategy_of(Method::kRing, "ring attention, contiguous split", ring_bytes,
                       [](auto& run) { sp_ring(run); });
  register_strategy_of(Method::kRingZigZag, "ring attention, zig-zag split (balanced)",
                       ring_bytes, [](auto& run) { sp_ring_zigzag(run); });
  register_training_demo(Method::kUlysses, "Ulysses on gpt-tiny (4 heads): all-to-alls", 4);
  register_training_demo(Method::kRing, "ring attention on gpt-tiny: K/V around the ring", 8);
  register_training_demo(Method::kRingZigZag, "zig-zag ring attention on gpt-tiny", 8);
  register_pitfall("causal-ring-imbalance",
                   "causal ring on a contiguous split (ring-flash-attention#2): last rank works most",
                   "causal ring imbalance", 4, 8, causal_ring_imbalance);
  register_pitfall("merge-without-lse", "ring hops summed without log-sum-exp rescaling",
                   "differs from full attention", 4, 8, merge_without_lse);
  register_pitfall("ring-backward-first-kv",
                   "ring backward reuses the first hop's K/V (diffusers#14265): gradients wrong",
                   "but the backward reused", 4, 8, ring_backward_first_kv);
  register_pitfall("ulysses-transposed-reshape",
                   "Ulysses all-to-all as one slice per rank (DeepSpeed#5808): right for batch 1 only",
                   "swaps batch rows and heads", 2, 8, ulysses_transposed_reshape);
  return true;
}();
}  // namespace

}  // namespace dtw::ch07
