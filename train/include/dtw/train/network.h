#pragma once
/// @file
/// `Network<T>`: the GPT or the MLP behind one interface, so the replica, the
/// reference and every strategy are written once for both models. One object
/// holds the activations of one forward pass (one micro-batch in flight).

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dtw/kernels/place.h"
#include "dtw/model/config.h"
#include "dtw/model/params.h"
#include "dtw/model/profile.h"
#include "dtw/model/seams.h"
#include "dtw/model/shard.h"
#include "dtw/model/units.h"
#include "dtw/train/run_spec.h"
#include "dtw/types.h"

namespace dtw::train {

/// A model of either kind with stage-wise forward and backward (units.h).
template <TrainElement T>
class Network {
 public:
  virtual ~Network() = default;
  /// A Gpt<T> (of `shard`, shard.h) or an Mlp<T> (whole only: InvalidArgument
  /// for a shard) for `config`.
  static std::unique_ptr<Network> make(const model::ModelConfig& config,
                                       const model::ModelShard& shard = model::ModelShard::whole());

  /// The configuration.
  virtual const model::ModelConfig& config() const = 0;
  /// The flat layout.
  virtual const model::ParamLayout& layout() const = 0;
  /// The units in forward order.
  virtual const std::vector<model::Unit>& units() const = 0;
  /// Every unit: the whole model.
  model::UnitRange all() const { return {0, static_cast<int>(units().size())}; }
  /// Records per-layer time (and matmul FLOPs) from now on; nullptr stops.
  virtual void set_times(model::LayerTimes* times) = 0;
  /// The share of the model this network computes (the whole for an MLP).
  virtual const model::ModelShard& shard() const {
    static const model::ModelShard whole;
    return whole;
  }
  /// Where a parallel strategy's collectives go (seams.h); nullptr: identity.
  /// An MLP has no seams (InvalidArgument for a non-null one).
  virtual void set_seams(model::Seams<T>* seams) = 0;
  /// Where its kernels run and its activations live (Gpt/Mlp::set_place; the
  /// host by default): the parameters, gradients and x_in it is given must be
  /// there too. The batch's token ids and inputs are the host's; the network
  /// copies them there.
  virtual void set_place(const kernels::Place& at) = 0;

  /// Forward of units `range` on `batch`'s rows: from the batch's tokens or
  /// inputs when the range starts at unit 0, else from x_in (the previous
  /// stage's output). Returns the batch's mean loss when the range ends with
  /// the loss, else 0.
  virtual T forward(model::UnitAccess<T>& access, model::UnitRange range, const Batch& batch,
                    const T* x_in) = 0;
  /// Backward of the last forward (Gpt/Mlp::backward with an access).
  virtual void backward(model::UnitAccess<T>& access, const T* dx_out, T loss_scale,
                        const model::GradReady& on_grad_ready) = 0;
  /// The last forward's output activation (what a stage sends on).
  virtual std::span<const T> output() const = 0;
  /// The gradient of the last forward's input after backward (what a stage sends back).
  virtual std::span<const T> input_grad() const = 0;
  /// Elements of the activation entering unit `unit` (or leaving the last
  /// unit when unit == units().size()) for `batch`'s rows: what a pipeline
  /// stage sends or receives per micro-batch.
  virtual std::int64_t boundary_elements(int unit, const Batch& batch) const = 0;
  /// Bytes a forward over `range` on `batch` keeps until its backward.
  virtual std::int64_t activation_bytes(model::UnitRange range, const Batch& batch) const = 0;
  /// FLOPs of one forward over `range` on `batch` (matrix products only;
  /// backward is twice this). What the modeled fabric charges a compute phase.
  virtual double forward_flops(model::UnitRange range, const Batch& batch) const = 0;
  /// Frees the activations.
  virtual void release_activations() = 0;
};

}  // namespace dtw::train
