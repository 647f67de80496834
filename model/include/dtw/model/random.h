#pragma once
/// @file
/// Counter-based random numbers: a value is a pure function of a key, with no
/// generator state. Initial parameters and data samples are keyed by *what*
/// they are (seed, tensor, element index; seed, step, sample), never by the
/// order in which they are drawn, so a model split across ranks any which way
/// gets the same numbers as the whole model on one device.

#include <cmath>
#include <cstdint>
#include <string_view>

namespace dtw::model {

/// SplitMix64's finaliser: a bijective mix of 64 bits (Steele, Lea, Flood 2014).
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Hashes a key of up to four words.
constexpr std::uint64_t hash_key(std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0,
                                 std::uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

/// FNV-1a of a name, to key a tensor by its name rather than its position.
constexpr std::uint64_t hash_name(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ULL;
  return h;
}

/// Uniform in [0, 1) from the top 53 bits of a hash.
constexpr double uniform01(std::uint64_t h) {
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}

/// Standard normal from one hash (Box–Muller on two derived uniforms).
inline double normal(std::uint64_t h) {
  const double u1 = 1.0 - uniform01(mix64(h ^ 0x1ULL));  // (0, 1]: log is finite
  const double u2 = uniform01(mix64(h ^ 0x2ULL));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace dtw::model
