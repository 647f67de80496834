// Helpers every part of the report shares: iteration counts, the rank
// threads of the peers, the input pattern with its expected result, and the
// α-β-γ model of each allreduce algorithm.
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include "report.h"

namespace dtw::bench {

Sample sample_from_ranks(std::int64_t bytes, std::size_t element_size, std::size_t k,
                         std::size_t trials, int p, const std::vector<double>& secs,
                         const std::vector<std::int64_t>& wrong) {
  const auto ranks = static_cast<std::size_t>(p);
  Sample x;
  x.bytes = bytes;
  x.count = bytes / static_cast<std::int64_t>(element_size);
  x.seconds = std::numeric_limits<double>::infinity();
  for (std::size_t t = 0; t < trials; ++t) {
    const auto first = secs.begin() + static_cast<std::ptrdiff_t>((k * trials + t) * ranks);
    x.seconds = std::min(x.seconds, *std::max_element(first, first + p));  // slowest rank
  }
  x.wrong = 0;
  for (std::size_t r = 0; r < ranks; ++r) x.wrong += wrong[k * ranks + r];
  return x;
}

int iters_for(const Options& o, std::int64_t bytes) {
  if (o.iters > 0) return o.iters;
  // About 256 MiB of buffer per size: enough calls that one slow call (the
  // machine is shared) does not decide the figure, few enough to finish fast.
  const std::int64_t n = (std::int64_t{256} << 20) / std::max<std::int64_t>(bytes, 1);
  return static_cast<int>(std::clamp<std::int64_t>(n, 5, 2000));
}

int warmup_for(const Options& o, std::int64_t bytes) {
  if (o.warmup >= 0) return o.warmup;
  return std::clamp(iters_for(o, bytes) / 5, 1, 50);
}

void run_threads(int p, const std::function<void(int)>& fn) {
  std::exception_ptr first;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        const std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

double input_value(int rank, std::int64_t i, ReduceOp op, bool timing) {
  if (op == ReduceOp::kProd) {
    if (timing) return 1;
    // Powers of two and -1: every product is exact in every dtype.
    const std::int64_t k = (rank + i) % 3;
    return k == 0 ? 2.0 : (k == 1 ? 1.0 : -1.0);
  }
  // Zeros while timing: repeated in-place sums can neither overflow nor
  // reach denormals, which would time the FPU's slow path, not the algorithm.
  if (timing && (op == ReduceOp::kSum || op == ReduceOp::kAvg)) return 0;
  return static_cast<double>((rank * 7 + i * 13) % 17 - 8);
}

double expected_value(int p, std::int64_t i, ReduceOp op) {
  double acc = input_value(0, i, op, false);
  for (int r = 1; r < p; ++r) {
    const double v = input_value(r, i, op, false);
    switch (op) {
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
    }
  }
  return op == ReduceOp::kAvg ? acc / p : acc;
}

bool close_enough(double got, double want, DataType type, int p) {
  // Integers: exact (an integer average truncates towards zero, as C++ does).
  if (type == DataType::kInt32 || type == DataType::kInt64) return got == std::trunc(want);
  // Floats: the inputs are small integers, so sums and products are exact in
  // any order; only kAvg's division rounds. One ulp per reduction level is
  // a generous bound: eps · p · max(1, |want|).
  const double eps = type == DataType::kFloat32 ? std::numeric_limits<float>::epsilon()
                                                : std::numeric_limits<double>::epsilon();
  return std::abs(got - want) <= eps * p * std::max(1.0, std::abs(want));
}

double model_seconds(const std::string& algo, double n, int p, const Model& m) {
  if (p == 1) return 0;
  const double a = m.alpha, b = m.beta, g = m.gamma;
  const double frac = static_cast<double>(p - 1) / p;
  const int lg = static_cast<int>(std::ceil(std::log2(p)));
  if (algo == "ring")  // reduce-scatter + allgather, p-1 steps each
    return 2 * (p - 1) * a + 2 * frac * n * b + frac * n * g;
  if (algo == "rabenseifner") {
    // Non-powers of two first fold the extra ranks into a power of two
    // (one full message and one reduction) and send them the result at the end.
    const int q = 1 << static_cast<int>(std::floor(std::log2(p)));
    const double fq = static_cast<double>(q - 1) / q;
    const double core = 2 * std::log2(q) * a + 2 * fq * n * b + fq * n * g;
    return q == p ? core : core + 2 * (a + n * b) + n * g;
  }
  if (algo == "binomial")  // tree reduce, then tree broadcast
    return lg * (2 * a + 2 * n * b + n * g);
  if (algo == "naive")  // the root receives and reduces p-1 vectors, then sends p-1
    return (p - 1) * (a + n * b + n * g) + (p - 1) * (a + n * b);
  if (algo == "direct")  // p-1 chunks in and reduced, then a ring allgather
    return 2 * (p - 1) * a + 2 * frac * n * b + frac * n * g;
  return -1;
}

}  // namespace dtw::bench
