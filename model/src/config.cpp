// The named model configurations and their validation.
#include "dtw/model/config.h"

#include <sstream>

#include "dtw/errors.h"
#include "dtw/model/data.h"

namespace dtw::model {
namespace {

ModelConfig mlp(std::string name, std::int64_t features, std::vector<std::int64_t> hidden,
                std::int64_t classes) {
  ModelConfig c;
  c.name = std::move(name);
  c.kind = ModelKind::kMlp;
  c.features = features;
  c.hidden = std::move(hidden);
  c.classes = classes;
  return c;
}

ModelConfig gpt(std::string name, std::int64_t context, std::int64_t dim, std::int64_t heads,
                std::int64_t layers) {
  ModelConfig c;
  c.name = std::move(name);
  c.kind = ModelKind::kGpt;
  c.vocab = kCharVocab;  // the character tokenizer's vocabulary (data.h)
  c.context = context;
  c.dim = dim;
  c.heads = heads;
  c.layers = layers;
  c.mlp_hidden = 4 * dim;  // GPT-2's ratio
  c.tied_head = true;
  return c;
}

// GPT-2 small itself: gpt-base with GPT-2's vocabulary of 50257 BPE tokens,
// 124 M parameters (124,439,808), the model llm.c's published GPU figures
// train. dtw has no BPE tokenizer: it trains on the synthetic task (any
// vocabulary) or on the character corpus, whose ids use the first 96 rows.
// The figure GPU benchmarks compare with llm.c's.
ModelConfig gpt2_124m() {
  ModelConfig c = gpt("gpt2-124m", 1024, 768, 12, 12);
  c.vocab = 50257;
  return c;
}

std::vector<ModelConfig> known_configs() {
  return {mlp("mlp-tiny", 16, {64, 64}, 8), gpt("gpt-tiny", 32, 64, 4, 2),
          gpt("gpt-small", 128, 256, 8, 4),
          // GPT-2 small's shape (12 blocks of 768, 12 heads, context 1024)
          // with the character vocabulary: about 85 M parameters. Too large
          // to train on a laptop's cores in a lesson; it is what `dtw plan`
          // and the GPU benchmarks size their figures with.
          gpt("gpt-base", 1024, 768, 12, 12), gpt2_124m()};
}

}  // namespace

const char* name_of(ModelKind kind) {
  return kind == ModelKind::kMlp ? "mlp" : "gpt";
}

void validate(const ModelConfig& c) {
  const std::string& n = c.name;
  if (c.kind == ModelKind::kMlp) {
    DTW_CHECK_ARG(c.features > 0,
                  "model " << n << ": features " << c.features << " must be positive");
    DTW_CHECK_ARG(c.classes > 0, "model " << n << ": classes " << c.classes << " must be positive");
    for (std::size_t i = 0; i < c.hidden.size(); ++i)
      DTW_CHECK_ARG(c.hidden[i] > 0, "model " << n << ": hidden width " << i << " is "
                                              << c.hidden[i] << ", must be positive");
    return;
  }
  DTW_CHECK_ARG(c.vocab > 0, "model " << n << ": vocab " << c.vocab << " must be positive");
  DTW_CHECK_ARG(c.vocab <= (std::int64_t{1} << 31) - 1,
                "model " << n << ": vocab " << c.vocab << " does not fit a 32-bit token id");
  DTW_CHECK_ARG(c.context > 0, "model " << n << ": context " << c.context << " must be positive");
  DTW_CHECK_ARG(c.dim > 0, "model " << n << ": dim " << c.dim << " must be positive");
  DTW_CHECK_ARG(c.heads > 0, "model " << n << ": heads " << c.heads << " must be positive");
  DTW_CHECK_ARG(c.dim % c.heads == 0,
                "model " << n << ": dim " << c.dim << " is not divisible by heads " << c.heads);
  DTW_CHECK_ARG(c.layers >= 0, "model " << n << ": layers " << c.layers << " must not be negative");
  DTW_CHECK_ARG(c.mlp_hidden > 0,
                "model " << n << ": mlp_hidden " << c.mlp_hidden << " must be positive");
}

ModelConfig model_config(std::string_view name) {
  for (ModelConfig& c : known_configs()) {
    if (c.name == name) return c;
  }
  std::ostringstream known;
  for (const std::string& k : model_names()) known << (known.tellp() > 0 ? ", " : "") << k;
  DTW_CHECK_ARG(false, "unknown model '" << name << "' (known: " << known.str() << ")");
  return {};
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const ModelConfig& c : known_configs()) names.push_back(c.name);
  return names;
}

}  // namespace dtw::model
