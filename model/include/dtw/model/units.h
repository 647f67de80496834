#pragma once
/// @file
/// Units: the pieces of a model that a pass uses as a whole, and how a pass
/// finds their parameters and gradients.
///
/// The flat buffer (params.h) splits into units in forward order:
///
///     GPT:  "embed" (wte, wpe) | "h.0" | … | "h.L−1" | "head" (lnf, head.weight if untied)
///     MLP:  "fc.0" | "fc.1" | … | "fc.n−1"
///
/// Units are what the parallel chapters cut along: a pipeline stage runs a
/// contiguous run of units (a UnitRange) on an input activation; ZeRO-3 / FSDP
/// gathers one unit's parameters before it runs and frees them after; DDP's
/// buckets fill as tensors finish their backward (GradReady).
///
/// A pass reaches parameters and gradients only through a UnitAccess, one unit
/// at a time, so the same forward and backward code runs on a whole flat
/// buffer (FlatAccess), on a pipeline stage's own buffers, or on per-unit
/// buffers that a ZeRO-3 rank gathers on demand.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtw/model/config.h"
#include "dtw/model/params.h"

namespace dtw::model {

/// One unit: a contiguous range of the flat buffer.
struct Unit {
  std::string name;        ///< "embed", "h.3", "head" (GPT); "fc.2" (MLP)
  std::int64_t begin = 0;  ///< first element in the flat buffer
  std::int64_t end = 0;    ///< one past the last element
  /// end − begin.
  std::int64_t size() const { return end - begin; }
};

/// The units of a model in forward order. They tile [0, layout.size())
/// without gaps: GPT units are "embed", "h.0" … "h.L−1", "head" (L + 2 of
/// them); MLP units are "fc.0" … "fc.n−1", one per linear layer.
std::vector<Unit> model_units(const ModelConfig& config, const ParamLayout& layout);

/// The tied-embedding rule, decided here and nowhere else: a GPT whose head
/// is tied to the token embedding (ModelConfig::tied_head) multiplies by wte,
/// so the head's forward reads wte and its backward adds into wte's gradient
/// before the embedding's does. A pass or a plan that holds the head
/// therefore needs wte too: the embedding unit's first tensor, [begin, end)
/// of the flat buffer.
struct TiedWte {
  std::int64_t begin = 0;  ///< first element of wte (0: it opens the buffer)
  std::int64_t end = 0;    ///< one past its last; begin == end when the head is not tied
  /// True when the head shares wte.
  bool tied() const { return end > begin; }
};
/// True when `config`'s head shares wte: a GPT with tied_head (never an MLP).
bool head_is_tied(const ModelConfig& config);
/// Where wte lies in `layout` when the head shares it, else an empty range.
TiedWte tied_wte(const ModelConfig& config, const ParamLayout& layout);

/// A run of units [begin, end) in forward order: a pipeline stage. For a GPT
/// the run includes the embedding when begin == 0 and the head (and the loss)
/// when end == the number of units; for an MLP, the inputs when begin == 0 and
/// the loss when end == the number of layers.
struct UnitRange {
  int begin = 0;  ///< first unit
  int end = 0;    ///< one past the last unit
};

/// Called during backward with [begin, end) of the flat buffer whose
/// gradients are final for this pass, the moment they are. Units come last
/// unit first, and every element of a unit is reported exactly once: a GPT
/// block tensor by tensor as its backward finishes each, from its last tensor
/// in the buffer to its first (the MLP's, LN2's, the attention's, LN1's:
/// PyTorch's per-parameter hooks), the head, the
/// embedding and an MLP's layers whole. With a tied head (GPT), the head's
/// backward adds into wte, which the embedding's backward adds to again, so
/// the "embed" unit is reported last of all; a pass that ends before the
/// embedding (a pipeline stage holding the tied head) reports wte's range
/// once its own units are done. A listener that works on whole units (ZeRO)
/// wraps itself in whole_units().
using GradReady = std::function<void(std::int64_t begin, std::int64_t end)>;

/// A GradReady that collects the ranges a backward reports and calls
/// `on_unit` with a unit's whole [begin, end) once every element of it has
/// been reported, then counts that unit afresh for the next pass. A range
/// that is not inside one unit, or that reports elements twice in a pass, is
/// an InvalidArgument naming the range and the unit.
GradReady whole_units(std::vector<Unit> units, GradReady on_unit);

/// Where a pass finds each unit's parameters and gradients. Pointers address
/// the unit's first element: element `units[u].begin + i` is at `[i]`.
///
/// Call pattern (what an implementation may rely on): forward and backward
/// call `params(u)` before using unit u and `release_params(u)` when done, in
/// nested pairs; the GPT's tied head also takes the embedding's (params(0)
/// inside the head's pair, and grads(0) in its backward), and then touches
/// only wte's elements of it. `grads(u)` may be called several times in one
/// backward and must return the same memory until the last of the unit's
/// GradReady ranges.
template <class T>
class UnitAccess {
 public:
  virtual ~UnitAccess() = default;
  /// Unit u's parameters; valid until the matching release_params(u).
  virtual const T* params(int unit) = 0;
  /// The pass is done with unit u's parameters for now (a ZeRO-3 rank frees
  /// its gathered copy here).
  virtual void release_params(int /*unit*/) {}
  /// Where the backward accumulates (+=) unit u's gradient.
  virtual T* grads(int unit) = 0;
};

/// UnitAccess over one flat parameter buffer and one flat gradient buffer
/// (layout().size() elements each; grads may be nullptr for forward only).
template <class T>
class FlatAccess final : public UnitAccess<T> {
 public:
  /// `units` must be model_units() of the buffers' layout and outlive this.
  FlatAccess(const std::vector<Unit>& units, const T* params, T* grads)
      : units_(units), params_(params), grads_(grads) {}
  const T* params(int unit) override { return params_ + units_[static_cast<std::size_t>(unit)].begin; }
  T* grads(int unit) override { return grads_ + units_[static_cast<std::size_t>(unit)].begin; }

 private:
  const std::vector<Unit>& units_;
  const T* params_;
  T* grads_;
};

}  // namespace dtw::model
