#pragma once
// Terminal styling for the dtw program: colour only when stdout is a terminal
// and NO_COLOR is unset (https://no-color.org), plain text when piped.
#include <string>
#include <string_view>

namespace dtw::cli {

enum class Paint { kBold, kDim, kRed, kGreen, kYellow, kCyan };

/// True when output may carry ANSI colour codes.
bool color_enabled();
/// `text` wrapped in the colour's escape codes, or unchanged when colour is off.
std::string paint(Paint paint, std::string_view text);
/// `text` padded with spaces to `width` columns, then painted (padding first,
/// so escape codes never count toward the width).
std::string paint_padded(Paint paint, std::string_view text, std::size_t width);

/// `text` broken into lines of at most `width` columns at spaces; lines after
/// the first start with `indent`.
std::string wrap(std::string_view text, std::size_t width, std::string_view indent);

/// "1.5 KiB", "3.2 MiB", ...
std::string human_bytes(double bytes);
/// "850 us", "12.3 ms", "1.40 s"
std::string human_seconds(double seconds);

/// Prints "dtw: error: <message>" to stderr.
void print_error(std::string_view message);

}  // namespace dtw::cli
