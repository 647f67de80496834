// Fused softmax cross-entropy as Kokkos kernels, next to the plain loops they
// must match.
//
// Per row, with m the row maximum and S = Σ_c e^(logit_c − m):
//   probs_c = e^(logit_c − m) / S,   loss = m + log S − logit_target.
// The loss comes from log S (S ≥ 1, because the largest term is e⁰), never
// from log(probs_target), which would be −∞ once that probability rounds to 0.
#include "dtw/kernels/cross_entropy.h"

#include <cmath>

#include "dtw/errors.h"
#include "dtw/kernels/reduce.h"
#include "host_policy.h"
#include "vector_exp.h"

namespace dtw::kernels {
namespace {

using detail::host_range;

// Every check happens before any Kokkos kernel runs: an exception must not
// leave a parallel region (on a device backend it cannot).
void check_args(const char* kernel, const std::int32_t* targets, std::int64_t rows,
                std::int64_t vocab) {
  DTW_CHECK_ARG(rows >= 0 && vocab >= 0, kernel << ": sizes must not be negative (rows " << rows
                                                << ", vocab " << vocab << ")");
  for (std::int64_t r = 0; r < rows; ++r) {
    DTW_CHECK_ARG(targets[r] >= 0 && targets[r] < vocab, kernel << ": row " << r << " has target "
                                                                << targets[r] << " outside [0, "
                                                                << vocab << ")");
  }
}

}  // namespace

template <class T>
T cross_entropy_forward(T* probs, T* losses, const T* logits, const std::int32_t* targets,
                        std::int64_t rows, std::int64_t vocab) {
  check_args("cross_entropy_forward", targets, rows, vocab);
  if (rows == 0) return T(0);
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::cross_entropy_forward", host_range(0, rows), [=](std::int64_t r) {
    const T* lr = logits + r * vocab;
    T* pr = probs + r * vocab;
    const T target_logit = lr[targets[r]];  // read before probs (maybe aliasing) is written
    const T max = detail::row_max(lr, vocab);
    // As in softmax.cpp: vector_exp.h's exp, the sum in double.
    const double sum = detail::exp_shifted_sum(pr, lr, max, vocab);
    const T inv = static_cast<T>(1.0 / sum);  // one division per row, then multiplies
    for (std::int64_t c = 0; c < vocab; ++c) pr[c] *= inv;
    // (m − logit_target) first: adding log S to m first would round it to the
    // scale of m, and with logits of 1e4 that loses most of a loss near 0.3.
    losses[r] = static_cast<T>((static_cast<double>(max) - static_cast<double>(target_logit)) +
                               std::log(sum));
  });
  // The mean over rows in double, in row order: the same on every call.
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) total += static_cast<double>(losses[r]);
  return static_cast<T>(total / static_cast<double>(rows));
}

template <class T>
T cross_entropy_forward_reference(T* probs, T* losses, const T* logits, const std::int32_t* targets,
                                  std::int64_t rows, std::int64_t vocab) {
  check_args("cross_entropy_forward_reference", targets, rows, vocab);
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* lr = logits + r * vocab;
    double max = -INFINITY;
    for (std::int64_t c = 0; c < vocab; ++c) max = std::fmax(max, static_cast<double>(lr[c]));
    double sum = 0;
    for (std::int64_t c = 0; c < vocab; ++c) sum += std::exp(lr[c] - max);
    const double loss = (max - lr[targets[r]]) + std::log(sum);
    for (std::int64_t c = 0; c < vocab; ++c)
      probs[r * vocab + c] = static_cast<T>(std::exp(lr[c] - max) / sum);
    losses[r] = static_cast<T>(loss);
    total += loss;
  }
  return rows == 0 ? T(0) : static_cast<T>(total / static_cast<double>(rows));
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const std::int32_t* targets,
                            std::int64_t rows, std::int64_t vocab, T dloss) {
  check_args("cross_entropy_backward", targets, rows, vocab);
  if (rows == 0) return;
  ensure_kokkos_initialized();
  Kokkos::parallel_for("dtw::cross_entropy_backward", host_range(0, rows), [=](std::int64_t r) {
    const T* pr = probs + r * vocab;
    T* dr = dlogits + r * vocab;
    // The one-hot term touches one element: fix that element up afterwards
    // instead of comparing c with the target in every iteration. Its prob is
    // read first, since dlogits may alias probs.
    const std::int64_t t = targets[r];
    const T target_prob = pr[t];
    for (std::int64_t c = 0; c < vocab; ++c) dr[c] = dloss * pr[c];
    dr[t] = dloss * (target_prob - T(1));
  });
}

template <class T>
void cross_entropy_backward_reference(T* dlogits, const T* probs, const std::int32_t* targets,
                                      std::int64_t rows, std::int64_t vocab, T dloss) {
  check_args("cross_entropy_backward_reference", targets, rows, vocab);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < vocab; ++c) {
      const std::int64_t i = r * vocab + c;
      const double onehot = c == targets[r] ? 1.0 : 0.0;
      dlogits[i] = static_cast<T>(static_cast<double>(dloss) * (probs[i] - onehot));
    }
  }
}

#define DTW_INSTANTIATE(T)                                                                 \
  template T cross_entropy_forward<T>(T*, T*, const T*, const std::int32_t*, std::int64_t, \
                                      std::int64_t);                                       \
  template T cross_entropy_forward_reference<T>(T*, T*, const T*, const std::int32_t*,     \
                                                std::int64_t, std::int64_t);               \
  template void cross_entropy_backward<T>(T*, const T*, const std::int32_t*, std::int64_t, \
                                          std::int64_t, T);                                \
  template void cross_entropy_backward_reference<T>(T*, const T*, const std::int32_t*,     \
                                                    std::int64_t, std::int64_t, T);
DTW_INSTANTIATE(float)
DTW_INSTANTIATE(double)
#undef DTW_INSTANTIATE

}  // namespace dtw::kernels
