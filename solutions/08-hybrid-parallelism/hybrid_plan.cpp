// Step 08.2: what one rank of a hybrid run holds.
//
// Three chapters decide it, one axis each (the chapter text: "Three axes,
// three indices").
#include "dtw/chunks.h"
#include "dtw/model/params.h"
#include "dtw/model/units.h"
#include "hybrid_parallelism.h"

namespace dtw::ch08 {

train::ReplicaPlan hybrid_plan(const train::RunSpec& spec, const Layout& layout,
                               const ch05::StageMap& map, Coords at) {
  const model::ModelConfig c = spec.config();
  train::ReplicaPlan plan;
  // @lab 08.2: List what this rank holds: its stage's units of its tensor-parallel shard, the replicated tensors, and under ZeRO-1 only its chunk of the optimizer ranges.
  // @hint 1: Three axes, three indices: the slice picks the shard (which part of each tensor), the
  // @hint 1: stage picks the units (of that shard's layout, not of the whole model's), the replica
  // @hint 1: picks, under ZeRO-1, which part of the optimizer ranges this rank steps.
  // @hint 2: Lay out the shard; list its units; let chapter 05 turn the stage's units into ranges
  // @hint 2: (with the head's copy of the shard's wte); put the shard in the plan and name the
  // @hint 2: tensors it does not cut as replicated over the tp group. Under ZeRO-1 replace each
  // @hint 2: optimizer range by chunk `replica` of Chunks(its size, dp), leaving empty ones out:
  // @hint 2: the head's wte copy stays without optimizer state.
  // @hint 3: ch06::megatron_shard(c, at.slice, layout.tp) and model::param_layout(c, shard) for a GPT
  // @hint 3: (c.kind == model::ModelKind::kGpt), model::ModelShard{} and model::param_layout(c) otherwise;
  // @hint 3: model::model_units(c, local); model::tied_wte(c, local).end (0 when untied or when
  // @hint 3: one stage runs both ends: ch05 checks); ch05::stage_plan(map, units, wte_end,
  // @hint 3: at.stage); train::Replication::uncut(local, at.slice, layout.tp); Chunks(n, dp).offset(d),
  // @hint 3: .size(d).
  // Three chapters decide it, one axis each, and they compose because each
  // works on a different index: tensor parallelism (chapter 06) decides which
  // *part of each tensor* the rank computes -- its heads, hidden units and
  // vocabulary rows, megatron_shard -- which fixes the rank's flat layout
  // (param_layout(config, shard)); the pipeline (chapter 05) decides which
  // *units* of that layout the rank runs -- the same cut of units on every
  // slice, so the tp ranks of a stage hold matching slices of the same units;
  // ZeRO-1 (chapter 04) decides which *elements of the optimizer ranges* the
  // rank steps -- its chunk of each over the dp group.
  //
  //     rank (stage s, replica d, slice k) holds
  //       params, grads   units of stage s in layout(shard k)   [+ wte_k copy on the head's stage]
  //       optimizer       the same ranges                        (ZeRO-1: chunk d of dp of each)
  //       replicated      the tensors shard k does not cut, over the tp group
  const model::ModelShard shard = c.kind == model::ModelKind::kGpt
                                      ? ch06::megatron_shard(c, at.slice, layout.tp)
                                      : model::ModelShard{};
  // Only a GPT can be cut (an MLP runs whole on every slice of tp 1).
  const model::ParamLayout local =
      c.kind == model::ModelKind::kGpt ? model::param_layout(c, shard) : model::param_layout(c);
  const std::int64_t wte_end = model::head_is_tied(c) ? model::tied_wte(c, local).end : 0;
  plan = ch05::stage_plan(map, model::model_units(c, local), wte_end, at.stage);
  plan.shard = shard;
  plan.replicated = train::Replication::uncut(local, at.slice, layout.tp);
  if (layout.zero1) {
    std::vector<train::Range> mine;
    for (const train::Range& r : plan.optimizer) {
      const Chunks chunks(r.size(), layout.dp);
      const std::int64_t begin = r.begin + chunks.offset(at.replica);
      if (chunks.size(at.replica) > 0) mine.push_back({begin, begin + chunks.size(at.replica)});
    }
    plan.optimizer = std::move(mine);
  }
  // @end
  return plan;
}

}  // namespace dtw::ch08
