#include "cli_values.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace dtw::cli {
namespace {

[[noreturn]] void refuse(std::string message) { throw CLI::ValidationError(std::move(message)); }

std::string shown(std::string_view text) { return text.empty() ? "''" : std::string(text); }

// The items of a comma-separated list, empty ones included.
std::vector<std::string_view> items_of(std::string_view text) {
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

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

std::int64_t parse_bytes(std::string_view flag, std::string_view text) {
  // The digits, then the unit: letters at the end, compared upper-cased.
  std::size_t digits = text.size();
  while (digits > 0 && std::isalpha(static_cast<unsigned char>(text[digits - 1])) != 0) --digits;
  std::string unit;
  for (const char c : text.substr(digits))
    unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;  // log2 of the unit; -1: not a unit
  if (unit.empty() || unit == "B") shift = 0;
  constexpr std::string_view kPrefixes = "KMGT";
  const std::size_t prefix = unit.empty() ? std::string_view::npos : kPrefixes.find(unit[0]);
  if (prefix != std::string_view::npos &&
      (unit.size() == 1 || unit.substr(1) == "B" || unit.substr(1) == "IB"))
    shift = 10 * static_cast<int>(prefix + 1);
  std::int64_t value = 0;
  const std::string_view number = text.substr(0, digits);
  const char* end = number.data() + number.size();
  const auto [ptr, ec] =
      std::from_chars(number.data() + (number.starts_with('+') ? 1 : 0), end, value);
  if (ec == std::errc::result_out_of_range && !number.starts_with('-'))
    refuse(fmt::format("{} {} is too large (at most {} bytes)", flag, text,
                       std::numeric_limits<std::int64_t>::max()));
  if (shift < 0 || ec != std::errc() || ptr != end || number.empty())
    refuse(fmt::format("{} takes a size in bytes (e.g. 4096, 64K, 256M, 1G), got {}", flag,
                       shown(text)));
  if (value < 0) refuse(fmt::format("{} must be at least 0, got {}", flag, text));
  if (value > (std::numeric_limits<std::int64_t>::max() >> shift))
    refuse(fmt::format("{} {} is too large (at most {} bytes)", flag, text,
                       std::numeric_limits<std::int64_t>::max()));
  return value << shift;
}

std::vector<std::int64_t> parse_int_list(std::string_view flag, std::string_view text,
                                         IntRange range) {
  std::vector<std::int64_t> values;
  for (const std::string_view item : items_of(text)) {
    if (item.empty())
      refuse(fmt::format("{} takes a comma-separated list of integers, got {}", flag, shown(text)));
    const std::int64_t value = parse_int(flag, item, range);
    // Every list is a sweep (a row per value): a value twice would be a row twice.
    if (std::ranges::find(values, value) != values.end())
      refuse(fmt::format("{}: {} is given twice in {}", flag, value, text));
    values.push_back(value);
  }
  return values;
}

std::vector<std::string> parse_name_list(std::string_view flag, std::string_view text,
                                         const std::vector<std::string>& known) {
  std::vector<std::string> names;
  for (const std::string_view item : items_of(text)) {
    const std::string name(item);
    if (name.empty())  // "a,", ",a", "a,,b" and "": not an unknown name, a slip
      refuse(fmt::format("{} takes a comma-separated list of names, got {}: an empty item", flag,
                         shown(text)));
    if (std::ranges::find(known, name) == known.end())
      refuse(fmt::format("{}: unknown name {}; the known ones: {}", flag, shown(name),
                         fmt::join(known, ", ")));
    if (std::ranges::find(names, name) != names.end())
      refuse(fmt::format("{}: {} is named twice in {}", flag, name, text));
    names.push_back(name);
  }
  return names;
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

CLI::Option* add_bytes(CLI::App& app, const std::string& flag, std::int64_t& target,
                       const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag](const std::string& s) { target = parse_bytes(flag, s); }, help)
      ->type_name("SIZE")
      ->default_str(std::to_string(target));
}

namespace {
std::string joined(const std::vector<std::int64_t>& values) {
  return fmt::format("{}", fmt::join(values, ","));
}
}  // namespace

CLI::Option* add_int_list(CLI::App& app, const std::string& flag, std::vector<std::int64_t>& target,
                          const std::string& help, IntRange range) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag, range](const std::string& s) { target = parse_int_list(flag, s, range); },
          help)
      ->type_name("INT,...")
      ->default_str(joined(target));
}

CLI::Option* add_int_list(CLI::App& app, const std::string& flag, std::vector<int>& target,
                          const std::string& help, IntRange range) {
  range.min = std::max<std::int64_t>(range.min, std::numeric_limits<int>::min());
  range.max = std::min<std::int64_t>(range.max, std::numeric_limits<int>::max());
  return app
      .add_option_function<std::string>(
          flag,
          [&target, flag, range](const std::string& s) {
            target.clear();
            for (const std::int64_t v : parse_int_list(flag, s, range))
              target.push_back(static_cast<int>(v));
          },
          help)
      ->type_name("INT,...")
      ->default_str(fmt::format("{}", fmt::join(target, ",")));
}

CLI::Option* add_name(CLI::App& app, const std::string& flag, std::string& target,
                      const std::string& help, std::vector<std::string> known) {
  const std::string names = fmt::format("{}", fmt::join(known, "|"));
  return app
      .add_option_function<std::string>(
          flag,
          [&target, flag, known = std::move(known)](const std::string& s) {
            if (s.find(',') != std::string::npos)
              refuse(fmt::format("{} takes one name, got {}", flag, s));
            target = parse_name_list(flag, s, known).front();
          },
          help)
      ->type_name(names)
      ->default_str(target);
}

CLI::Option* add_int(CLI::App& app, const std::string& flag, std::optional<std::int64_t>& target,
                     const std::string& help, IntRange range) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag, range](const std::string& s) { target = parse_int(flag, s, range); },
          help)
      ->type_name("INT");
}

CLI::Option* add_real(CLI::App& app, const std::string& flag, std::optional<double>& target,
                      const std::string& help, RealRange range) {
  return app
      .add_option_function<std::string>(
          flag, [&target, flag, range](const std::string& s) { target = parse_real(flag, s, range); },
          help)
      ->type_name("NUMBER");
}

CLI::Option* add_path(CLI::App& app, const std::string& flag, std::string& target,
                      const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag,
          [&target, flag](const std::string& s) {
            if (s.empty()) refuse(fmt::format("{}: the path is empty (give a file name)", flag));
            target = s;
          },
          help)
      ->type_name("PATH");
}

std::string parse_error_text(const CLI::ParseError& e) {
  const std::string text = e.what();
  constexpr std::string_view kTwice = ": At Most 1 required but received ";
  const std::size_t at = text.find(kTwice);
  if (at == std::string::npos) return text;
  return fmt::format("{} is given {} times: give it once", text.substr(0, at),
                     text.substr(at + kTwice.size()));
}

}  // namespace dtw::cli
