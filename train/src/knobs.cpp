// Knobs (a strategy's parameters) and the checks of a strategy against a run
// before any rank runs: its knobs by name, its world, its own check hook.
#include <algorithm>
#include <sstream>

#include "dtw/errors.h"
#include "dtw/train/strategy.h"

namespace dtw::train {

// ---- Knobs ------------------------------------------------------------------------

Knobs Knobs::parse(const std::vector<std::string>& assignments) {
  Knobs k;
  for (const std::string& a : assignments) {
    const std::size_t eq = a.find('=');
    DTW_CHECK_ARG(eq != std::string::npos && eq > 0,
                  "strategy parameter '" << a << "' must read key=value");
    const std::string key = a.substr(0, eq);
    DTW_CHECK_ARG(!k.has(key), "strategy parameter " << key << " is given twice (" << key << "="
                                                     << k.get(key, "") << " and " << a
                                                     << "); give it once");
    k.set(key, a.substr(eq + 1));
  }
  return k;
}

Knobs& Knobs::set(const std::string& key, const std::string& value) {
  values_[key] = value;
  return *this;
}

bool Knobs::has(std::string_view key) const { return values_.find(key) != values_.end(); }

std::string Knobs::get(std::string_view key, std::string_view fallback) const {
  const auto it = values_.find(key);
  return it == values_.end() ? std::string(fallback) : it->second;
}

std::int64_t Knobs::get_int(std::string_view key, std::int64_t fallback) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::size_t used = 0;
  std::int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DTW_CHECK_ARG(used == it->second.size() && used > 0,
                "strategy parameter " << key << "=" << it->second << " is not an integer");
  return v;
}

double Knobs::get_double(std::string_view key, double fallback) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DTW_CHECK_ARG(used == it->second.size() && used > 0,
                "strategy parameter " << key << "=" << it->second << " is not a number");
  return v;
}

std::string Knobs::describe() const {
  std::string s;
  for (const auto& [k, v] : values_) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

std::vector<std::string> Knobs::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_) out.push_back(k);
  return out;
}

// ---- checks before a run --------------------------------------------------------

namespace {

// Edit distance (insertions, deletions, substitutions), for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Refuses a key `strategy` does not declare: a typo must not run the default.
void check_knob_names(const Strategy& strategy, const Knobs& knobs) {
  std::string known;
  for (const Knob& k : strategy.knobs) known += (known.empty() ? "" : ", ") + k.name;
  for (const std::string& key : knobs.keys()) {
    const auto declared = [&](const Knob& k) { return k.name == key; };
    if (std::any_of(strategy.knobs.begin(), strategy.knobs.end(), declared)) continue;
    std::string nearest;
    std::size_t best = std::max<std::size_t>(2, key.size() / 3) + 1;
    for (const Knob& k : strategy.knobs) {
      const std::size_t d = edit_distance(key, k.name);
      if (d < best) best = d, nearest = k.name;
    }
    DTW_CHECK_ARG(!known.empty(), "unknown knob '" << key << "': " << strategy.name
                                                   << " takes no knobs");
    DTW_CHECK_ARG(false, "unknown knob '" << key << "'"
                             << (nearest.empty() ? "" : " (did you mean " + nearest + "?)") << "; "
                             << strategy.name << "'s knobs are " << known
                             << " (dtw train --list describes them)");
  }
}

}  // namespace

std::string knobs_in_force(const Strategy& strategy, const RunSpec& spec, int ranks,
                           const Knobs& knobs) {
  std::string s;
  for (const Knob& k : strategy.knobs) {
    const std::string value = knobs.has(k.name) ? knobs.get(k.name, "")
                              : k.default_for  ? k.default_for(spec, ranks, knobs)
                                               : k.default_value;
    s += (s.empty() ? "" : " ") + k.name + "=" + value;
  }
  return s;
}

void check_strategy(const Strategy& strategy, const RunSpec& spec, int ranks, const Knobs& knobs) {
  spec.validate();  // the run's own fault, not the strategy's: no prefix
  try {
    check_knob_names(strategy, knobs);
    // "on exactly 1 rank", "on at least 2 ranks" (no bound but the default
    // 2^20), "on 2 to 8 ranks".
    std::ostringstream worlds;
    if (strategy.min_ranks == strategy.max_ranks)
      worlds << "exactly " << strategy.min_ranks << (strategy.min_ranks == 1 ? " rank" : " ranks");
    else if (strategy.max_ranks == Strategy{}.max_ranks)
      worlds << "at least " << strategy.min_ranks << (strategy.min_ranks == 1 ? " rank" : " ranks");
    else
      worlds << strategy.min_ranks << " to " << strategy.max_ranks << " ranks";
    DTW_CHECK_ARG(ranks >= strategy.min_ranks && ranks <= strategy.max_ranks,
                  "it runs on " << worlds.str() << ", not " << ranks);
    if (strategy.check) strategy.check(spec, ranks, knobs);
  } catch (const InvalidArgument& e) {
    const std::string set = knobs.describe();
    std::ostringstream who;
    who << "strategy " << strategy.name << " on " << ranks << (ranks == 1 ? " rank, " : " ranks, ")
        << spec.model << ", batch " << spec.batch << (set.empty() ? "" : ", " + set) << ": ";
    throw InvalidArgument(who.str() + e.what());
  }
}

}  // namespace dtw::train
