#pragma once
// Numbers from the command line, parsed by dtw rather than by CLI11: an
// integer that does not fit its type is an error, never clamped (CLI11 keeps
// strtoll's LLONG_MAX) or wrapped (strtoull reads -1 as 2^64-1); a real must
// be finite; and a range is said in words ("--batch must be at least 1, got 0"),
// not as "Value 0 not in range 0.000000 to 1797...".
#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtw::cli {

struct IntRange {
  std::int64_t min = std::numeric_limits<std::int64_t>::min();
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
};
struct RealRange {
  double min = -std::numeric_limits<double>::infinity();
  bool min_exclusive = false;  // true: the value must be greater than min
  double max = std::numeric_limits<double>::infinity();
};

// Parse `text` given to `flag`; CLI::ValidationError with a readable message
// (naming the flag, the text and the range) otherwise.
std::int64_t parse_int(std::string_view flag, std::string_view text, IntRange range);
std::uint64_t parse_uint(std::string_view flag, std::string_view text);
double parse_real(std::string_view flag, std::string_view text, RealRange range);
// A size in bytes: a non-negative integer with an optional binary suffix, K,
// M, G or T (1024-based; KB and KiB read as K, any case): "4096", "64K",
// "256M", "1G". Memory is counted in powers of two, and a cap typed as "64M"
// should mean what the tables print as "64.0 MiB".
std::int64_t parse_bytes(std::string_view flag, std::string_view text);

// A comma-separated list ("1,2,4,8"), each item as parse_int reads it; an
// empty list, an empty item or a value given twice is an error too (every
// list is a sweep, one row per value).
std::vector<std::int64_t> parse_int_list(std::string_view flag, std::string_view text,
                                         IntRange range);
// A comma-separated list of names, each one of `known`; otherwise an error
// naming the unknown one and listing the known ones. No name twice, none empty.
std::vector<std::string> parse_name_list(std::string_view flag, std::string_view text,
                                         const std::vector<std::string>& known);

// Options that parse with the functions above; the help shows the default.
CLI::Option* add_int(CLI::App& app, const std::string& flag, std::int64_t& target,
                     const std::string& help, IntRange range = {});
CLI::Option* add_int(CLI::App& app, const std::string& flag, int& target, const std::string& help,
                     IntRange range = {});
CLI::Option* add_uint(CLI::App& app, const std::string& flag, std::uint64_t& target,
                      const std::string& help);
CLI::Option* add_real(CLI::App& app, const std::string& flag, double& target,
                      const std::string& help, RealRange range = {});
CLI::Option* add_bytes(CLI::App& app, const std::string& flag, std::int64_t& target,
                       const std::string& help);
CLI::Option* add_int_list(CLI::App& app, const std::string& flag, std::vector<std::int64_t>& target,
                          const std::string& help, IntRange range = {});
CLI::Option* add_int_list(CLI::App& app, const std::string& flag, std::vector<int>& target,
                          const std::string& help, IntRange range = {});
// One name of `known` (a single value; parse_name_list's message otherwise).
CLI::Option* add_name(CLI::App& app, const std::string& flag, std::string& target,
                      const std::string& help, std::vector<std::string> known);
// Left empty unless given: the caller can tell "not given" from any value.
CLI::Option* add_int(CLI::App& app, const std::string& flag, std::optional<std::int64_t>& target,
                     const std::string& help, IntRange range = {});
CLI::Option* add_real(CLI::App& app, const std::string& flag, std::optional<double>& target,
                      const std::string& help, RealRange range = {});

// A path (a file, a folder or a file stem): any text but the empty one, which
// is refused ("--json: the path is empty") rather than read as "not given".
CLI::Option* add_path(CLI::App& app, const std::string& flag, std::string& target,
                      const std::string& help);

// CLI11's message for `e`, in dtw's words where CLI11's are raw: an option
// given twice ("--ranks: At Most 1 required but received 2") reads
// "--ranks is given 2 times: give it once". Other messages pass unchanged.
std::string parse_error_text(const CLI::ParseError& e);

}  // namespace dtw::cli
