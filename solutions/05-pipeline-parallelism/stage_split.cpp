// The stage split: which units of the model each pipeline chunk runs, and what
// a rank must hold to run its chunks.
//
// A pipeline is only as fast as its slowest stage: every micro-batch passes
// through all of them, so in the steady state each stage waits for the
// slowest one. Cutting the model is therefore a *linear partition* problem:
// split a sequence of unit costs into k contiguous runs whose largest sum is
// as small as possible. Contiguous, because a stage sends exactly one tensor
// to the next; runs of whole units, because a unit is what a StagePass runs.
//
// What "cost" means is the learner's choice, and the chapter's lesson:
// - parameters balance memory (what DeepSpeed's partition_method="parameters"
//   does), but not time: gpt-tiny's embedding holds 8 192 parameters and
//   does no matrix product, while its head holds 128 and multiplies by the
//   whole 96 × 64 vocabulary;
// - measured time balances the pipeline, but a measurement differs from rank
//   to rank and run to run, so one rank measures and broadcasts: ranks that
//   cut the model differently send tensors nobody expects;
// - equal blocks per chunk (Megatron) is simple and needs blocks % (p·v) = 0.
//
// A split of p·v chunks is placed round-robin: chunk c runs on rank c mod p.
// With v = 1 that is stage s on rank s; with v > 1 each rank runs v chunks
// that are p apart (interleaving, step 05.4).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "collectives.h"  // chapter 01's broadcast (DEPENDS 01)
#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "dtw/train/network.h"
#include "pipeline_parallelism.h"

namespace dtw::ch05 {

std::vector<model::UnitRange> split_units(std::span<const double> costs, int chunks) {
  const int n = static_cast<int>(costs.size());
  DTW_CHECK_ARG(chunks >= 1 && chunks <= n, "split_units: " << chunks << " chunks of " << n
                                                            << " units: need 1 <= chunks <= units");
  for (int u = 0; u < n; ++u)
    DTW_CHECK_ARG(std::isfinite(costs[u]) && costs[u] >= 0,
                  "split_units: unit " << u << " costs " << costs[u] << " (must be finite, >= 0)");
  std::vector<double> prefix(static_cast<std::size_t>(n) + 1, 0.0);
  for (int u = 0; u < n; ++u) prefix[u + 1] = prefix[u] + costs[u];
  auto sum = [&](int a, int b) { return prefix[b] - prefix[a]; };  // units [a, b)
  std::vector<model::UnitRange> runs;
  // @lab 05.1: Cut the units into `chunks` contiguous runs whose most expensive run is as cheap as possible.
  // @hint 1: Cutting a model for a pipeline is the linear partition problem: cut the sequence of
  // @hint 1: unit costs into contiguous runs whose largest sum is as small as possible, because the
  // @hint 1: slowest stage sets the pace. Every rank must compute the same cut.
  // @hint 2: A small dynamic programme: best[j][i] is the smallest bottleneck (the cost of the most
  // @hint 2: expensive run) of units [i, n) cut into j runs, with best[0][n] = 0 and infinity where
  // @hint 2: no cut exists; try every end b of the first run: max(sum(i, b), best[j-1][b]).
  // @hint 2: best[chunks][0] is the bottleneck. Many cuts reach it: walk from the left and give
  // @hint 2: each run the longest [a, b) whose sum and whose rest best[j-1][b] both stay within it
  // @hint 2: (at least one unit per run left).
  // @hint 3: sum(a, b) is the cost of units [a, b) from the prefix sums;
  // @hint 3: std::numeric_limits<double>::infinity(); push each run into `runs` as {a, b}.
  const double inf = std::numeric_limits<double>::infinity();
  // best[j][i]: the smallest possible "most expensive run" when units [i, n)
  // are cut into j runs (inf when impossible). The recurrence tries every
  // length of the first run: O(k·n²), nothing for a model's few dozen units.
  std::vector<std::vector<double>> best(static_cast<std::size_t>(chunks) + 1,
                                        std::vector<double>(static_cast<std::size_t>(n) + 1, inf));
  best[0][n] = 0;
  for (int j = 1; j <= chunks; ++j)
    for (int i = 0; i + j <= n; ++i)
      for (int b = i + 1; b + (j - 1) <= n; ++b)
        best[j][i] = std::min(best[j][i], std::max(sum(i, b), best[j - 1][b]));
  const double bottleneck = best[chunks][0];
  // Any cut whose runs all fit under the bottleneck is optimal; taking the
  // longest first run that still leaves a feasible rest makes the answer
  // unique, so every rank computes the same split.
  int a = 0;
  for (int j = chunks; j >= 1; --j) {
    int b = n - (j - 1);
    while (b > a + 1 && (sum(a, b) > bottleneck || best[j - 1][b] > bottleneck)) --b;
    runs.push_back({a, b});
    a = b;
  }
  // @end
  return runs;
}

std::vector<int> StageMap::chunks_of(int rank) const {
  std::vector<int> out;
  for (int c = rank; c < chunk_count(); c += ranks) out.push_back(c);
  return out;
}

std::string StageMap::describe(const std::vector<model::Unit>& units) const {
  std::string s;
  for (const model::UnitRange& c : chunks) {
    s += s.empty() ? "[" : " [";
    for (int u = c.begin; u < c.end; ++u) s += (u > c.begin ? " " : "") + units[u].name;
    s += "]";
  }
  return s;
}

train::ReplicaPlan stage_plan(const StageMap& map, const std::vector<model::Unit>& units,
                              std::int64_t tied_wte_end, int rank) {
  DTW_CHECK_ARG(rank >= 0 && rank < map.ranks,
                "stage_plan: rank " << rank << " outside [0, " << map.ranks << ")");
  train::ReplicaPlan plan;
  // @lab 05.1: List the flat ranges this rank holds: its chunks' units, and the tied head's copy of wte.
  // @hint 1: A rank holds the parameters, gradients and optimizer state of its own chunks' units,
  // @hint 1: and nothing else; with a tied head, the rank of the last chunk also holds a copy of
  // @hint 1: the embedding table, which it uses but never steps.
  // @hint 2: for each of the rank's chunks: the flat range from its first unit's begin to its last
  // @hint 2: unit's end, merged into the previous range when they touch; those ranges are params,
  // @hint 2: grads and optimizer alike. Then, when the head is tied and the last chunk's rank is
  // @hint 2: not chunk 0's: [0, tied_wte_end) goes first in params and grads, not in optimizer.
  // @hint 2: Trap: with optimizer state there, wte would be stepped twice and counted twice in the
  // @hint 2: clipping norm.
  // @hint 3: map.chunks_of(rank), map.chunks[c] (a UnitRange), units[u].begin / .end,
  // @hint 3: map.rank_of(chunk), plan.params.insert(plan.params.begin(), {0, tied_wte_end}).
  std::vector<train::Range> ranges;
  for (int c : map.chunks_of(rank)) {
    const model::UnitRange& run = map.chunks[c];
    const train::Range r{units[run.begin].begin, units[run.end - 1].end};
    if (!ranges.empty() && ranges.back().end == r.begin) ranges.back().end = r.end;
    else ranges.push_back(r);
  }
  plan.params = plan.grads = plan.optimizer = ranges;
  // The tied head multiplies by wte, which lives in the embedding on chunk 0.
  // The head's rank keeps a copy: it adds its share of wte's gradient there,
  // sends it to the embedding's rank (which alone steps wte, so the clipping
  // norm counts wte once) and receives the stepped wte back (Megatron keeps
  // both copies and allreduces the two shares instead).
  const int last = map.chunk_count() - 1;
  if (tied_wte_end > 0 && map.rank_of(last) == rank && map.rank_of(0) != rank) {
    plan.params.insert(plan.params.begin(), {0, tied_wte_end});
    plan.grads.insert(plan.grads.begin(), {0, tied_wte_end});
  }
  // @end
  return plan;
}

const char* name_of(Balance balance) {
  switch (balance) {
    case Balance::kParams: return "params";
    case Balance::kTime: return "time";
    case Balance::kBlocks: return "blocks";
    case Balance::kFlops: return "flops";
  }
  return "?";
}

Balance balance_from_name(std::string_view name) {
  for (Balance b : {Balance::kParams, Balance::kTime, Balance::kBlocks, Balance::kFlops})
    if (name == name_of(b)) return b;
  DTW_CHECK_ARG(false, "balance=" << name << ": expected params, time, blocks or flops");
  return Balance::kParams;
}

namespace {

// Rank 0's measurement of one forward and backward per unit, on a probe
// replica of that unit alone (not counted in the rank's memory ledger).
template <class T>
std::vector<double> time_units(const train::RunSpec& spec, int micro_batches) {
  const model::ModelConfig config = spec.config();
  const model::ParamLayout layout = model::param_layout(config);
  const std::vector<model::Unit> units = model::model_units(config, layout);
  const int n = static_cast<int>(units.size());
  const bool tied = model::head_is_tied(config);
  const train::Batch batch = train::make_batch(spec, 0, 0, micro_batches);
  std::vector<double> seconds;
  for (int u = 0; u < n; ++u) {
    std::vector<train::Range> held{{units[u].begin, units[u].end}};
    if (tied && u == n - 1 && u > 0) held.insert(held.begin(), {0, layout.find("wte").size});
    train::Replica<T> probe(spec, Exec::host(), train::ReplicaPlan::ranges(held));
    train::StagePass<T> pass(probe);
    const std::vector<T> x(static_cast<std::size_t>(
        u > 0 ? probe.network().boundary_elements(u, batch) : 0));
    const std::vector<T> dy(static_cast<std::size_t>(
        u < n - 1 ? probe.network().boundary_elements(u + 1, batch) : 0));
    double fastest = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < 4; ++rep) {  // the first warms caches; keep the fastest
      const auto t0 = std::chrono::steady_clock::now();
      pass.forward({u, u + 1}, batch, x);
      pass.backward(dy, T(1));
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
      if (rep > 0) fastest = std::min(fastest, took.count());
    }
    seconds.push_back(fastest);
  }
  return seconds;
}

}  // namespace

std::vector<double> unit_costs(const train::RunSpec& spec, Balance balance, int micro_batches,
                               Comm* comm) {
  DTW_CHECK_ARG(balance != Balance::kBlocks, "unit_costs: balance=blocks counts blocks, not costs");
  DTW_CHECK_ARG(balance != Balance::kTime || comm != nullptr,
                "unit_costs: balance=time measures on rank 0 and needs the ranks' communicator");
  const model::ModelConfig config = spec.config();
  const std::vector<model::Unit> units = model::model_units(config, model::param_layout(config));
  std::vector<double> costs(units.size());
  if (balance == Balance::kParams) {
    for (std::size_t u = 0; u < units.size(); ++u) costs[u] = static_cast<double>(units[u].size());
    return costs;
  }
  if (balance == Balance::kFlops) {
    // Counted, not measured: every rank computes the same costs on its own.
    const auto net = train::Network<double>::make(config);
    const train::Batch batch = train::make_batch(spec, 0, 0, micro_batches);
    for (int u = 0; u < static_cast<int>(units.size()); ++u)
      costs[static_cast<std::size_t>(u)] = net->forward_flops({u, u + 1}, batch);
    return costs;
  }
  if (comm->rank() == 0)
    costs = spec.dtype == train::DType::kFloat64 ? time_units<double>(spec, micro_batches)
                                                 : time_units<float>(spec, micro_batches);
  ch01::broadcast(*comm, std::span<double>(costs), 0);
  return costs;
}

}  // namespace dtw::ch05
