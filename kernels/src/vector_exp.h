// A float e^x that GCC can vectorise, and row loops built on it (internal to
// dtw_kernels).
//
// glibc's expf is accurate but is a function call, so a loop that calls it
// stays scalar at ~3–4 ns per element; softmax, cross-entropy and attention
// exponentiate every score, which made them twice as slow as their matmuls.
// The exps below use arithmetic and integer bit operations only, so a
// fixed-length loop of them becomes SSE code (4 lanes) at -O2 and -O3 alike
// (~1.7 ns per element in a long row on the dev machine's EPYC, against ~3.3
// for expf). In ISO mode (-std=c++20) GCC never contracts a·b + c into an
// FMA, so a vector lane and a scalar call round alike, on any x86-64.
// The method:
//  - range reduction: z = n·ln2 + r with n = round(z·log2 e), |r| ≤ ln2/2
//    (plus a hair when z·log2 e rounds). ln2 is split in two: its high part
//    has 9 significant bits, so n·ln2_hi is exact for |n| ≤ 2⁸ and z − n·ln2_hi
//    is exact too (both are multiples of 2⁻¹⁷ and the difference is < 1);
//  - polynomial: e^r by its Taylor series to r⁷ in Horner form; the first
//    omitted term, r⁸/8!, is below 6·10⁻⁹ (0.05 ulp) relative;
//  - reconstruction: 2ⁿ is the float whose exponent field is n + 127, and
//    multiplying by it is exact while the result is normal.
// Error: at most 1.22 ulp of the exact value, measured over every float in
// [kExpUnderflow, kExpOverflow] against double exp (0.5 ulp is the final
// rounding, the rest the Horner steps and r's rounding); exp(0) is exactly 1.
// tests/kernels/vector_exp_test.cpp checks 1.25 ulp on a dense grid.
//
// Double keeps std::exp everywhere: double kernels are the gradient-check
// reference, and their speed does not matter.
#ifndef DTW_KERNELS_SRC_VECTOR_EXP_H_
#define DTW_KERNELS_SRC_VECTOR_EXP_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace dtw::kernels::detail {

// e^z = p·2ⁿ with p = e^r in [0.70, 1.42]; for |z| ≤ 89 (not checked).
struct ExpParts {
  float p;
  std::int32_t n;
};

inline ExpParts exp_parts(float z) {
  // Adding 1.5·2²³ rounds z·log2 e to an integer n, held in the low bits of
  // t's significand (|n| < 2²²): t − 1.5·2²³ is n as a float, and the
  // difference of the bit patterns is n as an integer, with no float-to-int
  // conversion (which would be undefined for a NaN).
  constexpr float kRound = 12582912.0f;
  const float t = z * 1.44269504f + kRound;
  const float n = t - kRound;
  const float r = (z - n * 0.693359375f) - n * -2.12194440e-4f;  // ln2 = hi + lo
  float p = 1.0f / 5040;  // Horner's rule, from the r⁷ coefficient down
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 1.0f / 2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return {p, std::bit_cast<std::int32_t>(t) - std::bit_cast<std::int32_t>(kRound)};
}

// e^z with |z| clamped to 87, so the result always lies in [e⁻⁸⁷, e⁸⁷]: finite
// and normal, and so is 1/(1 + e^z). GELU wants exactly that (its e^(−2u) may
// be ~e^(10⁶), and a NaN from ∞·0 would be worse than the tiny error). The
// clamp is one integer min on the bits of |z|, for both signs at once. A NaN
// z comes out as e^±87, not NaN (GELU's x/(1 + e) is NaN all the same).
inline float exp_saturating(float z) {
  constexpr auto kMaxBits = std::bit_cast<std::int32_t>(87.0f);
  const auto bits = std::bit_cast<std::int32_t>(z);
  const std::int32_t magnitude = std::min(bits & 0x7fffffff, kMaxBits);
  const ExpParts e = exp_parts(std::bit_cast<float>((bits & ~0x7fffffff) | magnitude));
  return e.p * std::bit_cast<float>((e.n + 127) << 23);  // n in [−126, 126]
}

// Double is for gradient checks, not speed: the library exp, kept finite.
inline double exp_saturating(double z) {
  return std::exp(std::min(z, 700.0));
}

// Below kExpUnderflow, exp_flush returns exactly 0. e^−86.9 ≈ 1.8e-38 is just
// above the smallest normal float (2⁻¹²⁶ ≈ 1.18e-38), and n ≥ −125 from there
// on, which exp_flush needs (below).
inline constexpr float kExpUnderflow = -86.9f;
// Largest float whose e^z is finite (ln FLT_MAX = 88.7228390520683…); above
// it exp_flush returns +∞, as std::exp does.
inline constexpr float kExpOverflow = 88.72283172607422f;

// e^z as std::exp computes it, within 1.22 ulp, except that results below
// ~1.8e-38 are returned as exactly 0 (for z < kExpUnderflow, −∞ included): as
// a probability that is an absolute error under 1.8e-38, and it keeps
// subnormal arithmetic, which costs ~100 cycles per operation on x86, out of
// softmax rows whose tails underflow. z > kExpOverflow (+∞ included) gives
// +∞, and a NaN stays NaN.
inline float exp_flush(float z) {
  // Clamp into [kExpUnderflow, 88.8] (e^88.8 overflows to +∞ below), then
  // zero the underflowed results. Comparisons make masks and bit operations
  // apply them: written as `z < lo ? lo : z` ahead of arithmetic, GCC copies
  // the arithmetic into each branch (folding lo in) and the loop stays scalar.
  // Both comparisons are false for a NaN, which passes through.
  constexpr auto kLowBits = std::bit_cast<std::int32_t>(kExpUnderflow);
  constexpr auto kHighBits = std::bit_cast<std::int32_t>(88.8f);
  const std::int32_t low = z < kExpUnderflow ? -1 : 0;
  const std::int32_t high = z > 88.8f ? -1 : 0;
  const std::int32_t c =
      (std::bit_cast<std::int32_t>(z) & ~(low | high)) | (kLowBits & low) | (kHighBits & high);
  const ExpParts e = exp_parts(std::bit_cast<float>(c));
  // n runs from −125 to 128 here, and 2¹²⁸ is no float (exponent field 255
  // means ∞), so scale 2p (exact) by 2ⁿ⁻¹, whose fields run from 1 to 254.
  // Splitting 2ⁿ into two factors would work too, for four more operations.
  const float v = (e.p + e.p) * std::bit_cast<float>((e.n + 126) << 23);
  return std::bit_cast<float>(std::bit_cast<std::int32_t>(v) & ~low);
}

// The exp of the row loops below: exp_flush in float, std::exp in double.
inline float exp_row_element(float z) {
  return exp_flush(z);
}
inline double exp_row_element(double z) {
  return std::exp(z);
}

// Row loops take kExpBlock elements at a time: a loop with a fixed trip count
// is what GCC vectorises at -O2, where its cost model skips loops of unknown
// length. A row's last, short block is copied into a padded buffer and takes
// the same path, so every element is computed alike (bitwise the same result
// wherever it sits) and short rows, such as causal attention's, stay fast.
inline constexpr std::int64_t kExpBlock = 8;

// max_i x[i] for n ≥ 1, the shift that keeps a softmax row's exponents ≤ 0.
// kExpBlock running maxima vectorise (one is a chain of dependent compares,
// ~0.5 ns per element); the maximum is exact, so it equals the one-by-one
// loop's. NaNs are skipped, as there, unless x[0] is one.
template <class T>
T row_max(const T* x, std::int64_t n) {
  T lane[kExpBlock], pad[kExpBlock];
  std::fill(lane, lane + kExpBlock, x[0]);
  const auto fold = [&lane](const T* block) {
    for (std::int64_t j = 0; j < kExpBlock; ++j) lane[j] = block[j] > lane[j] ? block[j] : lane[j];
  };
  std::int64_t i = 0;
  for (; i + kExpBlock <= n; i += kExpBlock) fold(x + i);
  if (i < n) {  // padded with x[0], which changes no maximum
    std::fill(pad, pad + kExpBlock, x[0]);
    std::copy(x + i, x + n, pad);
    fold(pad);
  }
  T max = lane[0];
  for (const T m : lane) max = m > max ? m : max;
  return max;
}

// exp_shifted and exp_shifted_sum (below):
// y[i] = e^(x[i] − shift) for i < n; y may be x. With kSum, also returns
// Σ y[i], summed in double in kExpBlock interleaved partial sums: they
// vectorise (one running sum is a chain of dependent adds, ~1 ns per
// element), and their order is fixed, so a row always gets the same sum.
template <bool kSum, class T>
double exp_shifted_impl(T* y, const T* x, T shift, std::int64_t n) {
  double part[kExpBlock] = {};
  // Each block is read before it is written, which makes y == x safe.
  const auto block = [&part, shift](T* out, const T* in) {
    T v[kExpBlock];
    for (std::int64_t j = 0; j < kExpBlock; ++j) v[j] = exp_row_element(in[j] - shift);
    for (std::int64_t j = 0; j < kExpBlock; ++j) out[j] = v[j];
    if constexpr (kSum) {
      for (std::int64_t j = 0; j < kExpBlock; ++j) part[j] += static_cast<double>(v[j]);
    }
  };
  std::int64_t i = 0;
  for (; i + kExpBlock <= n; i += kExpBlock) block(y + i, x + i);
  if (i < n) {  // padded with −∞, whose exp is exactly 0 and adds nothing to the sums
    T in[kExpBlock], out[kExpBlock];
    std::fill(in, in + kExpBlock, -std::numeric_limits<T>::infinity());
    std::copy(x + i, x + n, in);
    block(out, in);
    std::copy(out, out + (n - i), y + i);
  }
  // Fold the partial sums pairwise, halving their number each pass: three
  // adds deep instead of a chain of 8 dependent ones.
  static_assert(kExpBlock == 8);
  for (std::int64_t j = 0; j < 4; ++j) part[j] += part[j + 4];
  for (std::int64_t j = 0; j < 2; ++j) part[j] += part[j + 2];
  return part[0] + part[1];
}

template <class T>
void exp_shifted(T* y, const T* x, T shift, std::int64_t n) {
  exp_shifted_impl<false>(y, x, shift, n);
}

template <class T>
double exp_shifted_sum(T* y, const T* x, T shift, std::int64_t n) {
  return exp_shifted_impl<true>(y, x, shift, n);
}

}  // namespace dtw::kernels::detail

#endif  // DTW_KERNELS_SRC_VECTOR_EXP_H_
