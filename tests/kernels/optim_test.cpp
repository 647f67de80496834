// Optimiser kernels against their plain-loop twins, against steps worked out
// by hand from the formulas (AdamW as in Loshchilov & Hutter, SGD as in
// torch.optim.SGD), and from many threads at once.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "dtw/kernels/optim.h"
#include "dtw/model/random.h"
#include "dtw_test.h"
#include "kernel_test_util.h"

namespace dtw::kernel_test {
namespace {

// Values in [-1, 1), a pure function of (seed, i): bounded, unlike random_values.
template <class T>
std::vector<T> uniform_values(std::int64_t n, std::uint64_t seed) {
  std::vector<T> x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    x[static_cast<std::size_t>(i)] = static_cast<T>(
        2.0 * model::uniform01(model::hash_key(seed, static_cast<std::uint64_t>(i))) - 1.0);
  return x;
}

const std::int64_t kSizes[] = {0, 1, 7, 1000003};

// Kernel and twin evaluate the same formula in double and round each stored
// value to T once; they can differ only where a compiler contracts a·b + c
// into an FMA in one of them, which moves a result by at most ~1 ulp of T.
template <class T>
constexpr double kTwinTolerance = 2 * std::numeric_limits<T>::epsilon();

template <class T>
class OptimTest : public ::testing::Test {};
TYPED_TEST_SUITE(OptimTest, RealTypes);

TYPED_TEST(OptimTest, AdamWMatchesReferenceOverSeveralSteps) {
  using T = TypeParam;
  const kernels::AdamWConfig config{0.01, 0.9, 0.999, 1e-8, 0.1};
  for (std::int64_t n : kSizes) {
    std::vector<T> p = uniform_values<T>(n, 1), m(p.size(), T(0)), v(p.size(), T(0));
    std::vector<T> p_ref = p, m_ref = m, v_ref = v;
    for (std::int64_t step = 1; step <= 3; ++step) {
      const std::vector<T> g = uniform_values<T>(n, 100 + static_cast<std::uint64_t>(step));
      kernels::adamw_step(p.data(), g.data(), m.data(), v.data(), n, step, config);
      kernels::adamw_step_reference(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, step,
                                    config);
      DTW_EXPECT_SAME(0, p_ref, p, kTwinTolerance<T>);
      DTW_EXPECT_SAME(0, m_ref, m, kTwinTolerance<T>);
      DTW_EXPECT_SAME(0, v_ref, v, kTwinTolerance<T>);
    }
  }
}

TYPED_TEST(OptimTest, SgdMatchesReferenceWithAndWithoutMomentum) {
  using T = TypeParam;
  for (const kernels::SgdConfig config :
       {kernels::SgdConfig{0.1, 0.9, 0.01}, kernels::SgdConfig{0.1, 0.0, 0.01}}) {
    for (std::int64_t n : kSizes) {
      std::vector<T> p = uniform_values<T>(n, 2), vel(p.size(), T(0));
      std::vector<T> p_ref = p, vel_ref = vel;
      // With momentum 0 no velocity buffer is needed: pass nullptr to prove it.
      T* vel_ptr = config.momentum == 0 ? nullptr : vel.data();
      T* vel_ref_ptr = config.momentum == 0 ? nullptr : vel_ref.data();
      for (std::uint64_t step = 1; step <= 3; ++step) {
        const std::vector<T> g = uniform_values<T>(n, 200 + step);
        kernels::sgd_step(p.data(), g.data(), vel_ptr, n, config);
        kernels::sgd_step_reference(p_ref.data(), g.data(), vel_ref_ptr, n, config);
        DTW_EXPECT_SAME(0, p_ref, p, kTwinTolerance<T>);
        DTW_EXPECT_SAME(0, vel_ref, vel, kTwinTolerance<T>);
      }
    }
  }
}

TYPED_TEST(OptimTest, SumOfSquaresAccumulatesInDouble) {
  using T = TypeParam;
  for (std::int64_t n : kSizes) {
    // Small integers: every partial sum (≤ 9·10⁶) is exact in double.
    std::vector<T> x(static_cast<std::size_t>(n));
    double want = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const int xi = static_cast<int>(i % 7) - 3;
      x[static_cast<std::size_t>(i)] = static_cast<T>(xi);
      want += xi * xi;
    }
    EXPECT_EQ(kernels::sum_of_squares(x.data(), n), want) << "n " << n;
  }
  // 10⁶ copies of 0.1: a float accumulator would be off by ~1e-3 relative;
  // a double one by ≤ n·eps(double) ≈ 2e-10 relative, so 1e-9 separates them.
  const std::int64_t n = 1000000;
  const std::vector<T> x(static_cast<std::size_t>(n), T(0.1));
  const double want =
      static_cast<double>(n) * static_cast<double>(T(0.1)) * static_cast<double>(T(0.1));
  EXPECT_NEAR(kernels::sum_of_squares(x.data(), n), want, 1e-9 * want);
}

TYPED_TEST(OptimTest, ScaleMultipliesEveryElement) {
  using T = TypeParam;
  for (std::int64_t n : kSizes) {
    std::vector<T> x = uniform_values<T>(n, 3), want = x;
    for (T& w : want) w *= T(-0.37);  // one rounding in T either way: bitwise
    kernels::scale(x.data(), n, T(-0.37));
    DTW_EXPECT_SAME(0, want, x);
  }
}

TYPED_TEST(OptimTest, ClipGradNormClipsOnlyAboveMaxNorm) {
  using T = TypeParam;
  // ‖(3, 4)‖ = 5: exact in any precision.
  const std::vector<T> g0{T(3), T(4)};
  for (double max_norm : {10.0, 5.0}) {  // below and at the limit: untouched
    std::vector<T> g = g0;
    EXPECT_EQ(kernels::clip_grad_norm(g.data(), 2, max_norm), 5.0);
    EXPECT_EQ(g, g0) << "max_norm " << max_norm;
  }
  std::vector<T> g = g0;
  EXPECT_EQ(kernels::clip_grad_norm(g.data(), 2, 1.0), 5.0);  // the norm before clipping
  // Scaled by 1/(5 + 1e-6): the factor rounds to T once, the product once more.
  const T factor = static_cast<T>(1.0 / (5.0 + 1e-6));
  EXPECT_EQ(g, (std::vector<T>{T(3) * factor, T(4) * factor}));
  const double after = std::sqrt(kernels::sum_of_squares(g.data(), 2));
  EXPECT_LT(after, 1.0);
  EXPECT_NEAR(after, 1.0, 4 * std::numeric_limits<T>::epsilon() + 1e-6);
  // A long vector: the norm is the global one, over all n elements.
  std::vector<T> big = uniform_values<T>(1000003, 4);
  const double norm = std::sqrt(kernels::sum_of_squares(big.data(), 1000003));
  EXPECT_EQ(kernels::clip_grad_norm(big.data(), 1000003, 0.5 * norm), norm);
  EXPECT_NEAR(std::sqrt(kernels::sum_of_squares(big.data(), 1000003)), 0.5 * norm,
              1e-4 * norm);  // float factor and float products: ≪ 1e-4 relative
  EXPECT_EQ(kernels::clip_grad_norm(static_cast<T*>(nullptr), 0, 1.0), 0.0);
}

// Two AdamW steps on two parameters, lr 0.1, β1 0.9, β2 0.999, eps 1e-8,
// weight_decay 0.01, worked out from the formula in 40-digit decimal:
//   p = 1,  g = 0.5 then -0.25:
//     t=1: m 0.05, v 0.00025, m̂ 0.5, v̂ 0.25, update 0.5/(0.5+1e-8) = 0.99999998000000040
//          p = 1 - 0.1·(0.99999998000000040 + 0.01·1) = 0.89900000199999996
//     t=2: m 0.02, v 0.00031225, m̂ 0.02/0.19, v̂ 0.00031225/0.001999,
//          update 0.26633703292153797, p = 0.87146729870584616
//   p = -2, g = -1 then 0 (a zero gradient still moves p: m remembers):
//     t=1: m -0.1, v 0.001, update -0.99999999000000010, p = -1.8980000009999999900
//     t=2: m -0.09, v 0.000999, update -0.67005824465811782, p = -1.8290961765331882078
TEST(AdamWTest, TwoStepsMatchHandComputedValues) {
  const kernels::AdamWConfig config{0.1, 0.9, 0.999, 1e-8, 0.01};
  const double g1[] = {0.5, -1.0}, g2[] = {-0.25, 0.0};
  // Worst cancellation is 1 − β2^t ≈ 0.002 from numbers near 1 (≤ 1e-13
  // relative), halved by the √ and scaled by lr·|update| < 0.1: < 1e-14 in p.
  constexpr double kTol = 1e-13;
  for (bool reference : {false, true}) {
    std::vector<double> p{1.0, -2.0}, m(2, 0.0), v(2, 0.0);
    // The host kernel or its reference (the pointer's type picks the host overload).
    decltype(&kernels::adamw_step_reference<double>) step = kernels::adamw_step_reference<double>;
    if (!reference) step = kernels::adamw_step<double>;
    step(p.data(), g1, m.data(), v.data(), 2, 1, config);
    EXPECT_NEAR(m[0], 0.05, kTol);
    EXPECT_NEAR(v[0], 0.00025, kTol);
    EXPECT_NEAR(p[0], 0.89900000199999996, kTol);
    EXPECT_NEAR(p[1], -1.8980000009999999900, kTol);
    step(p.data(), g2, m.data(), v.data(), 2, 2, config);
    EXPECT_NEAR(m[0], 0.02, kTol);
    EXPECT_NEAR(v[0], 0.00031225, kTol);
    EXPECT_NEAR(m[1], -0.09, kTol);
    EXPECT_NEAR(v[1], 0.000999, kTol);
    EXPECT_NEAR(p[0], 0.87146729870584616, kTol) << "reference " << reference;
    EXPECT_NEAR(p[1], -1.8290961765331882078, kTol) << "reference " << reference;
  }
}

// torch.optim.SGD(lr=0.1, momentum=0.9, weight_decay=0.01), dampening 0:
//   p = 1,  g = 0.5:   g' = 0.5 + 0.01·1 = 0.51, buf = 0.51, p = 1 - 0.051 = 0.949
//           g = -0.25: g' = -0.25 + 0.00949 = -0.24051, buf = 0.459 - 0.24051 = 0.21849,
//                      p = 0.949 - 0.021849 = 0.927151
//   p = -2, g = -1:    g' = -1.02, buf = -1.02, p = -1.898
//           g = 0:     g' = -0.01898, buf = -0.918 - 0.01898 = -0.93698, p = -1.804302
// (torch sets buf = g' on the first step; velocity starting at 0 gives the same.)
TEST(SgdTest, TwoStepsMatchTorchSemantics) {
  const kernels::SgdConfig config{0.1, 0.9, 0.01};
  const double g1[] = {0.5, -1.0}, g2[] = {-0.25, 0.0};
  constexpr double kTol = 1e-14;  // a dozen double ops on O(1) values, no cancellation
  for (bool reference : {false, true}) {
    std::vector<double> p{1.0, -2.0}, vel(2, 0.0);
    decltype(&kernels::sgd_step_reference<double>) step = kernels::sgd_step_reference<double>;
    if (!reference) step = kernels::sgd_step<double>;
    step(p.data(), g1, vel.data(), 2, config);
    EXPECT_NEAR(vel[0], 0.51, kTol);
    EXPECT_NEAR(p[0], 0.949, kTol);
    EXPECT_NEAR(p[1], -1.898, kTol);
    step(p.data(), g2, vel.data(), 2, config);
    EXPECT_NEAR(vel[0], 0.21849, kTol);
    EXPECT_NEAR(vel[1], -0.93698, kTol);
    EXPECT_NEAR(p[0], 0.927151, kTol) << "reference " << reference;
    EXPECT_NEAR(p[1], -1.804302, kTol) << "reference " << reference;
  }
}

TEST(AdamWTest, WeightDecayIsDecoupledFromTheMoments) {
  // Zero gradient: m = v = 0, the Adam term is 0/(0+eps) = 0, and only the
  // decay acts: p ← p − lr·wd·p, exactly.
  const kernels::AdamWConfig config{0.1, 0.9, 0.999, 1e-8, 0.5};
  std::vector<double> p{2.0, -4.0}, zeros(2, 0.0), m(2, 0.0), v(2, 0.0);
  kernels::adamw_step(p.data(), zeros.data(), m.data(), v.data(), 2, 1, config);
  EXPECT_EQ(p, (std::vector<double>{2.0 - 0.1 * 0.5 * 2.0, -4.0 + 0.1 * 0.5 * 4.0}));
  EXPECT_EQ(m, zeros);
  // Non-zero gradient: the moments are those of the gradient alone (no wd·p
  // in them), and the decay shifts p by exactly lr·wd·p on top.
  const std::vector<double> g{0.3, -0.7};
  std::vector<double> p_wd{2.0, -4.0}, p_no = p_wd, m_wd(2, 0.0), v_wd(2, 0.0), m_no = m_wd,
                                       v_no = v_wd;
  kernels::adamw_step(p_wd.data(), g.data(), m_wd.data(), v_wd.data(), 2, 1, config);
  kernels::AdamWConfig no_decay = config;
  no_decay.weight_decay = 0;
  kernels::adamw_step(p_no.data(), g.data(), m_no.data(), v_no.data(), 2, 1, no_decay);
  EXPECT_EQ(m_wd, m_no);
  EXPECT_EQ(v_wd, v_no);
  EXPECT_NEAR(p_wd[0], p_no[0] - 0.1 * 0.5 * 2.0, 1e-15);
  EXPECT_NEAR(p_wd[1], p_no[1] + 0.1 * 0.5 * 4.0, 1e-15);
}

TEST(SgdTest, WeightDecayIsL2AndEntersTheVelocity) {
  // Zero gradient, momentum 0.9, wd 0.5, lr 0.1, p0 = 2: the decay is a
  // gradient, so it accumulates: v1 = 1, p1 = 1.9; v2 = 0.9 + 0.95 = 1.85,
  // p2 = 1.9 − 0.185 = 1.715. Decoupled decay would give 2·0.95² = 1.805.
  const kernels::SgdConfig config{0.1, 0.9, 0.5};
  std::vector<double> p{2.0}, vel{0.0};
  const double zero = 0.0;
  kernels::sgd_step(p.data(), &zero, vel.data(), 1, config);
  EXPECT_NEAR(vel[0], 1.0, 1e-15);
  kernels::sgd_step(p.data(), &zero, vel.data(), 1, config);
  EXPECT_NEAR(vel[0], 1.85, 1e-15);
  EXPECT_NEAR(p[0], 1.715, 1e-15);
}

TEST(OptimErrorsTest, BadInputNamesTheValues) {
  std::vector<float> p(4, 1.0f), g(4, 1.0f), m(4), v(4);
  const kernels::AdamWConfig adam;
  expect_invalid([&] { kernels::adamw_step(p.data(), g.data(), m.data(), v.data(), 4, 0, adam); },
                 "step 0");
  expect_invalid([&] { kernels::adamw_step(p.data(), g.data(), m.data(), v.data(), 4, -3, adam); },
                 "step -3");
  expect_invalid(
      [&] { kernels::adamw_step_reference(p.data(), g.data(), m.data(), v.data(), 4, 0, adam); },
      "step 0");
  expect_invalid([&] { kernels::adamw_step(p.data(), g.data(), m.data(), v.data(), -1, 1, adam); },
                 "n -1");
  kernels::AdamWConfig bad_beta;
  bad_beta.beta2 = 1.0;
  expect_invalid(
      [&] { kernels::adamw_step(p.data(), g.data(), m.data(), v.data(), 4, 1, bad_beta); },
      "beta2 1");
  expect_invalid([&] { kernels::sgd_step(p.data(), g.data(), v.data(), -2, {}); }, "n -2");
  expect_invalid(
      [&] {
        kernels::sgd_step(p.data(), g.data(), static_cast<float*>(nullptr), 4, {0.1, 0.9, 0.0});
      },
      "momentum 0.9");
  expect_invalid(
      [&] {
        kernels::sgd_step(p.data(), g.data(), static_cast<float*>(nullptr), 4, {-0.5, 0.0, 0.0});
      },
      "lr -0.5");
  expect_invalid([&] { kernels::clip_grad_norm(g.data(), 4, 0.0); }, "max_norm 0");
  expect_invalid([&] { kernels::clip_grad_norm(g.data(), 4, -1.5); }, "max_norm -1.5");
  expect_invalid([&] { kernels::clip_grad_norm(g.data(), -5, 1.0); }, "n -5");
  expect_invalid([&] { kernels::sum_of_squares(g.data(), -7); }, "n -7");
  expect_invalid([&] { kernels::scale(g.data(), -8, 2.0f); }, "n -8");
  // Nothing was touched by the rejected calls.
  EXPECT_EQ(p, std::vector<float>(4, 1.0f));
  EXPECT_EQ(g, std::vector<float>(4, 1.0f));
}

// One thread's optimiser work: three AdamW steps, three SGD steps, one clip.
// Outputs p_adam, m, v, p_sgd, vel, g and {norm}; the float vectors are widened
// to double (exactly, so bitwise equality carries over) to sit beside the norm.
std::vector<std::vector<double>> run_steps(std::int64_t n, std::uint64_t seed) {
  std::vector<float> p_adam = uniform_values<float>(n, seed), p_sgd = p_adam;
  std::vector<float> m(p_adam.size(), 0.0f), v = m, vel = m;
  const kernels::AdamWConfig adam{1e-3, 0.9, 0.999, 1e-8, 0.01};
  const kernels::SgdConfig sgd{0.1, 0.9, 0.01};
  for (std::int64_t step = 1; step <= 3; ++step) {
    const std::vector<float> g =
        uniform_values<float>(n, seed * 10 + static_cast<std::uint64_t>(step));
    kernels::adamw_step(p_adam.data(), g.data(), m.data(), v.data(), n, step, adam);
    kernels::sgd_step(p_sgd.data(), g.data(), vel.data(), n, sgd);
  }
  std::vector<float> g = uniform_values<float>(n, seed + 7);
  const double norm = kernels::clip_grad_norm(g.data(), n, 1.0);
  std::vector<std::vector<double>> outputs;
  for (const auto* x : {&p_adam, &m, &v, &p_sgd, &vel, &g})
    outputs.emplace_back(x->begin(), x->end());
  outputs.push_back({norm});
  return outputs;
}

TEST(OptimConcurrencyTest, ConcurrentCallsMatchSerial) {
#ifdef DTW_TSAN
  constexpr std::int64_t kN = 1 << 12;  // TSan slows every access ~10x
#else
  constexpr std::int64_t kN = 1 << 18;
#endif
  const auto serial = expect_concurrent_matches_serial(
      [](int t) { return run_steps(kN, 1000 + static_cast<std::uint64_t>(t)); });
  for (std::size_t t = 0; t < serial.size(); ++t)
    EXPECT_GT(serial[t].back().front(), 1.0)
        << "thread " << t << ": the clip must have acted for the test to mean anything";
}

}  // namespace
}  // namespace dtw::kernel_test
