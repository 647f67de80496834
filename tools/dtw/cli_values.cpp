#include "cli_values.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace dtw::cli {
namespace {

[[noreturn]] void refuse(std::string message) { throw CLI::ValidationError(std::move(message)); }

std::string shown(std::string_view text) { return text.empty() ? "''" : std::string(text); }

}  // namespace

std::int64_t parse_int(std::string_view flag, std::string_view text, IntRange range) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data() + (text.starts_with('+') ? 1 : 0), end, value);
  if (ec == std::errc::result_out_of_range && text.starts_with('-'))
    refuse(fmt::format("{} {} is too small (at least {})", flag, text, range.min));
  if (ec == std::errc::result_out_of_range)
    refuse(fmt::format("{} {} is too large (at most {})", flag, text, range.max));
  if (ec != std::errc() || ptr != end || text.empty())
    refuse(fmt::format("{} takes an integer, got {}", flag, shown(text)));
  if (value < range.min && range.max == std::numeric_limits<std::int64_t>::max())
    refuse(fmt::format("{} must be at least {}, got {}", flag, range.min, value));
  if (value < range.min || value > range.max)
    refuse(fmt::format("{} must be between {} and {}, got {}", flag, range.min, range.max, value));
  return value;
}

std::uint64_t parse_uint(std::string_view flag, std::string_view text) {
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data() + (text.starts_with('+') ? 1 : 0), end, value);
  if (ec == std::errc::result_out_of_range)
    refuse(fmt::format("{} {} is too large (at most {})", flag, text,
                       std::numeric_limits<std::uint64_t>::max()));
  if (ec != std::errc() || ptr != end || text.empty())
    refuse(fmt::format("{} takes a non-negative integer, got {}", flag, shown(text)));
  return value;
}

double parse_real(std::string_view flag, std::string_view text, RealRange range) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data() + (text.starts_with('+') ? 1 : 0), end, value);
  if (ec == std::errc::result_out_of_range)
    refuse(fmt::format("{} {} is out of the range of a double", flag, text));
  if (ec != std::errc() || ptr != end || text.empty())
    refuse(fmt::format("{} takes a number, got {}", flag, shown(text)));
  if (!std::isfinite(value)) refuse(fmt::format("{} must be a finite number, got {}", flag, text));
  const bool low = range.min_exclusive ? !(value > range.min) : value < range.min;
  if (low || value > range.max) {
    const std::string lower = range.min_exclusive ? (range.min == 0 ? "positive" : fmt::format("greater than {}", range.min))
                                                  : fmt::format("at least {}", range.min);
    if (std::isinf(range.max)) refuse(fmt::format("{} must be {}, got {}", flag, lower, text));
    refuse(fmt::format("{} must be {} and at most {}, got {}", flag, lower, range.max, text));
  }
  return value;
}

CLI::Option* add_int(CLI::App& app, const std::string& flag, std::int64_t& target,
                     const std::string& help, IntRange range) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag, range](const std::string& s) { target = parse_int(flag, s, range); },
          help)
      ->type_name("INT")
      ->default_str(std::to_string(target));
}

CLI::Option* add_int(CLI::App& app, const std::string& flag, int& target, const std::string& help,
                     IntRange range) {
  range.min = std::max<std::int64_t>(range.min, std::numeric_limits<int>::min());
  range.max = std::min<std::int64_t>(range.max, std::numeric_limits<int>::max());
  return app
      .add_option_function<std::string>(
          flag,
          [&target, flag, range](const std::string& s) {
            target = static_cast<int>(parse_int(flag, s, range));
          },
          help)
      ->type_name("INT")
      ->default_str(std::to_string(target));
}

CLI::Option* add_uint(CLI::App& app, const std::string& flag, std::uint64_t& target,
                      const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag](const std::string& s) { target = parse_uint(flag, s); }, help)
      ->type_name("UINT")
      ->default_str(std::to_string(target));
}

CLI::Option* add_real(CLI::App& app, const std::string& flag, double& target,
                      const std::string& help, RealRange range) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag, range](const std::string& s) { target = parse_real(flag, s, range); },
          help)
      ->type_name("NUMBER")
      ->default_str(fmt::format("{}", target));
}

CLI::Option* add_real(CLI::App& app, const std::string& flag, std::optional<double>& target,
                      const std::string& help, RealRange range) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag, range](const std::string& s) { target = parse_real(flag, s, range); },
          help)
      ->type_name("NUMBER");
}

}  // namespace dtw::cli
