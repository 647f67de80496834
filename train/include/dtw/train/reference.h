#pragma once
/// @file
/// The reference run every strategy must reproduce, memoised per process, and
/// the exact comparison with it that names the first divergent element.
///
/// **Tolerance policy.** In double precision a correct parallel strategy
/// differs from the reference only by the order of floating-point sums (an
/// allreduce adds in another order than one device does), which stays within
/// about 1e-12 relative over a few steps of the tiny models; the default
/// tolerance, 1e-9, leaves room for that and for AdamW's division by √v,
/// while an off-by-one shard, a missing 1/p or one wrong element shows up as
/// 1e-3 or more. Errors are relative to max(|expected|, RMS of the expected
/// tensor), so a tensor that is zero at the start (a bias) is judged at its
/// own scale. In float32 the sums' order changes the last bits every step and
/// the runs drift apart over time: float runs compare the loss curves (to
/// 1e-3 relative, kFloatLossTolerance) and only report the parameter
/// difference.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dtw/model/params.h"
#include "dtw/train/replica.h"
#include "dtw/train/run_spec.h"
#include "dtw/types.h"

namespace dtw::train {

/// Default relative tolerance of double runs (parameters and losses).
inline constexpr double kDoubleTolerance = 1e-9;
/// Default relative tolerance of float runs (losses only).
inline constexpr double kFloatLossTolerance = 1e-3;
/// The default tolerance of a run in `dtype`.
inline double default_tolerance(DType dtype) {
  return dtype == DType::kFloat64 ? kDoubleTolerance : kFloatLossTolerance;
}
/// The DType of T (float or double).
template <class T>
constexpr DType dtype_of() {
  return sizeof(T) == sizeof(double) ? DType::kFloat64 : DType::kFloat32;
}

/// The reference run of a RunSpec: train_reference on one device, whole batch.
template <class T>
struct ReferenceRun {
  std::vector<double> losses;  ///< losses[s]: the mean loss of data step s
  model::ParamLayout layout;   ///< names and offsets
  /// params[k]: the parameters after k steps (k = 0 … steps) when the run is
  /// small enough to keep them all (steps·size ≤ 2^24 values); otherwise only
  /// params[0] and params[steps] are filled and the others are empty.
  std::vector<std::vector<T>> params;
};

/// The reference run of `spec` in T (spec.dtype is ignored: T decides),
/// computed once per process and shared (thread-safe: rank threads asking
/// together wait for one computation). Under MPI every process computes its
/// own, so the comparison runs inside each rank function.
template <TrainElement T>
std::shared_ptr<const ReferenceRun<T>> reference_run(const RunSpec& spec);

/// The parameters of the reference after `steps_done` steps (from the memo;
/// a step not kept there is computed as a shorter run, memoised as well).
template <TrainElement T>
std::shared_ptr<const std::vector<T>> reference_params(const RunSpec& spec,
                                                       std::int64_t steps_done);

/// The outcome of a comparison.
struct ReferenceCheck {
  bool ok = true;            ///< everything compared is within tolerance
  std::string message;       ///< the first divergence (empty when ok)
  double max_abs_diff = 0;   ///< max |θ − θ_ref| over the elements compared
  double max_rel_error = 0;  ///< largest relative error seen (losses and parameters)
  std::int64_t compared = 0;  ///< parameter elements compared
  /// The compared element with the largest relative error (double runs),
  /// described as the message describes one ("after 2 steps: wte[5] (row 0,
  /// col 5) (flat index 5): expected …"); empty when nothing exceeds the
  /// tolerance.
  std::string largest;
  double largest_rel_error = 0;  ///< of `largest`
};

/// Element `flat` of a model laid out as `layout`, named as a reader finds
/// it: "h.1.attn.qkv.weight[37] (row 0, col 37)".
std::string element_name(const model::ParamLayout& layout, std::int64_t flat);

/// Compares a rank's run with the reference of `spec`: `losses[s]` (the
/// global mean loss of step s, as far as this rank knows it; may be empty),
/// then `params`, elements [begin, begin + params.size()) of the flat buffer
/// after `steps_done` steps (−1: losses.size()). The message names the rank,
/// then the first step whose loss diverged with its ratio to the reference's
/// (`step 0: loss ×2.0000 the reference's: ...`: a missing 1/p shows at
/// once), then the first divergent element in layer order by tensor and
/// index (`h.1.attn.qkv.weight[37] (row 0, col 37)`); each with expected,
/// got, the relative error and the tolerance. Float runs fail only on losses (see the policy
/// above). Bad arguments (a range outside the model, steps_done beyond the
/// spec) raise InvalidArgument naming the values.
template <TrainElement T>
ReferenceCheck compare_to_reference(int rank, const RunSpec& spec, std::span<const double> losses,
                                    std::span<const T> params, std::int64_t begin,
                                    double tolerance, std::int64_t steps_done = -1);
/// The same with the default tolerance of T.
template <TrainElement T>
ReferenceCheck compare_to_reference(int rank, const RunSpec& spec, std::span<const double> losses,
                                    std::span<const T> params, std::int64_t begin) {
  return compare_to_reference<T>(rank, spec, losses, params, begin,
                                 default_tolerance(dtype_of<T>()));
}
/// Every parameter piece `replica` holds (a shard's slices at their whole
/// offsets: Replica::whole_params), after `steps_done` steps (−1:
/// losses.size()), with the default tolerance of T.
template <TrainElement T>
ReferenceCheck compare_to_reference(int rank, Replica<T>& replica, std::span<const double> losses,
                                    std::int64_t steps_done = -1);

}  // namespace dtw::train
