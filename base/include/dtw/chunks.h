#pragma once
/// @file
/// `dtw::Chunks`: split n elements into p nearly equal, contiguous chunks.

#include <cstdint>
#include <span>

#include "dtw/errors.h"

namespace dtw {

/// n elements in p chunks; the first n % p chunks hold one element more.
/// Chunk indices wrap modulo p (chunk -1 is chunk p-1), which is what ring
/// algorithms want when they walk "r - s" steps around the ring.
class Chunks {
 public:
  /// Splits `n` elements into `p` chunks; InvalidArgument unless n >= 0 and p >= 1.
  Chunks(std::int64_t n, int p) : n_(n), p_(p) {
    DTW_CHECK_ARG(n >= 0 && p >= 1, "Chunks: need n >= 0 and p >= 1, got n = " << n << ", p = " << p);
  }
  /// Index `i` taken modulo p into [0, p).
  int wrap(int i) const { return ((i % p_) + p_) % p_; }
  /// Elements in chunk i.
  std::int64_t size(int i) const {
    const int c = wrap(i);
    return n_ / p_ + (c < n_ % p_ ? 1 : 0);
  }
  /// Offset of chunk i's first element.
  std::int64_t offset(int i) const {
    const int c = wrap(i);
    return c * (n_ / p_) + (c < n_ % p_ ? c : n_ % p_);
  }
  /// Chunk i of `data` (which must hold n elements).
  template <class T>
  std::span<T> of(std::span<T> data, int i) const {
    return data.subspan(static_cast<std::size_t>(offset(i)), static_cast<std::size_t>(size(i)));
  }
  /// Total number of elements, n.
  std::int64_t total() const { return n_; }
  /// Number of chunks, p.
  int count() const { return p_; }

 private:
  std::int64_t n_;
  int p_;
};

}  // namespace dtw
