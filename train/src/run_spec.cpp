// RunSpec: the canonical run, its validation and the data each shard reads.
#include "dtw/train/run_spec.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "dtw/errors.h"
#include "dtw/model/params.h"

namespace dtw::train {

const char* name_of(DType dtype) { return dtype == DType::kFloat64 ? "float64" : "float32"; }

DType dtype_from_name(std::string_view name) {
  if (name == "float32" || name == "float" || name == "f32") return DType::kFloat32;
  if (name == "float64" || name == "double" || name == "f64") return DType::kFloat64;
  DTW_CHECK_ARG(false, "dtype '" << name << "' is not float32 or float64");
  return DType::kFloat32;
}

model::ModelConfig RunSpec::config() const {
  if (!custom_config) return model::model_config(model);
  model::validate(*custom_config);
  return *custom_config;
}

double RunSpec::lr() const { return optimizer == model::Optimizer::kAdamW ? adamw.lr : sgd.lr; }

void RunSpec::set_lr(double value) {
  if (optimizer == model::Optimizer::kAdamW) adamw.lr = value;
  else sgd.lr = value;
}

model::TrainOptions RunSpec::options() const {
  model::TrainOptions o;
  o.task = task.value_or(model::TokenTask::kCorpus);
  o.batch = batch;
  o.seq_len = seq_len;
  o.seed = seed;
  o.optimizer = optimizer;
  o.adamw = adamw;
  o.sgd = sgd;
  o.clip_norm = clip_norm;
  o.warmup_steps = warmup_steps;
  return o;
}

RunSpec run_from_options(const model::ModelConfig& config, std::int64_t steps,
                         const model::TrainOptions& o, DType dtype) {
  RunSpec spec;
  spec.model = config.name;
  spec.custom_config = config;
  spec.steps = steps;
  spec.batch = o.batch;
  // The trainer's options always carry a task and a sequence; only a GPT has them.
  const bool gpt = config.kind == model::ModelKind::kGpt;
  spec.seq_len = gpt ? o.seq_len : 0;
  spec.seed = o.seed;
  if (gpt) spec.task = o.task;
  spec.optimizer = o.optimizer;
  spec.adamw = o.adamw;
  spec.sgd = o.sgd;
  spec.warmup_steps = o.warmup_steps;
  spec.clip_norm = o.clip_norm;
  spec.dtype = dtype;
  return spec;
}

std::int64_t RunSpec::sequence() const {
  const model::ModelConfig c = config();
  if (c.kind != model::ModelKind::kGpt) return 1;
  return seq_len == 0 ? c.context : seq_len;
}

std::int64_t RunSpec::tokens_per_step() const { return batch * sequence(); }

namespace {
// A hyper-parameter must be a finite number inside its range: NaN fails every
// comparison, so each check is written as "inside", never as "not outside".
void check_real(double value, bool inside, std::string_view name, std::string_view range) {
  DTW_CHECK_ARG(std::isfinite(value) && inside,
                "RunSpec: " << name << " " << value << " must be " << range);
}
}  // namespace

void RunSpec::validate() const {
  const model::ModelConfig c = config();  // unknown model: InvalidArgument listing the known ones
  DTW_CHECK_ARG(steps >= 0, "RunSpec: steps " << steps << " must not be negative");
  DTW_CHECK_ARG(batch >= 1, "RunSpec: batch " << batch << " must be at least 1");
  const bool gpt = c.kind == model::ModelKind::kGpt;
  DTW_CHECK_ARG(seq_len >= 0, "RunSpec: seq_len " << seq_len << " must not be negative");
  DTW_CHECK_ARG(!gpt || seq_len <= c.context, "RunSpec: seq_len " << seq_len
                                                                  << " is outside [0, context "
                                                                  << c.context << "] of model "
                                                                  << c.name);
  // What the MLP does not use is refused, not ignored: the run would not be
  // the one asked for.
  DTW_CHECK_ARG(gpt || seq_len == 0, "RunSpec: seq_len " << seq_len << ": model " << c.name
                                                         << " is an MLP, which has no sequence "
                                                            "(leave seq_len out)");
  DTW_CHECK_ARG(gpt || !task, "RunSpec: task "
                                  << (task == model::TokenTask::kSynthetic ? "synthetic" : "corpus")
                                  << ": model " << c.name
                                  << " is an MLP, which trains on synthetic classification and "
                                     "has no token task (leave task out)");
  DTW_CHECK_ARG(!task || *task == model::TokenTask::kCorpus || *task == model::TokenTask::kSynthetic,
                "RunSpec: task " << static_cast<int>(task.value_or(model::TokenTask::kCorpus))
                                 << " is not a TokenTask");
  DTW_CHECK_ARG(optimizer == model::Optimizer::kAdamW || optimizer == model::Optimizer::kSgd,
                "RunSpec: optimizer " << static_cast<int>(optimizer) << " is not an Optimizer");
  DTW_CHECK_ARG(dtype == DType::kFloat32 || dtype == DType::kFloat64,
                "RunSpec: dtype " << static_cast<int>(dtype) << " is not a DType");
  // Only the chosen optimizer's hyper-parameters are in force, so only they are checked.
  check_real(lr(), lr() > 0, "learning rate", "positive");
  if (optimizer == model::Optimizer::kAdamW) {
    check_real(adamw.beta1, adamw.beta1 >= 0 && adamw.beta1 < 1, "adamw beta1", "in [0, 1)");
    check_real(adamw.beta2, adamw.beta2 >= 0 && adamw.beta2 < 1, "adamw beta2", "in [0, 1)");
    check_real(adamw.eps, adamw.eps > 0, "adamw eps", "positive");
    check_real(adamw.weight_decay, adamw.weight_decay >= 0, "adamw weight_decay", ">= 0");
  } else {
    check_real(sgd.momentum, sgd.momentum >= 0 && sgd.momentum < 1, "sgd momentum", "in [0, 1)");
    check_real(sgd.weight_decay, sgd.weight_decay >= 0, "sgd weight_decay", ">= 0");
  }
  DTW_CHECK_ARG(warmup_steps >= 0,
                "RunSpec: warmup_steps " << warmup_steps << " must not be negative");
  check_real(clip_norm, clip_norm >= 0, "clip_norm", ">= 0 (0: no clipping)");
}

namespace {
// Values (not bytes) of the activations a forward over the whole model keeps
// for `rows` rows of the batch: the same count as Gpt::activation_bytes and
// Mlp::activation_bytes over every unit, without building a model. Doubles:
// a batch from the command line can be as large as int64 allows.
double activation_values(const model::ModelConfig& c, double rows, double seq) {
  if (c.kind == model::ModelKind::kGpt) {
    const double n = rows * seq, dim = static_cast<double>(c.dim);
    const double w = static_cast<double>(c.heads * c.head_dim());
    const double heads = static_cast<double>(c.heads), f = static_cast<double>(c.mlp_hidden);
    const double per_block = 3 * n * dim + 4 * n + 8 * n * w + rows * heads * seq * seq + 2 * n * f;
    const double layers = static_cast<double>(c.layers);
    return (layers + 1) * n * dim + layers * per_block + n * dim + 3 * n +
           2 * n * static_cast<double>(c.vocab) + 2 * n;  // the head; tokens and targets
  }
  double per_row = static_cast<double>(c.features) + static_cast<double>(c.classes);  // x[0], x[n]
  for (const std::int64_t h : c.hidden) per_row += 2 * static_cast<double>(h);  // x and pre
  per_row += static_cast<double>(c.classes) + 2;  // probs, losses, labels
  return rows * per_row;
}
}  // namespace

std::int64_t rank_bytes_estimate(const RunSpec& spec, int ranks) {
  DTW_CHECK_ARG(ranks >= 1, "rank_bytes_estimate: ranks " << ranks << " must be at least 1");
  const model::ModelConfig c = spec.config();
  const double value = spec.dtype == DType::kFloat64 ? 8 : 4;
  const double params = static_cast<double>(model::param_layout(c).size());
  const double rows = std::ceil(static_cast<double>(spec.batch) / ranks);
  const double seq = static_cast<double>(spec.sequence());
  const double bytes = value * (5 * params + 2 * activation_values(c, rows, seq));
  constexpr double kMax = static_cast<double>(std::numeric_limits<std::int64_t>::max());
  return bytes >= kMax ? std::numeric_limits<std::int64_t>::max()
                       : static_cast<std::int64_t>(bytes);
}

std::string RunSpec::hyperparameters() const {
  const model::ModelConfig c = config();
  std::ostringstream s;
  s << model << ", " << steps << " steps, batch " << batch;
  if (c.kind == model::ModelKind::kGpt)
    s << " x " << sequence() << " tokens, "
      << (task.value_or(model::TokenTask::kCorpus) == model::TokenTask::kCorpus ? "corpus"
                                                                                : "synthetic")
      << " text";
  else
    s << " rows, synthetic classification";
  if (optimizer == model::Optimizer::kAdamW)
    s << ", adamw lr " << adamw.lr << " (beta1 " << adamw.beta1 << ", beta2 " << adamw.beta2
      << ", eps " << adamw.eps << ", weight decay " << adamw.weight_decay << ")";
  else
    s << ", sgd lr " << sgd.lr << " (momentum " << sgd.momentum << ", weight decay "
      << sgd.weight_decay << ")";
  s << ", warm-up " << warmup_steps << " steps, clip " << clip_norm;
  if (clip_norm == 0) s << " (none)";
  s << ", seed " << seed << ", " << name_of(dtype);
  return s.str();
}

std::string RunSpec::describe() const {
  std::ostringstream s;
  s.precision(17);  // the memo key of the reference: distinct runs must differ
  s << model << " steps " << steps << " batch " << batch << " seq_len " << sequence() << " seed "
    << seed << " task "
    << (task.value_or(model::TokenTask::kCorpus) == model::TokenTask::kCorpus ? "corpus"
                                                                              : "synthetic")
    << " "
    << (optimizer == model::Optimizer::kAdamW ? "adamw" : "sgd") << " adamw " << adamw.lr << ","
    << adamw.beta1 << "," << adamw.beta2 << "," << adamw.eps << "," << adamw.weight_decay
    << " sgd " << sgd.lr << "," << sgd.momentum << "," << sgd.weight_decay << " warmup "
    << warmup_steps << " clip " << clip_norm << " " << name_of(dtype);
  if (custom_config) {
    const model::ModelConfig& c = *custom_config;
    s << " custom " << model::name_of(c.kind) << " " << c.vocab << "," << c.context << "," << c.dim
      << "," << c.heads << "," << c.layers << "," << c.mlp_hidden << "," << c.tied_head << ","
      << c.features << "," << c.classes << " hidden";
    for (std::int64_t h : c.hidden) s << " " << h;
  }
  return s.str();
}

RunSpec standard_run(std::string_view model) {
  RunSpec spec;
  spec.model = std::string(model);
  spec.config();  // an unknown name fails here, listing the known ones
  return spec;
}

ShardRows shard_rows(const RunSpec& spec, std::int64_t shard, std::int64_t shards) {
  DTW_CHECK_ARG(shards >= 1 && shard >= 0 && shard < shards,
                "shard " << shard << " is outside [0, " << shards << ")");
  DTW_CHECK_ARG(shards <= spec.batch, "a global batch of "
                                          << spec.batch << " cannot be split over " << shards
                                          << " data shards: each needs at least one row");
  const std::int64_t base = spec.batch / shards, extra = spec.batch % shards;
  const std::int64_t begin = shard * base + std::min(shard, extra);
  return {begin, begin + base + (shard < extra ? 1 : 0)};
}

void require_even_split(const RunSpec& spec, std::int64_t shards, std::string_view who) {
  DTW_CHECK_ARG(shards >= 1 && spec.batch % shards == 0,
                who << ": the global batch of " << spec.batch << " does not split evenly over "
                    << shards << " data-parallel ranks (" << spec.batch << " % " << shards
                    << " = " << (shards >= 1 ? spec.batch % shards : spec.batch) << ")");
}

Batch make_batch(const RunSpec& spec, std::int64_t step, std::int64_t shard, std::int64_t shards) {
  const model::ModelConfig c = spec.config();
  const ShardRows rows = shard_rows(spec, shard, shards);
  Batch b;
  b.rows = rows.size();
  b.weight = static_cast<double>(rows.size()) / static_cast<double>(spec.batch);
  // Sample g of a step is a pure function of (seed, step, g), so an uneven
  // shard is the concatenation of its rows drawn one by one (shards = batch).
  const bool even = spec.batch % shards == 0;
  const std::int64_t parts = even ? shards : spec.batch;
  const std::int64_t first = even ? shard : rows.begin, last = even ? shard + 1 : rows.end;
  if (c.kind == model::ModelKind::kGpt) {
    b.seq_len = spec.sequence();
    for (std::int64_t g = first; g < last; ++g) {
      const model::TokenBatch t = model::token_batch(spec.task.value_or(model::TokenTask::kCorpus), spec.seed, step, spec.batch,
                                                     b.seq_len, c.vocab, g, parts);
      b.tokens.insert(b.tokens.end(), t.tokens.begin(), t.tokens.end());
      b.targets.insert(b.targets.end(), t.targets.begin(), t.targets.end());
    }
  } else {
    for (std::int64_t g = first; g < last; ++g) {
      const model::ClassBatch m =
          model::class_batch(spec.seed, step, spec.batch, c.features, c.classes, g, parts);
      b.inputs.insert(b.inputs.end(), m.inputs.begin(), m.inputs.end());
      b.labels.insert(b.labels.end(), m.labels.begin(), m.labels.end());
    }
  }
  return b;
}

}  // namespace dtw::train
