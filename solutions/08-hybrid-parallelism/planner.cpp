// Step 08.5: choosing a layout. Every layout of the world trains the same
// model to the same numbers (08.4); they differ in time and memory, and both
// follow from the earlier chapters' formulas (the chapter text: "The cost
// model").
#include <algorithm>
#include <cmath>
#include <sstream>

#include "dtw/model/params.h"
#include "dtw/train/micro_batches.h"
#include "dtw/train/network.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {
namespace {

std::int64_t element_bytes(const train::RunSpec& spec) {
  return spec.dtype == train::DType::kFloat64 ? 8 : 4;
}

// A ring allreduce of n bytes over `size` ranks on `link`: 2(size − 1) rounds of n/size.
double ring_allreduce(double bytes, int size, const train::Link& link) {
  if (size <= 1) return 0;
  return 2.0 * (size - 1) * link.seconds(bytes / size);
}

// The link a group of `size` members `stride` ranks apart crosses: inside a
// node when the whole span fits in one (nodes hold consecutive ranks).
const train::Link& link_of(const train::Cluster& cluster, int stride, int size) {
  return stride * size <= cluster.ranks_per_node ? cluster.intra : cluster.inter;
}

template <class T>
train::MemoryFigures memory_of(const train::RunSpec& spec, const Layout& layout,
                               const ch05::StageMap& map, Coords at) {
  train::MemoryFigures f{};
  // @lab 08.5: A rank's memory: what its plan holds, and the activations 1F1B keeps on its stage at the worst moment.
  // @hint 1: Parameters and gradients are the plan's ranges; optimizer state is the optimizer ranges
  // @hint 1: times the moments the optimizer keeps per element; activations are what the stage's
  // @hint 1: forwards keep until their backwards, at the moment the most are alive.
  // @hint 2: Walk the 1F1B list of this stage: a forward adds the activation bytes of its chunk on
  // @hint 2: its micro-batch (this replica's), its backward frees them; keep the maximum. The
  // @hint 2: bytes come from the network of the rank's shard, not the whole model's.
  // @hint 3: hybrid_plan(spec, layout, map, at); train::Network<T>::make(spec.config(), plan.shard);
  // @hint 3: ch05::make_schedule(ch05::ScheduleKind::kOneFOneB, pp, m).actions[stage];
  // @hint 3: train::micro_batch(spec, 0, at.replica, layout.dp, a.mb, m); net->activation_bytes(
  // @hint 3: map.chunks[a.chunk], batch); AdamW keeps 2 moments, SGD 1.
  const train::ReplicaPlan plan = hybrid_plan(spec, layout, map, at);
  auto total = [](const std::vector<train::Range>& rs) {
    std::int64_t n = 0;
    for (const train::Range& r : rs) n += r.size();
    return n;
  };
  const double e = sizeof(T);
  const int moments = spec.optimizer == model::Optimizer::kAdamW ? 2 : 1;
  f[static_cast<std::size_t>(MemoryCategory::kParameters)] = e * static_cast<double>(total(plan.params));
  f[static_cast<std::size_t>(MemoryCategory::kGradients)] = e * static_cast<double>(total(plan.grads));
  f[static_cast<std::size_t>(MemoryCategory::kOptimizerState)] =
      e * moments * static_cast<double>(total(plan.optimizer));
  // The activations 1F1B holds: walk this stage's list, adding a forward's
  // bytes and freeing them at its backward.
  const auto net = train::Network<T>::make(spec.config(), plan.shard);
  const ch05::Schedule schedule =
      ch05::make_schedule(ch05::ScheduleKind::kOneFOneB, layout.pp, layout.micro_batches);
  std::int64_t live = 0, peak = 0;
  for (const ch05::Action& a : schedule.actions[static_cast<std::size_t>(at.stage)]) {
    if (a.op != ch05::Op::kForward && a.op != ch05::Op::kBackward) continue;
    const train::Batch b = train::micro_batch(spec, 0, at.replica, layout.dp, a.mb, layout.micro_batches);
    const std::int64_t held = net->activation_bytes(map.chunks[static_cast<std::size_t>(a.chunk)], b);
    if (a.op == ch05::Op::kForward) live += held;
    peak = std::max(peak, live);
    if (a.op == ch05::Op::kBackward) live -= held;
  }
  f[static_cast<std::size_t>(MemoryCategory::kActivations)] = static_cast<double>(peak);
  // @end
  return f;
}

}  // namespace

train::MemoryFigures rank_memory(const train::RunSpec& spec, const Layout& layout, Coords at) {
  const ch05::StageMap map =
      ch05::make_stage_map(spec, ch05::Balance::kParams, layout.pp, 1, layout.micro_batches, nullptr);
  return element_bytes(spec) == 8 ? memory_of<double>(spec, layout, map, at)
                                  : memory_of<float>(spec, layout, map, at);
}

namespace {

// predict in the run's element type T (its bytes are the model's own).
template <class T>
void predict_into(Prediction& p, const train::RunSpec& spec, const Layout& layout,
                  const train::Cluster& cluster) {
  // @lab 08.5: Predict one layout's step time and its busiest rank's memory from the chapters' formulas (the layout checked first).
  // @hint 1: Time: every stage runs m micro-batches, each taking its compute plus the tensor-
  // @hint 1: parallel allreduces it waits for; 1F1B adds pp − 1 micro-batch times of bubble; the
  // @hint 1: stage boundaries, the replicas' gradient sum and the optimizer add the rest. Memory:
  // @hint 1: what the rank's plan holds, and the activations of the micro-batches in flight.
  // @hint 2: τ = max over stages of (3 × forward FLOPs / cluster.flops + 3 × activation bytes /
  // @hint 2: memory_bw + (4 · blocks + ends) ring allreduces of rows · C values over tp), on the
  // @hint 2: shard's network and micro-batch 0 of replica 0; step = (m + pp − 1)·τ + 2(m + pp − 2)
  // @hint 2: boundary messages + a ring allreduce of the biggest stage slice over dp + 7 values
  // @hint 2: per stepped element over memory + the world's allreduce of two doubles. Memory:
  // @hint 2: rank_memory of every rank, the largest total.
  // @hint 3: train::Network<T>::make(c, shard)->forward_flops(range, batch) (T: the run's element type),
  // @hint 3: ->activation_bytes(range, batch), ->boundary_elements(unit, batch);
  // @hint 3: train::micro_batch(spec, 0, 0, dp, 0, m); cluster.intra / cluster.inter .seconds(bytes).
  // The cost model, from the earlier chapters' formulas:
  //
  //   per micro-batch, on the busiest stage s:
  //     τ = compute_s + tp_s          compute: 3 × forward FLOPs of the stage's slice /
  //                                   FLOP/s + 3 × its activation bytes / memory bandwidth;
  //                                   tp: Megatron's ring allreduces of the activation
  //   step = m·τ + (pp − 1)·τ          1F1B: m micro-batches and the fill and drain (the bubble)
  //        + pp messages               2 (m + pp − 2) boundary messages on the critical path
  //        + dp allreduce              2(dp − 1) ring rounds of |stage slice| / dp values
  //        + optimizer                 7 values (AdamW) per stepped element over memory
  //
  //   memory on rank (s, d, k): the plan's parameters, gradients and optimizer
  //   state (08.2), and the activations of the micro-batches 1F1B holds at its
  //   worst moment: min(pp − s, m) of them.
  //
  // A link: tp's group is tp consecutive ranks (inside a node when tp ≤ the
  // node's size); dp's members are tp ranks apart, pp's tp·dp apart, so they
  // cross nodes as soon as a node is full.
  check_layout(spec, layout, layout.ranks(), -1);
  const model::ModelConfig c = spec.config();
  const double e = sizeof(T);
  const int m = layout.micro_batches;
  const ch05::StageMap map = ch05::make_stage_map(spec, ch05::Balance::kParams, layout.pp, 1, m, nullptr);
  const model::ModelShard shard =
      c.kind == model::ModelKind::kGpt ? ch06::megatron_shard(c, 0, layout.tp) : model::ModelShard{};
  const auto net = train::Network<T>::make(c, shard);
  const train::Batch mb = train::micro_batch(spec, 0, 0, layout.dp, 0, m);
  const train::Link& tp_link = link_of(cluster, 1, layout.tp);
  const train::Link& dp_link = link_of(cluster, layout.tp, layout.dp);
  const train::Link& pp_link = link_of(cluster, layout.tp * layout.dp, layout.pp);
  const double act_bytes = static_cast<double>(net->boundary_elements(1, mb)) * e;  // rows · C
  const int units = static_cast<int>(net->units().size());
  double tau = 0, compute = 0, tp = 0;
  std::int64_t biggest = 0;
  for (int s = 0; s < layout.pp; ++s) {
    const model::UnitRange r = map.chunks[static_cast<std::size_t>(s)];
    const double flops = 3 * net->forward_flops(r, mb);
    const double bytes = 3 * static_cast<double>(net->activation_bytes(r, mb));
    const double comp = flops / cluster.flops + bytes / cluster.memory_bw;
    // Megatron's allreduces: 4 per block (2 forward, 2 backward), the
    // embedding's forward and the head's input gradient.
    int allreduces = 0;
    for (int u = r.begin; u < r.end; ++u) allreduces += (u == 0 || u == units - 1) ? 1 : 4;
    if (c.kind != model::ModelKind::kGpt) allreduces = 0;
    const double comm = allreduces * ring_allreduce(act_bytes, layout.tp, tp_link);
    if (comp + comm > tau) {
      tau = comp + comm;
      compute = comp;
      tp = comm;
    }
    const Coords at{.stage = s, .replica = 0, .slice = 0};
    Layout whole = layout;
    whole.zero1 = false;
    std::int64_t n = 0;
    for (const train::Range& x : hybrid_plan(spec, whole, map, at).optimizer) n += x.size();
    biggest = std::max(biggest, n);
  }
  p.compute_s = m * compute;
  p.tp_s = m * tp;
  p.bubble_s = (layout.pp - 1) * tau;
  p.pp_s = layout.pp > 1 ? 2.0 * (m + layout.pp - 2) * pp_link.seconds(act_bytes) : 0;
  p.dp_s = ring_allreduce(static_cast<double>(biggest) * e, layout.dp, dp_link);
  const double stepped = layout.zero1 ? static_cast<double>(biggest) / layout.dp : static_cast<double>(biggest);
  // Clip and step, after the one allreduce of {Σ g², loss} over the world
  // (two doubles: its 2(p − 1) rounds are all latency).
  p.optimizer_s = stepped * e * (spec.optimizer == model::Optimizer::kAdamW ? 7 : 4) / cluster.memory_bw +
                  ring_allreduce(16, layout.ranks(), link_of(cluster, 1, layout.ranks()));
  p.step_s = p.compute_s + p.tp_s + p.bubble_s + p.pp_s + p.dp_s + p.optimizer_s;
  // The busiest rank's memory.
  for (int s = 0; s < layout.pp; ++s)
    for (int d = 0; d < layout.dp; ++d)
      for (int k = 0; k < layout.tp; ++k) {
        const train::MemoryFigures f = rank_memory(spec, layout, {s, d, k});
        double sum = 0;
        for (double x : f) sum += x;
        if (sum > p.memory_total) {
          p.memory_total = sum;
          p.memory = f;
        }
      }
  // @end
}

}  // namespace

Prediction predict(const train::RunSpec& spec, const Layout& layout, const train::Cluster& cluster) {
  Prediction p;
  p.layout = layout;
  if (element_bytes(spec) == 8) predict_into<double>(p, spec, layout, cluster);
  else predict_into<float>(p, spec, layout, cluster);
  std::ostringstream note;
  const double share = p.step_s > 0 ? 1.0 / p.step_s : 0;
  note.precision(0);
  note << std::fixed << "bubble " << 100 * p.bubble_s * share << "%, tp " << 100 * p.tp_s * share
       << "%, dp " << 100 * p.dp_s * share << "%";
  if (layout.tp > cluster.ranks_per_node) note << ", tp across nodes";
  p.note = note.str();
  return p;
}

std::vector<Layout> valid_layouts(const train::RunSpec& spec, int ranks,
                                  const std::vector<int>& micro_batches, bool with_zero1) {
  std::vector<Layout> out;
  for (int pp = 1; pp <= ranks; ++pp)
    for (int tp = 1; tp <= ranks / pp; ++tp) {
      if (ranks % (pp * tp) != 0) continue;
      const int dp = ranks / (pp * tp);
      std::vector<int> ms = micro_batches;
      if (ms.empty()) ms = {static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(2 * pp, spec.batch / dp)))};
      for (int m : ms)
        for (int z = 0; z <= (with_zero1 && dp > 1 ? 1 : 0); ++z) {
          const Layout l{.pp = pp, .dp = dp, .tp = tp, .micro_batches = m, .zero1 = z == 1};
          try {
            check_layout(spec, l, ranks, -1);
          } catch (const InvalidArgument&) {
            continue;
          }
          out.push_back(l);
        }
    }
  return out;
}

std::vector<Prediction> plan(const train::RunSpec& spec, int ranks, const train::Cluster& cluster,
                             double memory_cap, const std::vector<int>& micro_batches) {
  std::vector<Prediction> out;
  for (const Layout& l : valid_layouts(spec, ranks, micro_batches, true)) {
    Prediction p = predict(spec, l, cluster);
    if (memory_cap > 0 && p.memory_total > memory_cap) continue;
    out.push_back(std::move(p));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Prediction& a, const Prediction& b) { return a.step_s < b.step_s; });
  return out;
}

}  // namespace dtw::ch08
