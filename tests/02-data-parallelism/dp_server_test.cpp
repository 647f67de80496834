// Step 02.1: data parallelism with a central model server. It matches the
// reference on 1-4 ranks for both models; its traffic is the star the cost
// model predicts (every worker's gradient in, the parameters out, through
// rank 0's link); only the server holds optimizer state; and the server
// posts the parameters for every worker before it waits for any.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "dp_test.h"
#include "dtw_test.h"

namespace dtw::ch02 {
namespace {

using testing::expect_matches;
using testing::model_size;
using testing::tiny;

void server(train::RankRun<double>& run) {
  dp_server(run);
}

DTW_TEST_STEPS(DpServerTest, "02.1");
TEST(DpServerTest, MatchesTheReferenceOnOneToFourRanks) {
  for (const char* model : {"gpt-tiny", "mlp-tiny"})
    for (int p = 1; p <= 4; ++p) expect_matches(tiny(model), p, server);
}

TEST(DpServerTest, TheServersLinkCarriesEveryWorkersGradientAndParameters) {
  const train::RunSpec spec = tiny("mlp-tiny", 3);
  const int p = 4;
  DTW_TRACE("dp-server's traffic on 4 ranks: gradients and losses in, parameters out");
  const train::RunOutcome out = expect_matches(spec, p, server);
  const std::int64_t psi = model_size(spec) * static_cast<std::int64_t>(sizeof(double));
  for (int w = 1; w < p; ++w) {
    // Per step: θ from the server; the gradient and one double of loss to it.
    EXPECT_EQ(out.report.traffic.bytes(0, w), spec.steps * psi) << "server -> worker " << w;
    EXPECT_EQ(out.report.traffic.bytes(w, 0), spec.steps * (psi + 8))
        << "worker " << w << " -> server";
    for (int v = 1; v < p; ++v)
      EXPECT_EQ(out.report.traffic.bytes(w, v), 0)
          << "workers never talk to each other: " << w << " -> " << v;
  }
}

TEST(DpServerTest, OnlyTheServerHoldsOptimizerState) {
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  const int p = 3;
  const train::RunOutcome out = expect_matches(spec, p, server);
  const std::int64_t psi = model_size(spec) * static_cast<std::int64_t>(sizeof(double));
  ASSERT_EQ(out.report.memory.size(), static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    const MemorySnapshot& m = out.report.memory[static_cast<std::size_t>(r)];
    EXPECT_EQ(m.peak_of(MemoryCategory::kParameters), psi) << "rank " << r;
    EXPECT_EQ(m.peak_of(MemoryCategory::kGradients), psi) << "rank " << r;
    // AdamW's two moments on the server, nothing on a worker.
    EXPECT_EQ(m.peak_of(MemoryCategory::kOptimizerState), r == 0 ? 2 * psi : 0) << "rank " << r;
  }
}


DTW_TEST_STEPS(DpServerPullTest, "02.1");
TEST(DpServerPullTest, TheServerPostsEveryWorkersParametersBeforeWaitingForAny) {
  // Rank 0 runs dp_server; the workers are written here, with dp_server's
  // protocol (tags 1: gradient, 2: loss, 3: parameters), and worker 1 takes
  // its parameters only once worker 2 has its own. A server that posts every
  // send before waiting serves worker 2 at once; one that sends to worker 1,
  // waits until it has received, and only then sends to worker 2, makes
  // worker 2 wait for worker 1. Threads only: the workers share a flag.
  const train::RunSpec spec = tiny("mlp-tiny", 1);
  const int p = 3;
  DTW_TRACE("dp-server on 3 ranks, worker 1 receiving the parameters only after worker 2 has");
  std::atomic<bool> worker2_has_them{false};
  dtw::testing::launch_bounded(p, [&](Comm& comm) {
    const train::Knobs knobs;
    train::RankRun<double> run(comm, spec, knobs);
    if (comm.rank() == 0) {
      dp_server(run);
      return;
    }
    check_same_run(comm, spec);
    train::ReplicaPlan plan = train::ReplicaPlan::whole(spec);
    plan.optimizer.clear();
    train::Replica<double> replica(spec, comm.exec(), plan);
    const double w = shard_weight(spec, comm.rank(), p);
    const double loss = w * replica.forward_backward(0, comm.rank(), p, w);
    comm.send(replica.grads(), 0, 1);
    comm.send(std::span<const double>(&loss, 1), 0, 2);
    if (comm.rank() == 1) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!worker2_has_them && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_TRUE(worker2_has_them.load())
          << "worker 2 had not received the parameters 5 s after worker 1 was ready for "
          << "them but had not received yet: the server must post its send to every worker "
          << "(non-blocking) before it waits for any, not send to one worker after the other";
    }
    comm.recv(replica.params(), 0, 3);
    if (comm.rank() == 2) worker2_has_them = true;
  });
}

}  // namespace
}  // namespace dtw::ch02
