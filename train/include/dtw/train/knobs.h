#pragma once
/// @file
/// A strategy's parameters as the command line gives them
/// (`dtw train --set bucket_kib=64`): what a rank function reads through
/// RankRun::knobs() and what a registration declares (Knob, in
/// strategy_registry.h).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dtw::train {

/// Strategy parameters from the command line (`--set bucket_kib=64`) or a test.
class Knobs {
 public:
  Knobs() = default;
  /// From "key=value" strings; InvalidArgument for one without '=' and for a
  /// key given twice (`--set check_every=1 --set check_every=2`: which one
  /// was meant?), naming the key and both values.
  static Knobs parse(const std::vector<std::string>& assignments);
  /// Sets `key` to `value`.
  Knobs& set(const std::string& key, const std::string& value);
  /// True when `key` was given.
  bool has(std::string_view key) const;
  /// The value of `key`, or `fallback`.
  std::string get(std::string_view key, std::string_view fallback) const;
  /// The integer value of `key`, or `fallback`; InvalidArgument naming the key
  /// when the value is not an integer.
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  /// The number value of `key`, or `fallback` (InvalidArgument likewise).
  double get_double(std::string_view key, double fallback) const;
  /// "bucket_kib=64 micro_batches=8" (empty when none).
  std::string describe() const;
  /// The keys given, in sorted order.
  std::vector<std::string> keys() const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace dtw::train
