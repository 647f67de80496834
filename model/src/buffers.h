#pragma once
// Small helpers shared by the model's source files (not part of the API).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dtw/kernels/place.h"
#include "dtw/kernels/vector.h"

namespace dtw::model::detail {

// Resizes v to n elements (no-op when it already has them) and returns its data.
// Caches are reused from step to step, so after the first step this allocates nothing.
template <class T>
T* sized(std::vector<T>& v, std::int64_t n) {
  if (v.size() != static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// Moves b to `at` (where the kernels that fill it run) and resizes it to n
// elements; returns its data. The model's caches and scratch go through this,
// so each lives where the layer that writes it runs.
template <class T>
T* sized(kernels::Vector<T>& b, std::int64_t n, const kernels::Place& at) {
  b.set_place(at);
  if (b.size() != static_cast<std::size_t>(n)) b.resize(static_cast<std::size_t>(n));
  return b.data();
}

// 2·m·n·k: the floating-point operations of an m×k by k×n product.
inline double matmul_flops(std::int64_t m, std::int64_t n, std::int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

}  // namespace dtw::model::detail
