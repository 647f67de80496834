// The units of a model: consecutive views grouped by layer (units.h).
#include "dtw/model/units.h"

#include <algorithm>
#include <memory>
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

bool head_is_tied(const ModelConfig& config) {
  return config.kind == ModelKind::kGpt && config.tied_head;
}

TiedWte tied_wte(const ModelConfig& config, const ParamLayout& layout) {
  if (!head_is_tied(config)) return {};
  const ParamView& wte = layout.find("wte");
  return {wte.offset, wte.offset + wte.size};
}

GradReady whole_units(std::vector<Unit> units, GradReady on_unit) {
  // What each unit still misses in this pass; shared by the copies a
  // std::function makes of the returned closure.
  auto missing = std::make_shared<std::vector<std::int64_t>>();
  for (const Unit& u : units) missing->push_back(u.size());
  return [units = std::move(units), missing, on_unit = std::move(on_unit)](std::int64_t begin,
                                                                           std::int64_t end) {
    // Units tile the buffer in order: the one holding `begin` is the last
    // that starts at or before it.
    const auto it = std::upper_bound(units.begin(), units.end(), begin,
                                     [](std::int64_t b, const Unit& u) { return b < u.begin; });
    DTW_CHECK_ARG(it != units.begin() && end <= std::prev(it)->end && begin <= end,
                  "whole_units: the reported range [" << begin << ", " << end
                                                      << ") is not inside one unit");
    const Unit& u = *std::prev(it);
    std::int64_t& left = (*missing)[static_cast<std::size_t>(std::prev(it) - units.begin())];
    left -= end - begin;
    DTW_CHECK_ARG(left >= 0, "whole_units: unit " << u.name << " [" << u.begin << ", " << u.end
                                                  << ") got [" << begin << ", " << end
                                                  << ") reported after all of it was final");
    if (left > 0 || begin == end) return;
    left = u.size();
    if (on_unit) on_unit(u.begin, u.end);
  };
}

}  // namespace dtw::model
