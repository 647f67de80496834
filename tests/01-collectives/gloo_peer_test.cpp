// Gloo as a second, independent peer: the collectives library PyTorch uses on
// CPUs. Each Gloo rank is a thread with its own context, connected over
// loopback TCP through an in-memory store the threads share. Float sum
// allreduce (every algorithm, each in its own step's suite) and allgather are
// compared with Gloo's on the same inputs. Without Gloo at configure time the
// tests skip.
#include <exception>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dtw/config.h"
#include "sweep.h"

#if DTW_HAVE_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace dtw::ch01 {
namespace {

// The two trusted references against each other: no lab code runs.
DTW_TEST_STEPS(GlooReferenceTest);

#if DTW_HAVE_GLOO
#define DTW_REQUIRE_GLOO() (void)0
#else
#define DTW_REQUIRE_GLOO() \
  GTEST_SKIP() << "Gloo was not found at configure time (install libgloo-dev and reconfigure)"
#endif

const std::vector<int> kGlooWorlds = {1, 2, 3, 5, 8};

// Counts per world: the sweep's small counts except 0 (Gloo rejects empty
// buffers), and the large prime count on two worlds only: Gloo over loopback
// TCP moves about 1 GB/s, and the point is agreement, not speed.
std::vector<std::int64_t> gloo_counts(int p) {
  std::vector<std::int64_t> counts;
  for (std::int64_t n : sweep::counts_for(p, p == 3 || p == 8))
    if (n > 0) counts.push_back(n);
  return counts;
}

#if DTW_HAVE_GLOO
// Runs fn(rank, context) on p threads, each with a Gloo context connected to
// the others, and rethrows the first failure.
template <class F>
void with_gloo(int p, F fn) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    threads.emplace_back([&, r] {
      try {
        gloo::transport::tcp::attr attr("127.0.0.1");
        auto device = gloo::transport::tcp::CreateDevice(attr);
        auto context = std::make_shared<gloo::rendezvous::Context>(r, p);
        context->setTimeout(std::chrono::seconds(30));
        context->connectFullMesh(*store, device);
        fn(r, context);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}
#endif

// Gloo's float sum allreduce of every rank's sweep input: results[rank].
using PerRank = std::vector<std::vector<float>>;

const PerRank& gloo_allreduce(int p, std::int64_t n) {
  static std::map<std::pair<int, std::int64_t>, PerRank> cache;
  auto [it, fresh] = cache.try_emplace({p, n});
  if (!fresh) return it->second;
  PerRank& results = it->second;
  results.resize(static_cast<std::size_t>(p));
#if DTW_HAVE_GLOO
  with_gloo(p, [&](int r, const std::shared_ptr<gloo::Context>& context) {
    std::vector<float> data = sweep::make_input<float>(r, n, ReduceOp::kSum);
    gloo::AllreduceOptions options(context);
    options.setOutput(data.data(), data.size());
    options.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(options);
    results[static_cast<std::size_t>(r)] = std::move(data);
  });
#else
  (void)n;
#endif
  return results;
}

const PerRank& gloo_allgather(int p, std::int64_t m) {
  static std::map<std::pair<int, std::int64_t>, PerRank> cache;
  auto [it, fresh] = cache.try_emplace({p, m});
  if (!fresh) return it->second;
  PerRank& results = it->second;
  results.resize(static_cast<std::size_t>(p));
#if DTW_HAVE_GLOO
  with_gloo(p, [&](int r, const std::shared_ptr<gloo::Context>& context) {
    std::vector<float> in = sweep::make_input<float>(r, m, ReduceOp::kSum);
    std::vector<float> out(static_cast<std::size_t>(p * m));
    gloo::AllgatherOptions options(context);
    options.setInput(in.data(), in.size());
    options.setOutput(out.data(), out.size());
    gloo::allgather(options);
    results[static_cast<std::size_t>(r)] = std::move(out);
  });
#else
  (void)m;
#endif
  return results;
}

// Our allreduce against Gloo's; the tolerance is the sweep's (both sum p
// terms, in different orders).
void compare_allreduce_with_gloo(AllreduceAlgo algo) {
  for (int p : kGlooWorlds) {
    for (std::int64_t n : gloo_counts(p)) {
      const PerRank& want = gloo_allreduce(p, n);
      dtw::testing::launch_bounded(
          p,
          [&](Comm& comm) {
            std::vector<float> data = sweep::make_input<float>(comm.rank(), n, ReduceOp::kSum);
            allreduce(comm, std::span<float>(data), ReduceOp::kSum, algo);
            sweep::Checker(comm.rank())
                .same(want[static_cast<std::size_t>(comm.rank())], data,
                      sweep::tolerance<float>(p, ReduceOp::kSum),
                      sweep::describe<float>(
                          ("allreduce " + std::string(name_of(algo)) + " vs Gloo").c_str(), p, n,
                          static_cast<int>(ReduceOp::kSum)));
          },
          std::chrono::seconds(60));
    }
  }
}

void compare_allgather_with_gloo(AllgatherAlgo algo) {
  for (int p : kGlooWorlds) {
    for (std::int64_t m : gloo_counts(p)) {
      if (m > 100'000) m /= p;  // keep the whole result near a million elements
      const PerRank& want = gloo_allgather(p, m);
      dtw::testing::launch_bounded(
          p,
          [&](Comm& comm) {
            const std::vector<float> in = sweep::make_input<float>(comm.rank(), m, ReduceOp::kSum);
            std::vector<float> out(static_cast<std::size_t>(p * m), -7.0f);
            allgather(comm, std::span<const float>(in), std::span<float>(out), algo);
            sweep::Checker(comm.rank())
                .same(want[static_cast<std::size_t>(comm.rank())], out, 0,
                      sweep::describe<float>(
                          ("allgather " + std::string(name_of(algo)) + " vs Gloo").c_str(), p, m));
          },
          std::chrono::seconds(60));
    }
  }
}

TEST(GlooReferenceTest, AgreesWithGloo) {
  // The two trusted sources must agree before either can judge the learner.
  DTW_REQUIRE_GLOO();
  for (int p : {2, 5}) {
    const std::int64_t n = 3 * p + 1;
    const PerRank& want = gloo_allreduce(p, n);
    dtw::testing::launch_bounded(p, [&](Comm& comm) {
      std::vector<float> data = sweep::make_input<float>(comm.rank(), n, ReduceOp::kSum);
      reference::allreduce(comm, data, ReduceOp::kSum);
      sweep::Checker(comm.rank())
          .same(want[static_cast<std::size_t>(comm.rank())], data,
                sweep::tolerance<float>(p, ReduceOp::kSum), "reference vs Gloo");
    });
  }
}

TEST(AllreduceRingTest, MatchesGloo) {
  DTW_REQUIRE_GLOO();
  compare_allreduce_with_gloo(AllreduceAlgo::kRing);
}

TEST(AllgatherTest, RingMatchesGloo) {
  DTW_REQUIRE_GLOO();
  compare_allgather_with_gloo(AllgatherAlgo::kRing);
}

// Each algorithm's Gloo check lives in that algorithm's suite (and step).
TEST(AllgatherTest, RecursiveDoublingMatchesGloo) {
  DTW_REQUIRE_GLOO();
  compare_allgather_with_gloo(AllgatherAlgo::kRecursiveDoubling);
}

TEST(AllreduceTreeTest, NaiveMatchesGloo) {
  DTW_REQUIRE_GLOO();
  compare_allreduce_with_gloo(AllreduceAlgo::kNaive);
}

TEST(AllreduceTreeTest, BinomialMatchesGloo) {
  DTW_REQUIRE_GLOO();
  compare_allreduce_with_gloo(AllreduceAlgo::kBinomial);
}

TEST(AllreduceRabenseifnerTest, MatchesGloo) {
  DTW_REQUIRE_GLOO();
  compare_allreduce_with_gloo(AllreduceAlgo::kRabenseifner);
}

TEST(AllreduceDirectTest, MatchesGloo) {
  DTW_REQUIRE_GLOO();
  compare_allreduce_with_gloo(AllreduceAlgo::kDirect);
}

}  // namespace
}  // namespace dtw::ch01
