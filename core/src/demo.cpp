#include "dtw/demo.h"

#include <cstdio>
#include <cstdlib>

namespace dtw {
namespace {
std::vector<Demo>& registry() {
  static std::vector<Demo> all;
  return all;
}
}  // namespace

const std::vector<Demo>& demos() { return registry(); }

bool register_demo(Demo demo) {
  registry().push_back(std::move(demo));
  return true;
}

std::string bandwidth_text(double bytes_per_second) {
  static const char* const kUnits[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  if (!(bytes_per_second > 0)) return "0 B/s";
  // Three significant digits, rounded before the unit is chosen: 999.96 MB/s
  // reads "1.00 GB/s", not "1000 MB/s".
  const auto three = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return std::strtod(text, nullptr);
  };
  double value = bytes_per_second;
  int unit = 0;
  while (unit < 4 && three(value) >= 1000) {
    value /= 1000;
    ++unit;
  }
  const double shown = three(value);
  const int decimals = unit == 0 || shown >= 100 ? 0 : shown >= 10 ? 1 : 2;
  char text[48];
  std::snprintf(text, sizeof text, "%.*f %s", decimals, shown, kUnits[unit]);
  return text;
}

}  // namespace dtw
