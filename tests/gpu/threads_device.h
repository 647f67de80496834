#pragma once
// What the tests of the threads backend with device buffers share: the
// launch options (LaunchOptions::device "cuda") and inputs that differ per
// rank and per index, so a block from the wrong rank or place fails.
#include <chrono>
#include <cstdint>
#include <vector>

#include "dtw/launch.h"

namespace dtw::testing {

/// Threads ranks sharing the machine's GPU(s), rank r on device r % count.
inline LaunchOptions device_threads() {
  LaunchOptions options;
  options.device = "cuda";
  options.timeout = std::chrono::seconds(60);
  return options;
}

/// Small integers (exact in float), different for every rank and index.
template <class T>
std::vector<T> host_input(int rank, std::int64_t n) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<T>((i * 3 + rank * 7) % 11 - 5);
  return v;
}

}  // namespace dtw::testing
