// The CUDA optimiser kernels against the host: AdamW and SGD against their
// references, sum of squares, scale and clipping against the host functions,
// float and double, sizes 1, odd, around the block and reduction-grid sizes,
// and a few million. Every element is checked within a bound derived from the
// operations (below), each device call is repeated and must give the same
// bits, and the argument checks run without a GPU.
//
// The bounds. Both sides compute in double and round once to T. If their
// double results differ by δ, the stored values differ by at most
// δ + ulp_T(result) ≤ δ + ε_T·|result| (ε: machine epsilon). δ is at most
// 2·k·u_d·S = k·ε_d·S, where k counts the roundings on the path and S bounds
// the magnitudes they act on. The kernels use the reference's operations in
// its order without fused multiply-adds, so δ should be 0 (the test records
// how many elements differ at all); the bound is what holds even if the host
// compiler fused some of its operations.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/kernels/cuda_optim.h"
#include "dtw/kernels/optim.h"
#include "dtw_test.h"
#include "gpu_test.h"
#include "kernel_test_util.h"

namespace dtw {
namespace {

using kernel_test::bitwise_equal;
using kernel_test::expect_invalid;
using kernel_test::kDoubleEps;
using kernel_test::random_values;
using testing::DeviceArray;
using testing::to_device;

// 1; odd; around a block of 256; just past one full reduction grid (1024
// blocks x 256 threads), so threads loop; a few million.
const std::vector<std::int64_t> kSizes = {1, 7, 255, 256, 257, 1000, 262145, (1 << 22) + 3};

template <class T>
constexpr double eps() {
  return std::numeric_limits<T>::epsilon();
}

// Empty when |got[i] − expected[i]| ≤ bound[i] for every i (NaN fails);
// otherwise the first element outside, with the values and the bound.
// `differing` counts the elements that are not bitwise equal.
template <class T>
std::string within(const char* what, const std::vector<T>& expected, const std::vector<T>& got,
                   const std::vector<double>& bound, std::int64_t* differing) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double e = expected[i], g = got[i];
    if (e != g) ++*differing;
    if (!(std::abs(e - g) <= bound[i])) {
      std::ostringstream out;
      out << what << " index " << i << ": expected " << testing::exact_text(expected[i])
          << ", got " << testing::exact_text(got[i]) << ", bound " << bound[i];
      return out.str();
    }
  }
  return {};
}

// Inputs of one step: p, g ~ N(0, 1); m ~ N(0, 0.1²); v the square of
// N(0, 0.1²) (positive; never all zeros).
template <class T>
struct State {
  std::vector<T> p, g, m, v;
  State(std::int64_t n, std::uint64_t key)
      : p(random_values<T>(n, key)), g(random_values<T>(n, key + 1)),
        m(random_values<T>(n, key + 2, 0.1)), v(random_values<T>(n, key + 3, 0.1)) {
    for (T& x : v) x *= x;
  }
};

template <class T>
void check_adamw(std::int64_t n, const kernels::AdamWConfig& c, std::uint64_t key) {
  DTW_TRACE("n " << n << ", lr " << c.lr << ", weight_decay " << c.weight_decay);
  State<T> s(n, key);
  DeviceArray<T> p = to_device(s.p), g = to_device(s.g), m = to_device(s.m), v = to_device(s.v);
  std::int64_t differing = 0;
  for (std::int64_t step = 1; step <= 3; ++step) {
    // Each step is compared on the device's own inputs, so the bound is one step's.
    State<T> in = s;
    in.p = p.download(), in.m = m.download(), in.v = v.download();
    State<T> ref = in;
    kernels::adamw_step_reference(ref.p.data(), ref.g.data(), ref.m.data(), ref.v.data(), n, step,
                                  c);
    std::vector<double> bp(n), bm(n), bv(n);
    const double c1 = 1 - std::pow(c.beta1, step), c2 = 1 - std::pow(c.beta2, step);
    for (std::int64_t i = 0; i < n; ++i) {
      const double pi = in.p[i], gi = in.g[i];
      // m: 3 roundings over |β1 m| + |(1−β1) g|; v: 4 over |β2 v| + |(1−β2) g²|.
      const double sm = std::abs(c.beta1 * in.m[i]) + std::abs((1 - c.beta1) * gi);
      const double sv = std::abs(c.beta2 * in.v[i]) + (1 - c.beta2) * gi * gi;
      bm[i] = eps<T>() * std::abs(ref.m[i]) + 3 * kDoubleEps * sm;
      bv[i] = eps<T>() * std::abs(ref.v[i]) + 4 * kDoubleEps * sv;
      // p: the moments' 7 roundings, 2 divisions, a sqrt, 2 adds, 2 multiplies
      // and the subtraction: 16 with room, over |p| + lr·(|update| + wd·|p|).
      const double m_new = std::abs(c.beta1 * in.m[i] + (1 - c.beta1) * gi);
      const double v_new = c.beta2 * in.v[i] + (1 - c.beta2) * gi * gi;
      const double update = (m_new / c1) / (std::sqrt(v_new / c2) + c.eps);
      const double sp = std::abs(pi) + c.lr * (update + c.weight_decay * std::abs(pi));
      bp[i] = eps<T>() * std::abs(ref.p[i]) + 16 * kDoubleEps * sp;
    }
    kernels::device_adamw_step(p.data(), g.data(), m.data(), v.data(), n, step, c);
    const std::vector<T> got_p = p.download(), got_m = m.download(), got_v = v.download();
    for (const std::string& diff : {within("m", ref.m, got_m, bm, &differing),
                                    within("v", ref.v, got_v, bv, &differing),
                                    within("p", ref.p, got_p, bp, &differing)})
      ASSERT_TRUE(diff.empty()) << "step " << step << ": " << diff;
    // Again from the same inputs: the same bits.
    DeviceArray<T> p2 = to_device(in.p), m2 = to_device(in.m), v2 = to_device(in.v);
    kernels::device_adamw_step(p2.data(), g.data(), m2.data(), v2.data(), n, step, c);
    EXPECT_TRUE(bitwise_equal(got_p, p2.download()) && bitwise_equal(got_m, m2.download()) &&
                bitwise_equal(got_v, v2.download()))
        << "step " << step << ": a second run differs";
  }
  ::testing::Test::RecordProperty("adamw_differing_elements", std::to_string(differing));
}

template <class T>
void check_sgd(std::int64_t n, const kernels::SgdConfig& c, std::uint64_t key) {
  DTW_TRACE("n " << n << ", momentum " << c.momentum << ", weight_decay " << c.weight_decay);
  State<T> s(n, key);  // m serves as the velocity
  std::vector<T> p = s.p, vel = s.m;
  kernels::sgd_step_reference(p.data(), s.g.data(), c.momentum != 0 ? vel.data() : nullptr, n, c);
  std::vector<double> bp(n), bvel(n);
  for (std::int64_t i = 0; i < n; ++i) {
    // velocity: 4 roundings over |momentum·vel| + |g| + wd·|p|; p: 2 more, with |p|.
    const double sd = c.momentum * std::abs(s.m[i]) + std::abs(s.g[i]) +
                      c.weight_decay * std::abs(s.p[i]);
    bvel[i] = eps<T>() * std::abs(vel[i]) + 4 * kDoubleEps * sd;
    bp[i] = eps<T>() * std::abs(p[i]) + 8 * kDoubleEps * (std::abs(s.p[i]) + c.lr * sd);
  }
  std::vector<T> first_p, first_vel;
  std::int64_t differing = 0;
  for (int run = 0; run < 2; ++run) {
    DeviceArray<T> d_p = to_device(s.p), d_g = to_device(s.g), d_vel = to_device(s.m);
    kernels::device_sgd_step(d_p.data(), d_g.data(), c.momentum != 0 ? d_vel.data() : nullptr, n,
                             c);
    const std::vector<T> got_p = d_p.download(), got_vel = d_vel.download();
    for (const std::string& diff : {within("p", p, got_p, bp, &differing),
                                    within("velocity", vel, got_vel, bvel, &differing)})
      ASSERT_TRUE(diff.empty()) << diff;
    if (run == 0) first_p = got_p, first_vel = got_vel;
    else EXPECT_TRUE(bitwise_equal(first_p, got_p) && bitwise_equal(first_vel, got_vel));
  }
  ::testing::Test::RecordProperty("sgd_differing_elements", std::to_string(differing));
}

template <class T>
class CudaOptimTest : public ::testing::Test {};
TYPED_TEST_SUITE(CudaOptimTest, kernel_test::RealTypes);

TYPED_TEST(CudaOptimTest, AdamWMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 10;
  for (std::int64_t n : kSizes) {
    check_adamw<TypeParam>(n, {}, key += 10);
    check_adamw<TypeParam>(n, {.lr = 3e-2, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6,
                               .weight_decay = 0.1}, key += 10);
  }
}

TYPED_TEST(CudaOptimTest, SgdMatchesReference) {
  DTW_REQUIRE_GPUS(1);
  std::uint64_t key = 1000;
  for (std::int64_t n : kSizes) {
    check_sgd<TypeParam>(n, {.lr = 0.1}, key += 10);
    check_sgd<TypeParam>(n, {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.01}, key += 10);
  }
}

// The host adds in index order, the device in a tree: each sum of m terms
// rounds at most m−1 times by u_d = ε_d/2 of the total, so the two differ by
// at most (n+1)·ε_d·Σx² (squares of floats are exact in double; of doubles,
// one more rounding each).
TYPED_TEST(CudaOptimTest, SumOfSquaresMatchesHost) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  std::uint64_t key = 2000;
  for (std::int64_t n : kSizes) {
    DTW_TRACE("n " << n);
    const std::vector<T> x = random_values<T>(n, key += 10, 1.0, 0.5);
    const DeviceArray<T> d_x = to_device(x);
    const double expected = kernels::sum_of_squares(x.data(), n);
    const double got = kernels::device_sum_of_squares(d_x.data(), n);
    EXPECT_NEAR(got, expected, static_cast<double>(n + 1) * kDoubleEps * expected);
    EXPECT_EQ(got, kernels::device_sum_of_squares(d_x.data(), n)) << "a second run differs";
  }
  EXPECT_EQ(kernels::device_sum_of_squares<T>(nullptr, 0), 0.0);
}

// One multiplication in T on each side, correctly rounded: the same bits.
TYPED_TEST(CudaOptimTest, ScaleMatchesHostBitwise) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  std::uint64_t key = 3000;
  for (std::int64_t n : kSizes) {
    DTW_TRACE("n " << n);
    std::vector<T> x = random_values<T>(n, key += 10);
    DeviceArray<T> d_x = to_device(x);
    const T factor = static_cast<T>(0.3711);
    kernels::scale(x.data(), n, factor);
    kernels::device_scale(d_x.data(), n, factor);
    const std::string diff = testing::compare(0, x, d_x.download());
    EXPECT_TRUE(diff.empty()) << diff;
  }
}

// The norm: √ of sums within (n+1)·ε_d·Σx² (above) differs by at most half
// that relative, plus the sqrt's own rounding: (n+2)·ε_d·norm. Clipped
// gradients: the two factors max_norm/(norm+1e-6) differ relatively by about
// as much, become T-factors ≤ 1 ulp_T apart, and each product rounds once
// more: |Δ| ≤ (2·ε_T + (n+3)·ε_d)·|expected|. Below max_norm nothing changes.
TYPED_TEST(CudaOptimTest, ClipGradNormMatchesHost) {
  DTW_REQUIRE_GPUS(1);
  using T = TypeParam;
  std::uint64_t key = 4000;
  for (std::int64_t n : kSizes) {
    for (double ratio : {0.5, 2.0}) {  // max_norm / norm: clips, does not clip
      DTW_TRACE("n " << n << ", max_norm / norm " << ratio);
      const std::vector<T> g = random_values<T>(n, key += 10);
      const double max_norm = ratio * std::sqrt(kernels::sum_of_squares(g.data(), n));
      std::vector<T> expected = g;
      const double norm = kernels::clip_grad_norm(expected.data(), n, max_norm);
      std::vector<T> first;
      for (int run = 0; run < 2; ++run) {
        DeviceArray<T> d_g = to_device(g);
        const double got_norm = kernels::device_clip_grad_norm(d_g.data(), n, max_norm);
        EXPECT_NEAR(got_norm, norm, static_cast<double>(n + 2) * kDoubleEps * norm);
        const std::vector<T> got = d_g.download();
        std::vector<double> bound(n);
        for (std::int64_t i = 0; i < n; ++i)
          bound[i] = (2 * eps<T>() + static_cast<double>(n + 3) * kDoubleEps) * std::abs(expected[i]);
        if (ratio > 1) bound.assign(n, 0.0);
        std::int64_t differing = 0;
        const std::string diff = within("grads", expected, got, bound, &differing);
        ASSERT_TRUE(diff.empty()) << diff;
        if (run == 0) first = got;
        else EXPECT_TRUE(bitwise_equal(first, got)) << "a second run differs";
      }
    }
  }
}

// The host's checks, made before any CUDA call: no GPU needed. The pointers
// are never dereferenced on the host, so a dummy address stands for device memory.
TEST(CudaOptimArgsTest, RejectsBadArguments) {
  float* p = reinterpret_cast<float*>(std::uintptr_t{256});
  const kernels::AdamWConfig adam;
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, p, 4, 0, adam); },
                 {"device_adamw_step", "step 0"});
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, p, -1, 1, adam); }, "n -1");
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, p, 4, 1, {.beta1 = 1.0}); },
                 "beta1 1");
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, p, 4, 1, {.beta2 = -0.5}); },
                 "beta2 -0.5");
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, p, 4, 1, {.lr = -2}); }, "lr -2");
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, p, 4, 1, {.eps = -1}); }, "eps -1");
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, p, 4, 1, {.weight_decay = -3}); },
                 "weight_decay -3");
  expect_invalid([&] { kernels::device_adamw_step(p, p, p, static_cast<float*>(nullptr), 4, 1, adam); },
                 {"null pointer", "n 4"});
  expect_invalid([&] { kernels::device_sgd_step(p, p, static_cast<float*>(nullptr), 4, {.momentum = 0.9}); },
                 {"device_sgd_step", "momentum 0.9", "velocity"});
  expect_invalid([&] { kernels::device_sgd_step(p, p, p, -2, {}); }, "n -2");
  expect_invalid([&] { kernels::device_sgd_step(p, p, p, 4, {.lr = -0.5}); }, "lr -0.5");
  expect_invalid([&] { kernels::device_sum_of_squares(p, -7); }, {"device_sum_of_squares", "n -7"});
  expect_invalid([&] { kernels::device_scale(p, -8, 2.0f); }, {"device_scale", "n -8"});
  expect_invalid([&] { kernels::device_clip_grad_norm(p, 4, 0.0); }, "max_norm 0");
  expect_invalid([&] { kernels::device_clip_grad_norm(p, 4, -1.5); }, "max_norm -1.5");
  expect_invalid([&] { kernels::device_clip_grad_norm(p, -5, 1.0); }, "n -5");
}

}  // namespace
}  // namespace dtw
