// The units of a model: consecutive views grouped by layer (units.h).
#include "dtw/model/units.h"

#include <string>

#include "dtw/errors.h"

namespace dtw::model {

std::vector<Unit> model_units(const ModelConfig& config, const ParamLayout& layout) {
  std::vector<Unit> units;
  const bool gpt = config.kind == ModelKind::kGpt;
  bool seen_layer = false;
  for (const ParamView& v : layout.views()) {
    // GPT: the −1 views before block 0 are the embedding, those after the last
    // block the head; MLP: every view has its linear layer's index.
    std::string name;
    if (v.layer >= 0) name = (gpt ? "h." : "fc.") + std::to_string(v.layer);
    else name = seen_layer ? "head" : "embed";
    seen_layer = seen_layer || v.layer >= 0;
    if (units.empty() || units.back().name != name) units.push_back({name, v.offset, v.offset});
    units.back().end = v.offset + v.size;
  }
  DTW_CHECK_ARG(!units.empty() && units.back().end == layout.size(),
                "model_units: the layout of " << config.name << " has no parameters");
  return units;
}

}  // namespace dtw::model
