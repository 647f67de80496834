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
  DTW_TODO("05.1: Cut the units into `chunks` contiguous runs whose most expensive run is as cheap as possible.");
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
  DTW_TODO("05.1: List the flat ranges this rank holds: its chunks' units, and the tied head's copy of wte.");
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
