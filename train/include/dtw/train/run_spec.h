#pragma once
/// @file
/// The one description of a training run that `dtw train`, the tests, the
/// demos and the benchmarks share, and the data each rank reads from it.
///
/// Start every run from `standard_run(model)` and change only what the run is
/// about (a test: fewer steps, double precision). The reference trainer and
/// every strategy read the same RunSpec, so "the same run on P ranks" means
/// one thing everywhere.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dtw/kernels/optim.h"
#include "dtw/model/config.h"
#include "dtw/model/data.h"
#include "dtw/model/trainer.h"

namespace dtw::train {

/// The floating-point type a run computes in.
enum class DType {
  kFloat32,  ///< training runs and benchmarks
  kFloat64,  ///< correctness runs: strategies match the reference to ~1e-9
};
/// "float32" or "float64".
const char* name_of(DType dtype);
/// Parses "float32"/"float"/"f32" or "float64"/"double"/"f64"; InvalidArgument otherwise.
DType dtype_from_name(std::string_view name);

/// A training run: which model, how many steps, what data, which optimizer.
/// Defaults are the standard run's (standard_run()).
struct RunSpec {
  std::string model = "gpt-tiny";  ///< a name model_config() knows
  std::int64_t steps = 200;        ///< optimizer steps
  std::int64_t batch = 8;          ///< global batch: sequences (GPT) or rows (MLP)
  /// Tokens per sequence; 0: the model's context. GPT only: the MLP has no
  /// sequence, so validate() refuses a seq_len other than 0 for it.
  std::int64_t seq_len = 0;
  std::uint64_t seed = 1234;       ///< initial weights and data
  /// GPT data; unset: corpus. The MLP trains on synthetic classification
  /// (class_batch) and has no task: validate() refuses one set for it.
  std::optional<model::TokenTask> task;
  model::Optimizer optimizer = model::Optimizer::kAdamW;  ///< which of adamw / sgd applies
  /// AdamW (lr, β1, β2, ε, weight decay); decay only where ParamView::decay.
  kernels::AdamWConfig adamw{/*lr*/ 3e-3, 0.9, 0.95, 1e-8, /*weight_decay*/ 0.1};
  /// SGD (lr, momentum, weight decay); decay only where ParamView::decay.
  kernels::SgdConfig sgd{/*lr*/ 0.1, /*momentum*/ 0.9, 0.0};
  std::int64_t warmup_steps = 30;  ///< linear learning-rate warm-up (0: none)
  double clip_norm = 1.0;          ///< global gradient-norm clip (0: none)
  DType dtype = DType::kFloat32;   ///< what the run computes in
  /// A configuration to train instead of model_config(model) (a test's
  /// variant); `model` should then name it.
  std::optional<model::ModelConfig> custom_config;

  /// The learning rate of the chosen optimizer.
  double lr() const;
  /// Sets the learning rate of the chosen optimizer.
  void set_lr(double lr);

  /// The model's configuration: custom_config, or model_config(model)
  /// (InvalidArgument for an unknown name or an invalid configuration).
  model::ModelConfig config() const;
  /// The reference trainer's options for this run (no times, no callback).
  model::TrainOptions options() const;
  /// Tokens per sequence actually used: seq_len, or the context when 0; 1 for the MLP.
  std::int64_t sequence() const;
  /// Tokens (GPT: batch·sequence()) or rows (MLP) per step.
  std::int64_t tokens_per_step() const;
  /// Checks every field in force: counts in range, enums inside their enum,
  /// and the chosen optimizer's hyper-parameters finite and in range (lr > 0,
  /// betas and momentum in [0, 1), eps > 0, weight decay and clip >= 0);
  /// InvalidArgument naming the field and its value. Every entry point (the
  /// dtw program, the harness, the reference trainer, Replica) calls it.
  void validate() const;
  /// One line naming every hyper-parameter in force, for a run's header:
  /// "gpt-tiny, 200 steps, batch 8 x 64 tokens, corpus text, adamw lr 0.003
  /// (beta1 0.9, beta2 0.95, eps 1e-08, weight decay 0.1), warm-up 30 steps,
  /// clip 1, seed 1234, float32".
  std::string hyperparameters() const;
  /// One line naming every field, e.g. for logs and as the reference's memo key.
  std::string describe() const;
};

/// The standard run of `model`: corpus text (GPT), AdamW at its default rate
/// with 30 warm-up steps, clip 1, batch 8, seed 1234, 200 steps, float32.
/// InvalidArgument for an unknown model.
RunSpec standard_run(std::string_view model);

/// The run that `model::train_reference(config, steps, options)` describes
/// (its options' own fields; the model's unit tests use them).
RunSpec run_from_options(const model::ModelConfig& config, std::int64_t steps,
                         const model::TrainOptions& options, DType dtype);

/// A conservative estimate, in bytes, of the memory one rank of a run of
/// `spec` on `ranks` ranks holds, which the harness declares to the launch
/// (LaunchOptions::bytes_per_rank) so that a run that cannot fit is refused
/// before any rank starts, with the need and the machine's room, instead of
/// failing in a rank with `std::bad_alloc` or being killed by the system. It
/// counts the whole model on every rank (no strategy shards less than that):
/// five copies of the parameters (the parameters, their gradients, two
/// AdamW moments or SGD's momentum, and the copy a rank reports for the
/// comparison with the reference), and the activations of the rank's largest
/// data-parallel shard of the batch (ceil(batch / ranks) rows, whole
/// sequences), twice over (the forward keeps them, the backward's gradients
/// are as large), in spec.dtype. It leaves out the reference's own
/// single-device run, computed once per process when the harness compares,
/// and a strategy's message buffers. Saturates at INT64_MAX; InvalidArgument
/// when `ranks` < 1 or spec's model is unknown.
std::int64_t rank_bytes_estimate(const RunSpec& spec, int ranks);

/// Rows [begin, end) of the global batch that data shard `shard` of `shards`
/// reads: the batch split into `shards` contiguous, nearly equal parts (the
/// first batch % shards shards get one more), so the shards concatenated are
/// the whole batch. InvalidArgument when shard is outside [0, shards) or there
/// are more shards than rows.
struct ShardRows {
  std::int64_t begin = 0;  ///< first row of the shard
  std::int64_t end = 0;    ///< one past its last row
  /// Rows in the shard.
  std::int64_t size() const { return end - begin; }
};
ShardRows shard_rows(const RunSpec& spec, std::int64_t shard, std::int64_t shards);

/// Raises InvalidArgument unless the global batch splits evenly over `shards`
/// data-parallel ranks, naming `who` (the strategy), the batch and the ranks.
void require_even_split(const RunSpec& spec, std::int64_t shards, std::string_view who);

/// One shard's data for one step, for either kind of model.
struct Batch {
  std::int64_t rows = 0;              ///< sequences (GPT) or examples (MLP)
  std::int64_t seq_len = 1;           ///< tokens per sequence (1 for the MLP)
  std::vector<std::int32_t> tokens;   ///< GPT inputs [rows, seq_len]
  std::vector<std::int32_t> targets;  ///< GPT targets [rows, seq_len]
  std::vector<float> inputs;          ///< MLP inputs [rows, features]
  std::vector<std::int32_t> labels;   ///< MLP labels [rows]
  /// The fraction of the global batch this shard holds (rows / batch): the
  /// weight of its mean loss in the global mean.
  double weight = 1;
};

/// Step `step`'s rows shard_rows(spec, shard, shards): exactly the rows the
/// reference's whole batch has there, whether or not the batch divides.
Batch make_batch(const RunSpec& spec, std::int64_t step, std::int64_t shard = 0,
                 std::int64_t shards = 1);

}  // namespace dtw::train
