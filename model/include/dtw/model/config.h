#pragma once
/// @file
/// Model configurations: the shapes of the networks every training chapter
/// trains, by name ("mlp-tiny", "gpt-tiny", "gpt-small").
///
/// One struct holds both kinds of model; the fields of the other kind stay 0.
/// Chapters split these models across ranks (data, pipeline, tensor and
/// sequence parallelism), so the sizes that a split must divide are part of
/// the configuration: heads (tensor parallelism splits them), layers (a
/// pipeline stage owns a contiguous range of them), context (sequence
/// parallelism splits it).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtw::model {

/// Which network a configuration describes.
enum class ModelKind {
  /// Linear → GELU → … → Linear → softmax cross-entropy over `classes`.
  kMlp,
  /// A GPT-2 style decoder-only transformer (pre-norm blocks, learned
  /// positions, GELU MLP, causal attention).
  kGpt,
};

/// "mlp" or "gpt".
const char* name_of(ModelKind kind);

/// The shape of one model. See model_config() for the named ones.
struct ModelConfig {
  std::string name;                 ///< e.g. "gpt-tiny"; names the model in errors and reports
  ModelKind kind = ModelKind::kGpt;  ///< which network; selects the field group below

  // ---- GPT ----
  std::int64_t vocab = 0;       ///< token ids are in [0, vocab)
  std::int64_t context = 0;     ///< longest sequence (rows of the position table)
  std::int64_t dim = 0;         ///< width of the residual stream (C)
  std::int64_t heads = 0;       ///< attention heads; dim % heads == 0
  std::int64_t layers = 0;      ///< transformer blocks
  std::int64_t mlp_hidden = 0;  ///< width of each block's MLP (4·dim in GPT-2)
  bool tied_head = true;        ///< the output head reuses the token embedding wte

  // ---- MLP ----
  std::int64_t features = 0;         ///< input width
  std::vector<std::int64_t> hidden;  ///< widths of the hidden layers, in order
  std::int64_t classes = 0;          ///< output width (classes of the task)

  /// dim / heads (GPT).
  std::int64_t head_dim() const { return heads > 0 ? dim / heads : 0; }
};

/// Checks a configuration: positive sizes, dim divisible by heads (GPT), at
/// least one class (MLP). Raises InvalidArgument naming the field and value.
void validate(const ModelConfig& config);

/// The named configuration:
/// - "mlp-tiny": features 16, hidden {64, 64}, classes 8;
/// - "gpt-tiny": vocab 96 (kCharVocab), context 32, dim 64, 4 heads, 2 layers,
///   mlp_hidden 256, tied head (for tests: trains in a second);
/// - "gpt-small": vocab 96, context 128, dim 256, 8 heads, 4 layers,
///   mlp_hidden 1024, tied head (for benchmarks).
/// An unknown name raises InvalidArgument listing the known ones.
ModelConfig model_config(std::string_view name);

/// The names model_config() knows, in the order above.
std::vector<std::string> model_names();

}  // namespace dtw::model
