// Knobs: a strategy's parameters, "key=value" as the command line gives them.
#include "dtw/train/knobs.h"

#include <exception>

#include "dtw/errors.h"

namespace dtw::train {

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

}  // namespace dtw::train
