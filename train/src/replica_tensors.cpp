// Replica<T> by tensor: the per-tensor accessor, the held parameters as runs
// of the whole model, the seams, and the plans of shards (replica.h).
#include <algorithm>

#include "dtw/train/replica.h"
#include "replica_state.h"

namespace dtw::train {

using detail::describe;
using detail::rank_prefix;

Replication Replication::uncut(const model::ParamLayout& layout, int group_rank, int group_size) {
  DTW_CHECK_ARG(group_size >= 1 && 0 <= group_rank && group_rank < group_size,
                "Replication: rank " << group_rank << " of a group of " << group_size);
  Replication r{{}, group_rank, group_size};
  for (const model::ParamView& v : layout.views())
    if (v.is_whole()) r.tensors.push_back(v.name);
  return r;
}

bool Replication::holds(std::string_view name) const {
  return std::find(tensors.begin(), tensors.end(), name) != tensors.end();
}

ReplicaPlan ReplicaPlan::slice(const RunSpec& spec, const model::ModelShard& shard,
                               Replication replicated) {
  const model::ParamLayout layout = model::param_layout(spec.config(), shard);
  for (const std::string& name : replicated.tensors) layout.find(name);  // names it if absent
  ReplicaPlan plan = range(0, layout.size());
  plan.shard = shard;
  plan.replicated = std::move(replicated);
  return plan;
}

template <TrainElement T>
typename Replica<T>::Tensor Replica<T>::tensor(std::string_view name) {
  const model::ParamView& v = layout().find(name);
  const std::int64_t begin = v.offset, end = v.offset + v.size;
  Tensor t;
  t.view = &v;
  if (state_->param_pieces.find(begin, end) >= 0) t.params = params(begin, end);
  if (state_->grad_pieces.find(begin, end) >= 0) t.grads = grads(begin, end);
  DTW_CHECK_ARG(!t.params.empty() || !t.grads.empty() || v.size == 0,
                rank_prefix(exec_) << "Replica::tensor: " << name << " [" << begin << ", " << end
                                   << ") is not held whole; this replica holds "
                                   << plan_.describe());
  return t;
}

template <TrainElement T>
std::vector<std::pair<std::int64_t, std::span<const T>>> Replica<T>::whole_params() {
  const model::ParamLayout& local = layout();
  const model::ParamLayout whole = model::param_layout(spec_.config());
  std::vector<std::pair<std::int64_t, std::span<const T>>> out;
  for (const Range& r : state_->param_pieces.ranges) {
    const std::span<const T> held = params(r);
    for (const model::ParamView& v : local.views()) {
      const std::int64_t lo = std::max(r.begin, v.offset), hi = std::min(r.end, v.offset + v.size);
      if (lo >= hi) continue;
      const std::int64_t base = whole.find(v.name).offset;
      // A run of the slice is consecutive in the whole tensor; a new one
      // starts wherever the whole index jumps.
      std::int64_t start = lo;
      for (std::int64_t k = lo + 1; k <= hi; ++k) {
        if (k < hi && v.slice.whole_index(k - v.offset) ==
                          v.slice.whole_index(k - 1 - v.offset) + 1)
          continue;
        const std::int64_t at = base + v.slice.whole_index(start - v.offset);
        const std::span<const T> values = held.subspan(static_cast<std::size_t>(start - r.begin),
                                                       static_cast<std::size_t>(k - start));
        auto& last = out.empty() ? out.emplace_back(at, values.first(0)) : out.back();
        if (last.first + static_cast<std::int64_t>(last.second.size()) == at &&
            last.second.data() + last.second.size() == values.data()) {
          // Continues the previous run (a whole model's range is one run).
          last.second = std::span<const T>(last.second.data(), last.second.size() + values.size());
        } else {
          out.emplace_back(at, values);
        }
        start = k;
      }
    }
  }
  return out;
}

template <TrainElement T>
void Replica<T>::set_seams(model::Seams<T>* seams) {
  state_->seams = seams;
  // The seams' attention core runs the blocks' attention, so it runs where
  // the replica does (the block refuses a core placed elsewhere).
  if (seams != nullptr) seams->attention().set_place(state_->exec.place());
  state_->net->set_seams(seams);  // forward_backward's own pass runs on this network
}

#define DTW_INSTANTIATE(T)                                                            \
  template Replica<T>::Tensor Replica<T>::tensor(std::string_view);                   \
  template std::vector<std::pair<std::int64_t, std::span<const T>>>                   \
  Replica<T>::whole_params();                                                         \
  template void Replica<T>::set_seams(model::Seams<T>*);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::train
