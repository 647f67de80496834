// dtw bench sequence-parallelism: attention alone, sequence-parallel, on
// threads. Two tables:
//   sweep      T from 256 to 8192 on p ranks (4): per method, the time of one
//              layer's forward + backward, the bytes the busiest rank sent
//              (traffic record) beside the formula, the memory the core holds
//              per rank beside single-device attention's T×T scores, the
//              causal work max/min over the ranks, and the ring forward
//              modeled on an 8-GPU NVLink node (compute hidden or not);
//   precision  the ring in float32 against double, p = 1, 2, 4, 8, and the
//              same ring with its running output rounded to bf16 after each
//              hop: where the accumulator's precision goes as hops add up.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "bench_main.h"
#include "cli_values.h"
#include "dtw/launch.h"
#include "dtw/train/fabric.h"
#include "exit_codes.h"
#include "sp_bench.h"

namespace {

using namespace dtw;
using namespace dtw::ch07;

enum class Core { kUlysses, kRing, kRingZigZag };
const char* name(Core c) {
  return c == Core::kUlysses ? "ulysses" : c == Core::kRing ? "ring" : "ring-zigzag";
}

struct Row {
  double seconds = 0;            // one forward + backward, slowest rank
  std::int64_t bytes = 0;        // most bytes a rank sent
  std::int64_t ledger = 0;       // most communication-buffer bytes a rank held (ring)
  double imbalance = 1;          // max / min visible pairs over the ranks
  double error = 0;              // largest relative error of out and dq against double
};

// One layer's forward and backward of `core` on p ranks, in T (float or double).
template <class T>
Row run(Core core, const bench::Problem& pr, int p, bool check) {
  const SequenceSplit split = core == Core::kRingZigZag ? SequenceSplit::kZigZag
                                                       : SequenceSplit::kContiguous;
  std::vector<double> seconds(p), pairs(p), error(p);
  LaunchOptions o;
  o.timeout = std::chrono::minutes(5);
  const Report report = launch(p, o, [&](Comm& comm) {
    const int r = comm.rank();
    const TokenRuns pos = sequence_runs(r, p, split, pr.seq);
    const kernels::AttentionShape s{pr.batch, pr.heads, pos.size(), pos.size(), pr.head_dim};
    const auto q = pr.cut<T>(pr.q, pos), k = pr.cut<T>(pr.k, pos), v = pr.cut<T>(pr.v, pos),
               dout = pr.cut<T>(pr.dout, pos);
    std::vector<T> out(q.size()), dq(q.size()), dk(q.size()), dv(q.size());
    model::CoreCache<T> cache;
    const CoreSetup setup{.comm = &comm, .seq_len = pr.seq, .split = split, .causal = pr.causal};
    std::unique_ptr<model::AttentionCore<T>> c;
    const Tally* tally = nullptr;
    if (core == Core::kUlysses) {
      auto u = std::make_unique<UlyssesAttention<T>>(setup);
      tally = &u->tally();
      c = std::move(u);
    } else {
      auto g = std::make_unique<RingAttention<T>>(setup);
      tally = &g->tally();
      c = std::move(g);
    }
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    c->forward(out.data(), cache, q.data(), k.data(), v.data(), s, pos, 0);
    c->backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), cache, q.data(),
                k.data(), v.data(), s, pos, 0);
    comm.barrier();
    seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pairs[r] = static_cast<double>(tally->pairs);
    if (check)
      error[r] = std::max(pr.worst(pr.out, out, pos, 1e300, nullptr),
                          pr.worst(pr.dq, dq, pos, 1e300, nullptr));
  });
  Row row;
  row.seconds = *std::max_element(seconds.begin(), seconds.end());
  row.error = *std::max_element(error.begin(), error.end());
  const auto [lo, hi] = std::minmax_element(pairs.begin(), pairs.end());
  row.imbalance = *lo > 0 ? *hi / *lo : 0;
  for (int r = 0; r < p; ++r) {
    std::int64_t b = 0;
    for (int d = 0; d < p; ++d) b += report.traffic.bytes(r, d);
    row.bytes = std::max(row.bytes, b);
    row.ledger = std::max(row.ledger, report.memory[r].peak_of(MemoryCategory::kCommBuffers));
  }
  return row;
}

// The ring forward of one layer (32 heads of 128, bf16: a 4096-wide model,
// whatever the measured sizes) on nvlink-8's devices: hop s takes the
// longer of the slowest rank's block (its visible pairs · 4·D FLOPs) and the
// K/V message to the next rank (none after the last hop). Returns the
// modeled seconds and the share of the message time hidden behind compute.
struct LayerShape {
  std::int64_t heads = 32, head_dim = 128, seq = 0;  // a 4096-wide layer, batch 1
};
std::pair<double, double> modeled_ring(const LayerShape& pr, int p, SequenceSplit split,
                                       double element_bytes) {
  const train::Cluster& node = train::find_gpu_cluster("nvlink-8");
  const double n = static_cast<double>(pr.heads * (pr.seq / p) * pr.head_dim);
  const double message = node.intra.seconds(static_cast<std::int64_t>(2 * n * element_bytes));
  double total = 0, exposed = 0, sent = 0;
  for (int s = 0; s < p; ++s) {
    double compute = 0;
    for (int r = 0; r < p; ++r) {
      const double v = static_cast<double>(visible_pairs(
          sequence_runs(r, p, split, pr.seq), sequence_runs((r - s + p) % p, p, split, pr.seq),
          true));
      compute = std::max(compute, v * static_cast<double>(pr.heads * 4 * pr.head_dim) / node.flops);
    }
    const double comm = s + 1 < p ? message : 0;
    total += std::max(compute, comm);
    exposed += std::max(0.0, comm - compute);
    sent += comm;
  }
  return {total, sent > 0 ? 1 - exposed / sent : 1};
}

// float rounded to the nearest bfloat16 (8 bits of mantissa), ties to even.
float to_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

// Rank r's rows of the ring forward in float32, blocks in the order the ring
// delivers them, with the running output rounded to bf16 after every merge
// (the lse kept in float32): the numbers a bf16 accumulator would give. On
// one thread: the arithmetic is the ring's, only the messages are left out.
double bf16_accumulator_error(const bench::Problem& pr, int p) {
  double most = 0;
  for (int r = 0; r < p; ++r) {
    const TokenRuns pos = sequence_runs(r, p, SequenceSplit::kContiguous, pr.seq);
    const kernels::AttentionShape s{pr.batch, pr.heads, pos.size(), pos.size(), pr.head_dim};
    const auto q = pr.cut<float>(pr.q, pos);
    const std::int64_t n = static_cast<std::int64_t>(q.size()), rows = n / pr.head_dim;
    std::vector<float> out(n, 0.0f), lse(rows, -std::numeric_limits<float>::infinity());
    std::vector<float> part(n), part_lse(rows);
    for (int hop = 0; hop < p; ++hop) {
      const TokenRuns kpos = sequence_runs((r - hop + p) % p, p, SequenceSplit::kContiguous, pr.seq);
      const auto k = pr.cut<float>(pr.k, kpos), v = pr.cut<float>(pr.v, kpos);
      attend_block(part.data(), part_lse.data(), q.data(), pos, k.data(), v.data(), kpos, s, true);
      merge_partial(out.data(), lse.data(), part.data(), part_lse.data(), rows, pr.head_dim);
      for (float& x : out) x = to_bf16(x);
    }
    most = std::max(most, pr.worst(pr.out, out, pos, 1e300, nullptr));
  }
  return most;
}

double formula_bytes(Core core, const bench::Problem& pr, int p, double e) {
  const double n = static_cast<double>(pr.batch * pr.heads * (pr.seq / p) * pr.head_dim);
  if (core == Core::kUlysses) return 8 * (p - 1.0) / p * n * e;
  return p == 1 ? 0 : (4 * (p - 1.0) + 2 * p) * n * e;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("dtw bench sequence-parallelism: Ulysses and ring attention, one layer",
               "dtw bench sequence-parallelism");
  std::vector<std::int64_t> seqs = {256, 512, 1024, 2048, 4096, 8192};
  std::vector<int> worlds = {1, 2, 4, 8};
  int p = 4;
  std::int64_t heads = 4, head_dim = 16, precision_seq = 512;
  cli::add_int_list(app, "--seq", seqs, "sweep: tokens per sequence (each divisible by 2p)",
                    {16, 1 << 16});
  cli::add_int(app, "--ranks", p, "sweep: ranks (heads must divide by it)", {1, 64});
  cli::add_int(app, "--heads", heads, "attention heads", {1, 256});
  cli::add_int(app, "--head-dim", head_dim, "features per head", {1, 1024});
  cli::add_int_list(app, "--precision-ranks", worlds, "precision: ranks", {1, 64});
  cli::add_int(app, "--precision-seq", precision_seq, "precision: tokens per sequence",
               {16, 1 << 14});
  return cli::bench_main(app, argc, argv, [&] {
    for (std::int64_t t : seqs) check_setup("--seq", t, heads, p, SequenceSplit::kZigZag, true, -1);
    for (int w : worlds)
      check_setup("--precision-ranks", precision_seq, heads, w, SequenceSplit::kZigZag, false, -1);
    cli::print_rows_code();
    fmt::print("one layer's attention, forward + backward, float32, batch 1, {} heads of {}, "
               "p = {} (threads);\nthe nvlink-8 columns model the ring forward of a 32 x 128-head "
               "layer in 2-byte elements on nvlink-8's devices\n", heads, head_dim, p);
    fmt::print("{:>6} {:<12} {:>9} {:>12} {:>12} {:>11} {:>12} {:>9} {:>12} {:>8}\n", "T",
               "method", "time ms", "sent/rank", "formula", "ring bufs", "T² scores", "max/min",
               "nvlink-8 µs", "hidden");
    for (std::int64_t t : seqs) {
      const bench::Problem pr(1, heads, t, head_dim);
      const double scores = static_cast<double>(heads * t * t * 4);
      for (Core c : {Core::kUlysses, Core::kRing, Core::kRingZigZag}) {
        const Row row = run<float>(c, pr, p, false);
        std::string modeled = "-", hidden = "-";
        if (c != Core::kUlysses) {
          const auto [s, h] = modeled_ring({.seq = t}, p,
                                           c == Core::kRing ? SequenceSplit::kContiguous
                                                            : SequenceSplit::kZigZag, 2);
          modeled = fmt::format("{:.1f}", s * 1e6);
          hidden = fmt::format("{:.0f}%", 100 * h);
        }
        fmt::print("{:>6} {:<12} {:>9.1f} {:>10.0f}Ki {:>10.0f}Ki {:>9.0f}Ki {:>10.0f}Ki {:>9.2f} {:>12} {:>8}\n",
                   t, name(c), row.seconds * 1e3, row.bytes / 1024.0,
                   formula_bytes(c, pr, p, 4) / 1024.0, row.ledger / 1024.0, scores / 1024.0,
                   row.imbalance, modeled, hidden);
      }
    }
    fmt::print("\nring attention in float32 against double, T = {}, batch 1, {} heads of {}\n",
               precision_seq, heads, head_dim);
    fmt::print("{:>5} {:>22} {:>22} {:>26}\n", "p", "max rel. error (ring)", "(ring-zigzag)",
               "(running output in bf16)");
    bench::Problem pr(1, heads, precision_seq, head_dim);
    pr.solve();
    for (int w : worlds) {
      const Row a = run<float>(Core::kRing, pr, w, true), b = run<float>(Core::kRingZigZag, pr, w, true);
      fmt::print("{:>5} {:>22.3e} {:>22.3e} {:>26.3e}\n", w, a.error, b.error,
                 bf16_accumulator_error(pr, w));
    }
    return cli::kExitOk;
  });
}
