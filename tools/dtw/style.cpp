#include "style.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace dtw::cli {

namespace {
bool no_color_requested() {
  const char* no_color = std::getenv("NO_COLOR");
  return no_color != nullptr && *no_color != '\0';
}
}  // namespace

bool color_enabled() {
  static const bool enabled = !no_color_requested() && isatty(STDOUT_FILENO) == 1;
  return enabled;
}

std::string paint(Paint paint, std::string_view text) {
  if (!color_enabled()) return std::string(text);
  const char* code = "";
  switch (paint) {
    case Paint::kBold: code = "1"; break;
    case Paint::kDim: code = "2"; break;
    case Paint::kRed: code = "31"; break;
    case Paint::kGreen: code = "32"; break;
    case Paint::kYellow: code = "33"; break;
    case Paint::kCyan: code = "36"; break;
  }
  return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

std::string paint_padded(Paint paint_with, std::string_view text, std::size_t width) {
  std::string padded(text);
  if (padded.size() < width) padded.append(width - padded.size(), ' ');
  return paint(paint_with, padded);
}

std::string human_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

std::string human_seconds(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.0f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.1f} ms", seconds * 1e3);
  return fmt::format("{:.2f} s", seconds);
}

void print_error(std::string_view message) {
  // stderr has its own terminal check: piping stdout must not colour stderr's text.
  const bool color = !no_color_requested() && isatty(STDERR_FILENO) == 1;
  std::fflush(stdout);
  fmt::print(stderr, "{}{}\n", color ? "\x1b[31mdtw: error:\x1b[0m " : "dtw: error: ", message);
}

std::string wrap(std::string_view text, std::size_t width, std::string_view indent) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out.append(line).append("\n").append(indent);
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line.append(word);
    start = end + 1;
  }
  return out + line;
}

}  // namespace dtw::cli
