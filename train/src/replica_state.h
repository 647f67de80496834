#pragma once
// Replica<T>'s state, shared by the files that implement it (replica.cpp,
// replica_tensors.cpp): the held pieces of the flat buffers and the access
// a pass uses to reach them. Not part of the API.
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/model/params.h"
#include "dtw/train/replica.h"

namespace dtw::train::detail {

using model::Unit;

// "rank 3: " when the ledger knows the rank.
inline std::string rank_prefix(const Exec& exec) {
  if (exec.ledger() == nullptr || exec.ledger()->rank() < 0) return {};
  return "rank " + std::to_string(exec.ledger()->rank()) + ": ";
}

inline std::string describe(const std::vector<Range>& ranges) {
  if (ranges.empty()) return "nothing";
  std::ostringstream s;
  for (std::size_t i = 0; i < ranges.size(); ++i)
    s << (i ? " " : "") << "[" << ranges[i].begin << ", " << ranges[i].end << ")";
  return s.str();
}

// Where each held range starts in its Array.
struct Pieces {
  std::vector<Range> ranges;
  std::vector<std::int64_t> at;  // offset of ranges[i] in the Array
  std::int64_t total = 0;

  Pieces() = default;
  Pieces(const std::vector<Range>& rs, std::int64_t n, const char* what, const Exec& exec) {
    std::int64_t last_end = 0;
    for (const Range& r : rs) {
      DTW_CHECK_ARG(0 <= r.begin && r.begin <= r.end && r.end <= n,
                    rank_prefix(exec) << "Replica: " << what << " range [" << r.begin << ", "
                                      << r.end << ") is outside the model's [0, " << n << ")");
      DTW_CHECK_ARG(r.begin >= last_end, rank_prefix(exec)
                                             << "Replica: " << what << " ranges " << describe(rs)
                                             << " are not sorted and disjoint");
      last_end = r.end;
      if (r.size() == 0) continue;
      ranges.push_back(r);
      at.push_back(total);
      total += r.size();
    }
  }
  // Index of the piece that holds all of [begin, end), or -1.
  int find(std::int64_t begin, std::int64_t end) const {
    for (std::size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].begin <= begin && end <= ranges[i].end) return static_cast<int>(i);
    return -1;
  }
};


}  // namespace dtw::train::detail

namespace dtw::train {

template <TrainElement T>
struct Replica<T>::State {
  // The replica's own buffers as a UnitAccess: a unit must be held whole,
  // except the embedding of a tied GPT, of which the head touches only wte.
  class OwnAccess final : public model::UnitAccess<T> {
   public:
    explicit OwnAccess(State& s) : s_(s) {}
    const T* params(int unit) override {
      return s_.params.data() + at(s_.param_pieces, unit, "parameters");
    }
    T* grads(int unit) override { return s_.grads.data() + at(s_.grad_pieces, unit, "gradients"); }

   private:
    std::int64_t at(const detail::Pieces& pieces, int unit, const char* what) const {
      const model::Unit& u = s_.net->units()[static_cast<std::size_t>(unit)];
      std::int64_t end = u.end;
      if (unit == 0 && s_.tied_wte_end > 0 && pieces.find(u.begin, u.end) < 0) end = s_.tied_wte_end;
      const int i = pieces.find(u.begin, end);
      DTW_CHECK_ARG(i >= 0, detail::rank_prefix(s_.exec)
                                << "Replica: a pass needs the " << what << " of unit " << u.name
                                << " [" << u.begin << ", " << u.end << "), but this replica holds "
                                << detail::describe(pieces.ranges)
                                << " (pass a UnitAccess that supplies them)");
      return pieces.at[static_cast<std::size_t>(i)] + (u.begin - pieces.ranges[i].begin);
    }
    State& s_;
  };

  State(const RunSpec& spec, const Exec& e, const ReplicaPlan& plan)
      : exec(e), net(Network<T>::make(spec.config(), plan.shard)), own(*this) {
    const std::int64_t n = net->layout().size();
    const model::ModelConfig& c = net->config();
    tied_wte_end = model::tied_wte(c, net->layout()).end;
    param_pieces = detail::Pieces(plan.params, n, "parameter", exec);
    grad_pieces = detail::Pieces(plan.grads, n, "gradient", exec);
    opt_pieces = detail::Pieces(plan.optimizer, n, "optimizer", exec);
    for (const Range& r : opt_pieces.ranges) {
      DTW_CHECK_ARG(param_pieces.find(r.begin, r.end) >= 0 && grad_pieces.find(r.begin, r.end) >= 0,
                    detail::rank_prefix(exec) << "Replica: optimizer range [" << r.begin << ", " << r.end
                                      << ") is not inside one held parameter range and one held "
                                         "gradient range ("
                                      << plan.describe() << ")");
    }
    params = Array<T>(exec, param_pieces.total, MemoryCategory::kParameters);
    grads = Array<T>(exec, grad_pieces.total, MemoryCategory::kGradients);
    const bool adam = spec.optimizer == model::Optimizer::kAdamW;
    m = Array<T>(exec, opt_pieces.total, MemoryCategory::kOptimizerState);
    v = Array<T>(exec, adam ? opt_pieces.total : 0, MemoryCategory::kOptimizerState);
    grads.fill(T(0));
    m.fill(T(0));
    v.fill(T(0));
    // init_value is keyed by (seed, tensor, index): any piece initialises
    // alone. Computed on the host, then copied to where the replica lives.
    std::vector<T> initial(static_cast<std::size_t>(param_pieces.total));
    for (std::size_t i = 0; i < param_pieces.ranges.size(); ++i) {
      const Range r = param_pieces.ranges[i];
      T* p = initial.data() + param_pieces.at[i];
      for (const model::ParamView& view : net->layout().views()) {
        const std::int64_t lo = std::max(r.begin, view.offset);
        const std::int64_t hi = std::min(r.end, view.offset + view.size);
        for (std::int64_t k = lo; k < hi; ++k)
          p[k - r.begin] = static_cast<T>(model::init_value(view, spec.seed, k - view.offset));
      }
    }
    params.upload(initial);
    net->set_place(exec.place());
  }

  Exec exec;
  std::unique_ptr<Network<T>> net;
  detail::Pieces param_pieces, grad_pieces, opt_pieces;
  std::int64_t tied_wte_end = 0;  // end of wte when the head is tied, else 0
  Array<T> params, grads, m, v;
  OwnAccess own;
  // forward_backward's pass, kept so its buffers are reused from step to step
  // (like a caching allocator: the ledger counts them only while in use).
  std::unique_ptr<StagePass<T>> pass;
  model::LayerTimes* times = nullptr;
  model::Seams<T>* seams = nullptr;  // set_seams(): passes made from now on use them
};

}  // namespace dtw::train
