// The rows measured through dtw::Comm: chapter 01's allreduce algorithms on
// the threads backend, and the α-β-γ model fitted in the same run (α and β by
// chapter 00's ping-pong, γ by timing the local reduction kernel).
#include <algorithm>
#include <chrono>
#include <limits>
#include <span>

#include "dispatch.h"
#include "dtw/dtw.h"
#include "dtw/kernels/reduce.h"
#include "report.h"
#if DTW_BENCH_HAVE_CH00
#include "ranks_and_messages.h"
#endif
#if DTW_BENCH_HAVE_CH01
#include "collectives.h"
#endif

namespace dtw::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Fastest one-way time per size, measured with chapter 00's ping-pong when
// its library is built, otherwise with the same protocol written here.
std::vector<std::pair<std::int64_t, double>> one_way_times(std::span<const std::int64_t> sizes,
                                                           int repeats, std::string& source) {
  std::vector<std::pair<std::int64_t, double>> out;
  launch(2, [&](Comm& comm) {
#if DTW_BENCH_HAVE_CH00
    const auto samples = ch00::ping_pong(comm, sizes, repeats);
    for (const auto& s : samples) out.emplace_back(s.bytes, s.round_trip_seconds / 2);
#else
    std::vector<std::byte> buf(static_cast<std::size_t>(*std::ranges::max_element(sizes)));
    for (std::int64_t n : sizes) {
      const std::span<std::byte> msg(buf.data(), static_cast<std::size_t>(n));
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k <= repeats; ++k) {  // the first round trip only warms up
        const auto t0 = Clock::now();
        if (comm.rank() == 0) {
          comm.send(msg, 1);
          comm.recv(msg, 1);
        } else {
          comm.recv(msg, 0);
          comm.send(msg, 0);
        }
        if (k > 0) best = std::min(best, seconds_since(t0));
      }
      if (comm.rank() == 0) out.emplace_back(n, best / 2);
    }
#endif
  });
  source = DTW_BENCH_HAVE_CH00 ? "chapter 00 ping_pong + fit_alpha_beta"
                               : "built-in ping-pong (chapter 00 library not built)";
  return out;
}

// Least-squares line through (bytes, seconds): chapter 00's fit when present.
std::pair<double, double> fit_line(const std::vector<std::pair<std::int64_t, double>>& pts) {
#if DTW_BENCH_HAVE_CH00
  std::vector<ch00::PingPongSample> samples;
  for (const auto& [n, t] : pts) samples.push_back({n, 2 * t});
  const ch00::AlphaBeta ab = ch00::fit_alpha_beta(samples);
  return {ab.alpha_seconds, ab.beta_seconds_per_byte};
#else
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double k = static_cast<double>(pts.size());
  for (const auto& [n, t] : pts) {
    const double x = static_cast<double>(n);
    sx += x, sy += t, sxx += x * x, sxy += x * t;
  }
  const double beta = (k * sxy - sx * sy) / (k * sxx - sx * sx);
  return {(sy - beta * sx) / k, beta};
#endif
}

}  // namespace

Model fit_model(const Options& o) {
  Model m;
  // α from small messages, β from large ones: one least-squares line through
  // all sizes lets the noise of the large messages (hundreds of µs) swamp
  // an intercept of about a microsecond.
  const std::vector<std::int64_t> small{8, 64, 512, 4096};
  const std::vector<std::int64_t> large{8 << 20, 32 << 20, 64 << 20};
  std::vector<std::int64_t> all = small;
  all.insert(all.end(), large.begin(), large.end());
  const auto times = one_way_times(all, 20, m.source);
  const auto split = times.begin() + static_cast<std::ptrdiff_t>(small.size());
  m.alpha = std::max(0.0, fit_line({times.begin(), split}).first);
  m.beta = fit_line({split, times.end()}).second;
  m.source += ": alpha from 8 B..4 KiB, beta from 8..64 MiB (out of cache)";

  // γ: the local reduction kernel on two out-of-cache buffers, per byte of the result.
  with_type(o.dtype, [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t count = (std::int64_t{16} << 20) / static_cast<std::int64_t>(sizeof(T));
    std::vector<T> dst(static_cast<std::size_t>(count), T{0}), src(dst);
    const ReduceOp op = o.op == ReduceOp::kAvg ? ReduceOp::kSum : o.op;
    double best = std::numeric_limits<double>::infinity();
    for (int k = 0; k < 6; ++k) {
      const auto t0 = Clock::now();
      kernels::reduce_into(dst.data(), src.data(), count, op);
      if (k > 0) best = std::min(best, seconds_since(t0));
    }
    m.gamma = best / static_cast<double>(count * static_cast<std::int64_t>(sizeof(T)));
  });
  return m;
}

#if DTW_BENCH_HAVE_CH01
namespace {

template <class T>
Series run_algorithm(const Options& o, const Model& m, const std::string& name) {
  const ch01::AllreduceAlgo algo = ch01::parse_allreduce_algo(name);
  const int p = o.ranks;
  const std::size_t nsizes = o.sizes.size(), trials = static_cast<std::size_t>(o.trials);
  const bool on_mpi = o.backend == "mpi";
  Series s{on_mpi ? name + " (mpi)" : name, "dtw", 2.0 * (p - 1) / p, "", {}};
  std::vector<double> secs(nsizes * trials * static_cast<std::size_t>(p));
  std::vector<std::int64_t> wrong(nsizes * static_cast<std::size_t>(p));
  LaunchOptions lo;
  lo.backend = o.backend;
  lo.timeout = std::chrono::minutes(5);
  // Each rank's two arrays of the largest size: the launch refuses a world
  // that cannot hold them instead of failing in the middle of a row.
  lo.bytes_per_rank = 2 * *std::ranges::max_element(o.sizes);
  launch(p, lo, [&](Comm& comm) {
    const int r = comm.rank();
    const std::int64_t max_count = *std::ranges::max_element(o.sizes) / static_cast<std::int64_t>(sizeof(T));
    std::vector<T> data(static_cast<std::size_t>(max_count)), ref(data);
    for (std::size_t k = 0; k < nsizes; ++k) {
      const std::int64_t count = o.sizes[k] / static_cast<std::int64_t>(sizeof(T));
      const std::span<T> d(data.data(), static_cast<std::size_t>(count));
      const std::span<T> rf(ref.data(), static_cast<std::size_t>(count));
      // Correctness first: the algorithm against the backend's reference.
      for (std::int64_t i = 0; i < count; ++i) d[i] = static_cast<T>(input_value(r, i, o.op, false));
      std::ranges::copy(d, rf.begin());
      ch01::allreduce(comm, d, o.op, algo);
      comm.reference_allreduce(as_buffer(rf), o.op);
      std::int64_t bad = 0;
      for (std::int64_t i = 0; i < count; ++i)
        bad += close_enough(static_cast<double>(d[i]), static_cast<double>(rf[i]), o.dtype, p) ? 0 : 1;
      wrong[k * p + r] = bad;
      // Then the timed calls, in place on the same buffer, as nccl-tests does.
      for (std::int64_t i = 0; i < count; ++i) d[i] = static_cast<T>(input_value(r, i, o.op, true));
      const int iters = iters_for(o, o.sizes[k]);
      for (int w = 0; w < warmup_for(o, o.sizes[k]); ++w) ch01::allreduce(comm, d, o.op, algo);
      for (std::size_t t = 0; t < trials; ++t) {
        comm.barrier();
        const auto t0 = Clock::now();
        for (int it = 0; it < iters; ++it) ch01::allreduce(comm, d, o.op, algo);
        secs[(k * trials + t) * p + r] = seconds_since(t0) / iters;
      }
    }
    // On MPI each process filled only its own rank's slots (the others are 0):
    // combine them so every process holds every rank's figures.
    if (on_mpi) {
      comm.reference_allreduce(as_buffer(std::span(secs)), ReduceOp::kMax);
      comm.reference_allreduce(as_buffer(std::span(wrong)), ReduceOp::kSum);
    }
  });
  for (std::size_t k = 0; k < nsizes; ++k) {
    Sample x = sample_from_ranks(o.sizes[k], sizeof(T), k, trials, p, secs, wrong);
    // The model's α and β come from threads; they do not describe processes.
    x.model_seconds = on_mpi ? -1 : model_seconds(name, static_cast<double>(x.bytes), p, m);
    s.samples.push_back(x);
  }
  return s;
}

}  // namespace

std::vector<Series> run_dtw_algorithms(const Options& o, const Model& m) {
  std::vector<Series> out;
  for (const std::string& name : o.algos) {
    with_type(o.dtype, [&](auto zero) { out.push_back(run_algorithm<decltype(zero)>(o, m, name)); });
  }
  return out;
}
#else
std::vector<Series> run_dtw_algorithms(const Options& o, const Model&) {
  std::vector<Series> out;
  for (const std::string& name : o.algos)
    out.push_back({name, "dtw", 1, "skipped: chapter 01's solution library (dtw_ch01_solution) is not built", {}});
  return out;
}
#endif

}  // namespace dtw::bench
