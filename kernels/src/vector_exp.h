// A float e^x that GCC can vectorise, and row loops built on it (internal to
// dtw_kernels).
//
// glibc's expf is accurate but is a function call, so a loop that calls it
// stays scalar at ~3–4 ns per element; softmax, cross-entropy and attention
// exponentiate every score, which made them twice as slow as their matmuls.
// exp_poly below uses arithmetic and integer bit operations only, so a
// fixed-length loop of it becomes SSE code (4 lanes) at -O2 and -O3 alike:
//  - range reduction: z = n·ln2 + r with n = round(z·log2 e), |r| ≤ ln2/2
//    (plus a hair when z·log2 e rounds). ln2 is split in two: its high part
//    has 9 significant bits, so n·ln2_hi is exact for |n| ≤ 2⁸ and z − n·ln2_hi
//    is exact too (both are multiples of 2⁻¹⁷ and the difference is < 1);
//  - polynomial: e^r by its Taylor series to r⁷ in Horner form; the first
//    omitted term, r⁸/8!, is below 6·10⁻⁹ (0.05 ulp) relative;
//  - reconstruction: 2ⁿ as floats built from exponent fields, in two halves
//    2^⌊n/2⌋·2^(n−⌊n/2⌋) so that n = 128 (z up to ln FLT_MAX) still works.
//    Multiplying by a power of two is exact while the result is normal.
// Measured over every float in [kExpUnderflow, ln FLT_MAX] against double
// exp: at most 1 ulp from the exact value (tests/kernels/vector_exp_test.cpp
// checks a dense grid against long double).
//
// Double keeps std::exp everywhere: double kernels are the gradient-check
// reference, and their speed does not matter.
#ifndef DTW_KERNELS_SRC_VECTOR_EXP_H_
#define DTW_KERNELS_SRC_VECTOR_EXP_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace dtw::kernels::detail {

// Smallest float whose e^z is a normal float (≥ 2⁻¹²⁶ ≈ 1.18e-38): it lies just
// above ln 2⁻¹²⁶ = −87.336544750553…, and e^z ≥ 2⁻¹²⁶·(1 + 4.4e-6) there, far
// more than exp_poly's error. Below it exp_flush returns exactly 0.
inline constexpr float kExpUnderflow = -87.33654022216797f;
// Largest float whose e^z is finite (ln FLT_MAX = 88.7228390520683…); above
// it exp_flush returns +∞, as std::exp does.
inline constexpr float kExpOverflow = 88.72283172607422f;

// e^z for z in [−88, 88.8] (not checked): in the normal range within 1 ulp;
// beyond ln FLT_MAX it overflows to +∞, below kExpUnderflow it may come out
// subnormal. No float comparison and no branch, so loops of it vectorise.
inline float exp_poly(float z) {
  // Adding and removing 1.5·2²³ rounds to the nearest integer (|z·log2 e| < 2²²).
  constexpr float kRound = 12582912.0f;
  const float n = (z * 1.44269504f + kRound) - kRound;
  const float r = (z - n * 0.693359375f) - n * -2.12194440e-4f;  // ln2 = hi + lo
  float p = 1.0f / 5040;  // Horner's rule, from the r⁷ coefficient down
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 1.0f / 2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2ⁿ = 2^h · 2^(n−h), h = ⌊n/2⌋: each half lies in [−64, 64], a normal
  // float whose exponent field is the half plus 127.
  const auto k = static_cast<std::int32_t>(n);
  const std::int32_t h = k >> 1;
  return p * std::bit_cast<float>((h + 127) << 23) * std::bit_cast<float>((k - h + 127) << 23);
}

// e^z with |z| clamped to 87, so the result always lies in [e⁻⁸⁷, e⁸⁷]: finite
// and normal, and so is 1/(1 + e^z). GELU wants exactly that (its e^(−2u) may
// be ~e^(10⁶), and a NaN from ∞·0 would be worse than the tiny error). The
// clamp works on the integer bits of |z| because GCC will not vectorise a
// float comparison that might trap. A NaN z comes out as e^±87, not NaN.
inline float exp_saturating(float z) {
  constexpr auto kMaxBits = std::bit_cast<std::int32_t>(87.0f);
  const auto bits = std::bit_cast<std::int32_t>(z);
  const std::int32_t magnitude = std::min(bits & 0x7fffffff, kMaxBits);
  return exp_poly(std::bit_cast<float>((bits & ~0x7fffffff) | magnitude));
}

// Double is for gradient checks, not speed: the library exp, kept finite.
inline double exp_saturating(double z) { return std::exp(std::min(z, 700.0)); }

// e^z as std::exp computes it, within 1 ulp, except that results below the
// normal range are returned as exactly 0 (for z < kExpUnderflow, −∞ included):
// as a probability that is an absolute error under 1.2e-38, and it keeps
// subnormal arithmetic, which costs ~100 cycles per operation on x86, out of
// softmax rows whose tails underflow. z > kExpOverflow (+∞ included) gives
// +∞, and a NaN stays NaN. Branch-free, on integer bits, as exp_saturating.
inline float exp_flush(float z) {
  constexpr auto kLowBits = std::bit_cast<std::int32_t>(-kExpUnderflow);
  constexpr auto kHighBits = std::bit_cast<std::int32_t>(88.8f);  // overflows to +∞ in exp_poly
  constexpr std::int32_t kInfBits = 0x7f800000;
  const auto bits = std::bit_cast<std::int32_t>(z);
  const std::int32_t magnitude = bits & 0x7fffffff;
  const bool negative = bits < 0;
  // Clamp into exp_poly's range: −kExpUnderflow below, 88.8 above.
  const std::int32_t limit = negative ? kLowBits : kHighBits;
  const float e =
      exp_poly(std::bit_cast<float>((bits & ~0x7fffffff) | std::min(magnitude, limit)));
  const std::int32_t e_bits = std::bit_cast<std::int32_t>(e);
  // Then patch the two cases the clamp got wrong: underflow → +0, NaN → quiet NaN.
  const std::int32_t flushed = negative && magnitude > kLowBits ? 0 : e_bits;
  return std::bit_cast<float>(magnitude > kInfBits ? bits | 0x00400000 : flushed);
}

// The exp of the row loops below: exp_flush in float, std::exp in double.
inline float exp_row_element(float z) { return exp_flush(z); }
inline double exp_row_element(double z) { return std::exp(z); }

// Row loops take kExpBlock elements at a time: a loop with a fixed trip count
// is what GCC vectorises at -O2, where its cost model skips loops of unknown
// length. The tail uses the same function one element at a time, so a result
// does not depend on where in the row it sits. y may be x: each block is read
// before it is written.
inline constexpr std::int64_t kExpBlock = 16;

// y[i] = e^(x[i] − shift) for i < n.
template <class T>
void exp_shifted(T* y, const T* x, T shift, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kExpBlock <= n; i += kExpBlock) {
    T v[kExpBlock];
    for (std::int64_t j = 0; j < kExpBlock; ++j) v[j] = exp_row_element(x[i + j] - shift);
    for (std::int64_t j = 0; j < kExpBlock; ++j) y[i + j] = v[j];
  }
  for (; i < n; ++i) y[i] = exp_row_element(x[i] - shift);
}

// As exp_shifted, and returns Σ y[i] summed in double: in kExpBlock
// interleaved partial sums, which vectorise (one running sum would be a chain
// of dependent adds, ~1 ns per element), in a fixed order, so every call on
// the same row returns the same sum.
template <class T>
double exp_shifted_sum(T* y, const T* x, T shift, std::int64_t n) {
  double part[kExpBlock] = {};
  std::int64_t i = 0;
  for (; i + kExpBlock <= n; i += kExpBlock) {
    T v[kExpBlock];
    for (std::int64_t j = 0; j < kExpBlock; ++j) v[j] = exp_row_element(x[i + j] - shift);
    for (std::int64_t j = 0; j < kExpBlock; ++j) y[i + j] = v[j];
    for (std::int64_t j = 0; j < kExpBlock; ++j) part[j] += static_cast<double>(v[j]);
  }
  for (; i < n; ++i) {
    y[i] = exp_row_element(x[i] - shift);
    part[0] += static_cast<double>(y[i]);
  }
  double sum = 0;
  for (const double s : part) sum += s;
  return sum;
}

}  // namespace dtw::kernels::detail

#endif  // DTW_KERNELS_SRC_VECTOR_EXP_H_
