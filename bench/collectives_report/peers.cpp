// Rows measured beside dtw's algorithms in the same run: Gloo's allreduce
// algorithms (the collectives library PyTorch uses on CPUs), a plain memcpy of
// the same bytes, and the "ideal" hand-fused two-thread allreduce.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>

#include "dispatch.h"
#include "dtw/chunks.h"
#include "dtw/config.h"
#include "report.h"
#if DTW_HAVE_GLOO
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace dtw::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Times `iters` calls of body(k) on every rank thread after a common start;
// the figure for a trial is its slowest rank, the result the fastest trial.
class Timer {
 public:
  Timer(const Options& o, int p) : o_(o), p_(p), secs_(o.sizes.size() * o.trials * p) {}
  template <class Body>
  void time(int rank, std::size_t k, std::barrier<>& bar, Body&& body) {
    const int iters = iters_for(o_, o_.sizes[k]);
    for (int w = 0; w < warmup_for(o_, o_.sizes[k]); ++w) body();
    for (int t = 0; t < o_.trials; ++t) {
      bar.arrive_and_wait();
      const auto t0 = Clock::now();
      for (int it = 0; it < iters; ++it) body();
      secs_[(k * o_.trials + t) * p_ + rank] =
          std::chrono::duration<double>(Clock::now() - t0).count() / iters;
    }
  }
  double seconds(std::size_t k) const {
    double best = std::numeric_limits<double>::infinity();
    for (int t = 0; t < o_.trials; ++t) {
      const auto first = secs_.begin() + static_cast<std::ptrdiff_t>((k * o_.trials + t) * p_);
      best = std::min(best, *std::max_element(first, first + p_));
    }
    return best;
  }

 private:
  const Options& o_;
  int p_;
  std::vector<double> secs_;
};

Series make_series(const Options& o, std::string name, std::string kind, double factor,
                   std::size_t elem, const Timer& timer, const std::vector<std::int64_t>& wrong) {
  Series s{std::move(name), std::move(kind), factor, "", {}};
  for (std::size_t k = 0; k < o.sizes.size(); ++k) {
    const std::int64_t count = o.sizes[k] / static_cast<std::int64_t>(elem);
    s.samples.push_back({o.sizes[k], count, timer.seconds(k), wrong.empty() ? -1 : wrong[k], -1});
  }
  return s;
}

template <class T>
std::int64_t count_wrong(const T* d, std::int64_t count, ReduceOp op, const Options& o) {
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < count; ++i)
    bad += close_enough(static_cast<double>(d[i]), expected_value(o.ranks, i, op), o.dtype, o.ranks) ? 0 : 1;
  return bad;
}

template <class T>
std::int64_t max_count(const Options& o) {
  return *std::ranges::max_element(o.sizes) / static_cast<std::int64_t>(sizeof(T));
}

// Each rank thread copies its own buffer: p streams of read + write at once.
template <class T>
Series memcpy_row(const Options& o) {
  const int p = o.ranks;
  Timer timer(o, p);
  std::barrier bar(p);
  run_threads(p, [&](int r) {
    std::vector<T> src(static_cast<std::size_t>(max_count<T>(o)), T{1}), dst(src);
    for (std::size_t k = 0; k < o.sizes.size(); ++k) {
      const std::size_t bytes = static_cast<std::size_t>(o.sizes[k]);
      timer.time(r, k, bar, [&] { std::memcpy(dst.data(), src.data(), bytes); });
    }
  });
  Series s = make_series(o, "memcpy", "bound", 1.0, sizeof(T), timer, {});
  s.note = "every rank thread copies the same bytes at once; busbw = algbw";
  return s;
}

template <class T>
void add_into(T* __restrict dst, const T* __restrict src, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Two threads, no messages, no scratch: thread t sums its half straight from
// the peer's buffer into its own, then copies the other half, which the peer
// has finished, from the peer. Per element each thread reads 1.5 and writes 1
// of the buffer's elements: the least any allreduce of 2 can move.
template <class T>
Series ideal_row(const Options& o) {
  if (o.ranks != 2 || (o.op != ReduceOp::kSum))
    return {"ideal", "bound", 1.0, "skipped: the ideal row is a 2-rank sum (--ranks 2 --op sum)", {}};
  Timer timer(o, 2);
  std::barrier bar(2);
  std::vector<std::vector<T>> bufs(2);
  std::vector<std::int64_t> wrong_by_rank(o.sizes.size() * 2, 0);
  std::barrier phase(2);
  run_threads(2, [&](int r) {
    bufs[r].assign(static_cast<std::size_t>(max_count<T>(o)), T{0});
    phase.arrive_and_wait();
    T* mine = bufs[r].data();
    const T* peer = bufs[1 - r].data();
    for (std::size_t k = 0; k < o.sizes.size(); ++k) {
      const std::int64_t count = o.sizes[k] / static_cast<std::int64_t>(sizeof(T));
      const Chunks halves(count, 2);
      const auto once = [&] {
        add_into(mine + halves.offset(r), peer + halves.offset(r), halves.size(r));
        phase.arrive_and_wait();
        std::memcpy(mine + halves.offset(1 - r), peer + halves.offset(1 - r),
                    static_cast<std::size_t>(halves.size(1 - r)) * sizeof(T));
        phase.arrive_and_wait();  // the peer reads my buffer until here
      };
      for (std::int64_t i = 0; i < count; ++i) mine[i] = static_cast<T>(input_value(r, i, o.op, false));
      phase.arrive_and_wait();
      once();
      wrong_by_rank[k * 2 + r] = count_wrong(mine, count, o.op, o);
      phase.arrive_and_wait();
      for (std::int64_t i = 0; i < count; ++i) mine[i] = static_cast<T>(input_value(r, i, o.op, true));
      phase.arrive_and_wait();
      timer.time(r, k, bar, once);
    }
  });
  std::vector<std::int64_t> wrong(o.sizes.size());
  for (std::size_t k = 0; k < wrong.size(); ++k) wrong[k] = wrong_by_rank[k * 2] + wrong_by_rank[k * 2 + 1];
  Series s = make_series(o, "ideal", "bound", 1.0, sizeof(T), timer, wrong);
  // busbw as for an allreduce of 2 ranks: factor 2(p-1)/p = 1.
  s.note = "hand-fused 2-thread allreduce: sum own half from the peer's buffer, copy the other half";
  return s;
}

#if DTW_HAVE_GLOO
template <class T>
const gloo::ReductionFunction<T>* gloo_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProd: return gloo::ReductionFunction<T>::product;
    case ReduceOp::kMin: return gloo::ReductionFunction<T>::min;
    case ReduceOp::kMax: return gloo::ReductionFunction<T>::max;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

// Gloo over its TCP transport on the loopback interface, one context per rank
// thread, rendezvous through an in-memory store: how PyTorch's Gloo backend
// runs when every process is on one host.
template <class T>
std::vector<Series> gloo_rows(const Options& o) {
  const int p = o.ranks;
  const char* names[] = {"gloo ring", "gloo ring_chunked", "gloo halving_doubling"};
  std::vector<Timer> timers(3, Timer(o, p));
  std::vector<std::vector<std::int64_t>> wrong(3, std::vector<std::int64_t>(o.sizes.size() * p));
  // Gloo has no average: it runs a sum, and is checked as one.
  const ReduceOp op = o.op == ReduceOp::kAvg ? ReduceOp::kSum : o.op;
  gloo::rendezvous::HashStore store;
  std::barrier bar(p);
  run_threads(p, [&](int r) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(r, p);
    context->connectFullMesh(store, device);
    std::vector<T> data(static_cast<std::size_t>(max_count<T>(o)));
    for (int a = 0; a < 3; ++a) {
      for (std::size_t k = 0; k < o.sizes.size(); ++k) {
        const std::int64_t count = o.sizes[k] / static_cast<std::int64_t>(sizeof(T));
        const std::vector<T*> ptrs{data.data()};
        const int n = static_cast<int>(count);
        std::unique_ptr<gloo::Algorithm> algo;
        if (a == 0) algo = std::make_unique<gloo::AllreduceRing<T>>(context, ptrs, n, gloo_op<T>(op));
        if (a == 1) algo = std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs, n, gloo_op<T>(op));
        if (a == 2) algo = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, ptrs, n, gloo_op<T>(op));
        for (std::int64_t i = 0; i < count; ++i) data[i] = static_cast<T>(input_value(r, i, op, false));
        algo->run();
        wrong[a][k * p + r] = count_wrong(data.data(), count, op, o);
        for (std::int64_t i = 0; i < count; ++i) data[i] = static_cast<T>(input_value(r, i, op, true));
        timers[a].time(r, k, bar, [&] { algo->run(); });
      }
    }
  });
  std::vector<Series> out;
  for (int a = 0; a < 3; ++a) {
    std::vector<std::int64_t> per_size(o.sizes.size(), 0);
    for (std::size_t k = 0; k < o.sizes.size(); ++k)
      for (int r = 0; r < p; ++r) per_size[k] += wrong[a][k * p + r];
    out.push_back(make_series(o, names[a], "peer", 2.0 * (p - 1) / p, sizeof(T), timers[a], per_size));
    if (o.op == ReduceOp::kAvg) out.back().note = "Gloo has no avg: measured and checked as sum";
  }
  return out;
}
#endif

}  // namespace

std::vector<Series> run_peers(const Options& o) {
  std::vector<Series> out;
  with_type(o.dtype, [&](auto zero) {
    using T = decltype(zero);
#if DTW_HAVE_GLOO
    if (o.ranks >= 2) {
      for (auto& s : gloo_rows<T>(o)) out.push_back(std::move(s));
    } else {
      out.push_back({"gloo", "peer", 1, "skipped: Gloo rows need --ranks >= 2", {}});
    }
#else
    out.push_back({"gloo", "peer", 1, "skipped: built without Gloo (libgloo-dev)", {}});
#endif
    out.push_back(memcpy_row<T>(o));
    out.push_back(ideal_row<T>(o));
  });
  return out;
}

}  // namespace dtw::bench
