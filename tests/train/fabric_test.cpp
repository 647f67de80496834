// Timelines and the modeled fabric: synthetic traces with known answers, a
// trace that cannot complete, and a real run's timeline and SVG.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/train/fabric.h"
#include "dtw/train/strategy.h"
#include "dtw/train/timeline.h"
#include "plain_dp.h"

namespace dtw::train {
namespace {

TraceEvent compute(int rank, double start_us, double end_us, double flops, double bytes = 0,
                   int stage = -1, int mb = -1) {
  TraceEvent e{"compute", "compute", rank, -1, static_cast<std::int64_t>(bytes), 0, start_us,
               end_us};
  e.flops = flops;
  e.stage = stage;
  e.micro_batch = mb;
  return e;
}

TraceEvent message(const char* op, int rank, int peer, bool send, std::int64_t bytes, int tag,
                   double start_us, double end_us) {
  TraceEvent e{op, "comm", rank, peer, bytes, tag, start_us, end_us};
  e.is_send = send;
  return e;
}

// 1 GFLOP/s, 1 GB/s; one rank per node: α 2 ms, β 10 ns/byte between them.
Cluster toy(int ranks_per_node) {
  Cluster c;
  c.name = "toy";
  c.ranks_per_node = ranks_per_node;
  c.intra = {1e-3, 1e-9};
  c.inter = {2e-3, 1e-8};
  c.flops = 1e9;
  c.memory_bw = 1e9;
  return c;
}

// `e` as a message of collective channel 0.
TraceEvent on_channel(TraceEvent e) {
  e.channel = 0;
  return e;
}

// Rank 0's isends in the replay, in order.
std::vector<const TraceEvent*> sends_of(const Replay& r) {
  std::vector<const TraceEvent*> sends;
  for (const TraceEvent& e : r.events)
    if (e.rank == 0 && e.name == "isend") sends.push_back(&e);
  return sends;
}

const TraceEvent& find(const std::vector<TraceEvent>& events, int rank, const std::string& name) {
  for (const TraceEvent& e : events)
    if (e.rank == rank && e.name == name) return e;
  ADD_FAILURE() << "no " << name << " on rank " << rank;
  return events.front();
}

TEST(FabricTest, ASendOfNBytesAfterComputeTakesAlphaPlusNBeta) {
  // Rank 0 computes (2e6 FLOPs + 1e6 bytes: 3 ms modeled; 5 ms measured, which
  // a device model ignores), then sends 1e5 bytes; rank 1 waits for them, then
  // computes 1e6 FLOPs.
  const std::vector<TraceEvent> trace = {
      compute(0, 0, 5000, 2e6, 1e6),
      message("send", 0, 1, true, 100000, 7, 6000, 9000),
      message("recv", 1, 0, false, 100000, 7, 100, 9000),
      compute(1, 9500, 10000, 1e6),
  };
  const Replay r = replay_on(trace, 2, toy(1));
  const double send_at = 3e-3, arrives = send_at + 2e-3 + 1e5 * 1e-8;  // 6 ms
  EXPECT_NEAR(find(r.events, 0, "compute").end_us, send_at * 1e6, 1e-6);
  EXPECT_NEAR(find(r.events, 0, "send").start_us, send_at * 1e6, 1e-6);
  EXPECT_NEAR(find(r.events, 0, "send").end_us, arrives * 1e6, 1e-6);
  EXPECT_NEAR(find(r.events, 1, "recv").start_us, 0, 1e-6);
  EXPECT_NEAR(find(r.events, 1, "recv").end_us, arrives * 1e6, 1e-6);
  EXPECT_NEAR(find(r.events, 1, "compute").start_us, arrives * 1e6, 1e-6);
  EXPECT_NEAR(r.seconds, arrives + 1e-3, 1e-12);
  const Timeline& t = r.timeline;
  EXPECT_NEAR(t.ranks[0].compute, 3e-3, 1e-12);
  EXPECT_NEAR(t.ranks[0].comm, 3e-3, 1e-12);
  EXPECT_NEAR(t.ranks[0].idle, 1e-3, 1e-12);
  EXPECT_NEAR(t.ranks[1].comm, 6e-3, 1e-12);
  EXPECT_NEAR(t.ranks[1].idle, 0, 1e-12);
  EXPECT_NEAR(t.bubble, 1 - 4.0 / 14.0, 1e-12);
  EXPECT_EQ(t.overlap, 0.0);
  EXPECT_EQ(r.unmodeled, 0);
  EXPECT_EQ(r.unmatched, 0);
  // On one node the intra-node link applies: α 1 ms, β 1 ns/byte.
  EXPECT_NEAR(replay_on(trace, 2, toy(2)).seconds, 3e-3 + 1e-3 + 1e5 * 1e-9 + 1e-3, 1e-12);
}

TEST(FabricTest, ASendPostedInsideComputeOverlapsIt) {
  // Rank 0 posts an isend a quarter into a 10 ms phase; it completes inside it.
  const std::vector<TraceEvent> trace = {
      compute(0, 0, 1000, 1e7),
      message("isend", 0, 1, true, 1000000, 3, 250, 400),
      message("irecv", 1, 0, false, 1000000, 3, 0, 400),
  };
  const Replay r = replay_on(trace, 2, toy(2));
  EXPECT_NEAR(find(r.events, 0, "isend").start_us, 2500, 1e-6);  // 25% of 10 ms
  EXPECT_NEAR(find(r.events, 0, "isend").end_us, 2500 + 2000, 1e-6);
  EXPECT_NEAR(r.timeline.ranks[0].hidden, 2e-3, 1e-12);
  EXPECT_NEAR(r.timeline.overlap, 2.0 / 6.5, 1e-12);
  EXPECT_NEAR(r.seconds, 10e-3, 1e-12);
}

TEST(FabricTest, APostInsideComputeLandsAtItsShareOfThePhasesWorkNotOfItsTime) {
  // This machine took 90% of a 1 ms phase to reach the post, but the work
  // clock says only 20% of the phase's 1e7 FLOPs had been done (a slow
  // forward here, say): on a device the post comes at 20% of the 10 ms.
  TraceEvent phase = compute(0, 0, 1000, 1e7);
  phase.work_start = 5e6;  // the clock counts from the rank's start
  phase.work_end = 15e6;
  TraceEvent send = message("isend", 0, 1, true, 1000000, 3, 900, 950);
  send.work_start = 7e6;
  const std::vector<TraceEvent> trace = {phase, send,
                                         message("irecv", 1, 0, false, 1000000, 3, 0, 950)};
  const Replay r = replay_on(trace, 2, toy(2));
  EXPECT_NEAR(find(r.events, 0, "isend").start_us, 2000, 1e-6);
  // Without a work clock: the share of the measured time.
  std::vector<TraceEvent> untimed = trace;
  untimed[0].work_start = untimed[0].work_end = untimed[1].work_start = -1;
  EXPECT_NEAR(find(replay_on(untimed, 2, toy(2)).events, 0, "isend").start_us, 9000, 1e-6);
  // On this machine the measured time is the truth: 90% of the measured 1 ms.
  const Replay here = replay_on(trace, 2, this_machine(1e-3, 1e-9, 1e9));
  EXPECT_NEAR(find(here.events, 0, "isend").start_us, 900, 1e-6);
}

TEST(FabricTest, APostInsideComputeFollowsTheCompletionsItsRankHadSeen) {
  // Two rounds of a chain inside a 10 ms phase of rank 0: the host posted
  // round B (at 16%) only after round A had arrived. Each message takes 2 ms
  // (α 1 ms + 1e6 bytes · 1 ns). A is posted at 1 ms and arrives at 3 ms, so
  // B cannot start at 1.6 ms: it starts at 3 ms and arrives at 5 ms.
  const std::vector<TraceEvent> trace = {
      compute(0, 0, 1000, 1e7),
      message("isend", 0, 1, true, 1000000, 3, 100, 150),
      message("isend", 0, 1, true, 1000000, 4, 160, 200),
      message("irecv", 1, 0, false, 1000000, 3, 0, 150),
      message("irecv", 1, 0, false, 1000000, 4, 155, 200),
  };
  const Replay r = replay_on(trace, 2, toy(2));
  const std::vector<const TraceEvent*> sends = sends_of(r);
  ASSERT_EQ(sends.size(), 2u);
  EXPECT_NEAR(sends[0]->start_us, 1000, 1e-6);
  EXPECT_NEAR(sends[0]->end_us, 3000, 1e-6);
  EXPECT_NEAR(sends[1]->start_us, 3000, 1e-6);  // not 1600: after A's arrival
  EXPECT_NEAR(sends[1]->end_us, 5000, 1e-6);
  EXPECT_NEAR(r.seconds, 10e-3, 1e-12);  // both still hidden under the phase
}

TEST(FabricTest, OnADeviceACollectivesLaterRoundsFollowTheLastArrivalNotTheHostsPoll) {
  // Two rounds of one collective (collective channel 0, tag 5) from rank 0 to
  // rank 1 inside a 10 ms phase of rank 0. The host polled late: it posted
  // round B at 80% of the phase, long after round A had arrived. Each message
  // takes 2 ms (α 1 ms + 1e6 bytes · 1 ns).
  const std::vector<TraceEvent> trace = {
      compute(0, 0, 1000, 1e7),
      on_channel(message("isend", 0, 1, true, 1000000, 5, 100, 150)),
      on_channel(message("isend", 0, 1, true, 1000000, 5, 800, 850)),
      on_channel(message("irecv", 1, 0, false, 1000000, 5, 0, 150)),
      on_channel(message("irecv", 1, 0, false, 1000000, 5, 790, 850)),
      // A user message with the same tag is not part of the collective: it
      // pairs with its own receive and keeps the host's post (90%).
      message("isend", 0, 1, true, 1000000, 5, 900, 950),
      message("irecv", 1, 0, false, 1000000, 5, 895, 950),
  };
  Cluster device = toy(2);
  const Replay on_device = replay_on(trace, 2, device);
  std::vector<const TraceEvent*> sends = sends_of(on_device);
  ASSERT_EQ(sends.size(), 3u);
  EXPECT_NEAR(sends[0]->start_us, 1000, 1e-6);
  EXPECT_NEAR(sends[0]->end_us, 3000, 1e-6);
  EXPECT_NEAR(sends[1]->start_us, 3000, 1e-6);  // at A's arrival, not at the poll (8 ms)
  EXPECT_NEAR(sends[1]->end_us, 5000, 1e-6);
  EXPECT_EQ(sends[2]->channel, -1);
  EXPECT_NEAR(sends[2]->start_us, 9000, 1e-6);  // the user's message: where the host posted it
  EXPECT_NEAR(sends[2]->end_us, 11000, 1e-6);
  EXPECT_EQ(on_device.unmatched, 0);
  // Where the host's polls are the truth (this-machine), round B keeps its post.
  device.device_progress = false;
  const Replay polled = replay_on(trace, 2, device);
  sends = sends_of(polled);
  ASSERT_EQ(sends.size(), 3u);
  EXPECT_NEAR(sends[1]->start_us, 8000, 1e-6);
  EXPECT_NEAR(sends[1]->end_us, 10000, 1e-6);
  EXPECT_FALSE(this_machine(1e-6, 1e-9, 1e9).device_progress);
  for (const Cluster& c : gpu_clusters()) EXPECT_TRUE(c.device_progress) << c.name;
}

TEST(FabricTest, OnADeviceTheCollectivesOfOneChannelRunOneAfterAnother) {
  // Two collectives on collective channel 0 (tags 1 and 2), one message each
  // from rank 0 to rank 1, started by the host at 10% and 20% of a 10 ms
  // phase. A message takes 2 ms. The communicator's stream runs them in
  // order: the second starts when the first has arrived (3 ms), not at 2 ms.
  const std::vector<TraceEvent> trace = {
      compute(0, 0, 1000, 1e7),
      on_channel(message("isend", 0, 1, true, 1000000, 1, 100, 500)),
      on_channel(message("isend", 0, 1, true, 1000000, 2, 200, 600)),
      on_channel(message("irecv", 1, 0, false, 1000000, 1, 0, 500)),
      on_channel(message("irecv", 1, 0, false, 1000000, 2, 0, 600)),
  };
  const Replay r = replay_on(trace, 2, toy(2));
  const std::vector<const TraceEvent*> sends = sends_of(r);
  ASSERT_EQ(sends.size(), 2u);
  EXPECT_NEAR(sends[0]->start_us, 1000, 1e-6);
  EXPECT_NEAR(sends[0]->end_us, 3000, 1e-6);
  EXPECT_NEAR(sends[1]->start_us, 3000, 1e-6);  // after the first, not at 2 ms
  EXPECT_NEAR(sends[1]->end_us, 5000, 1e-6);
  // On different channels (two communicators) they run side by side.
  std::vector<TraceEvent> two = trace;
  two[2].channel = two[4].channel = 1;
  const Replay apart = replay_on(two, 2, toy(2));
  int checked = 0;
  for (const TraceEvent& e : apart.events) {
    if (e.rank == 0 && e.tag == 2) {
      EXPECT_NEAR(e.start_us, 2000, 1e-6);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1);
}

TEST(FabricTest, ThisMachineKeepsMeasuredComputeAndUsesTheFittedLink) {
  const std::vector<TraceEvent> trace = {
      compute(0, 0, 5000, 2e6),
      message("send", 0, 1, true, 1000, 0, 5000, 6000),
      message("recv", 1, 0, false, 1000, 0, 0, 6000),
  };
  const Replay r = replay_on(trace, 2, this_machine(1e-6, 1e-10, 1e10));
  EXPECT_NEAR(r.seconds, 5e-3 + 1e-6 + 1000 * 1e-10, 1e-12);
  // A device model needs FLOPs or bytes: a bare compute phase counts as unmodeled.
  EXPECT_EQ(replay_on({compute(0, 0, 10, 0)}, 1, find_gpu_cluster("nvlink-8")).unmodeled, 1);
}

TEST(FabricTest, ATraceThatCannotCompleteIsNamed) {
  // Both ranks receive before they send.
  const std::vector<TraceEvent> trace = {
      message("recv", 0, 1, false, 8, 1, 0, 10), message("send", 0, 1, true, 8, 2, 10, 20),
      message("recv", 1, 0, false, 8, 2, 0, 20), message("send", 1, 0, true, 8, 1, 20, 30),
  };
  try {
    replay_on(trace, 2, toy(1));
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("the trace cannot complete: rank 0 waits for its recv "
                                         "from rank 1 (tag 1, 8 bytes)"),
              std::string::npos)
        << e.what();
  }
}

TEST(FabricTest, NamedClustersHaveSourcesAndUnknownNamesAreListed) {
  for (const char* name : {"pcie-8", "nvlink-8", "ib-2x8", "ib-4x8", "ideal-8"}) {
    const Cluster& c = find_gpu_cluster(name);
    EXPECT_FALSE(c.sources.empty()) << name;
    EXPECT_GT(c.flops, 0) << name;
  }
  EXPECT_LT(find_gpu_cluster("ib-2x8").link(0, 7).beta, find_gpu_cluster("ib-2x8").link(0, 8).beta);
  // ideal-8: nvlink-8's devices, messages free.
  EXPECT_EQ(find_gpu_cluster("ideal-8").link(0, 9).seconds(1e9), 0.0);
  EXPECT_EQ(find_gpu_cluster("ideal-8").flops, find_gpu_cluster("nvlink-8").flops);
  try {
    find_gpu_cluster("tpu-pod");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown fabric 'tpu-pod'; known: pcie-8"),
              std::string::npos);
  }
}

TEST(FabricTest, ARealRunHasATimelineAReplayAndAnSvg) {
  RunSpec spec = standard_run("gpt-tiny");
  spec.steps = 2;
  spec.batch = 4;
  spec.dtype = DType::kFloat64;
  HarnessOptions o;
  o.ranks = 2;
  o.trace = true;
  const RunOutcome out =
      run_ranks<double>(spec, o, [](RankRun<double>& run) { testing::plain_dp(run); });
  ASSERT_TRUE(out.matches) << out.mismatch;
  const Timeline t = analyze_timeline(out.report.trace, 2);
  for (const RankTimeline& rt : t.ranks) {
    EXPECT_GT(rt.compute, 0) << "rank " << rt.rank;
    EXPECT_GE(rt.compute + rt.comm - rt.hidden + rt.idle, 0.999 * t.span);
  }
  const Replay r = replay_on(out.report.trace, 2, find_gpu_cluster("nvlink-8"));
  EXPECT_GT(r.seconds, 0);
  EXPECT_EQ(r.unmodeled, 0);  // every compute phase carries its FLOPs and bytes
  const std::string path = ::testing::TempDir() + "timeline_test.svg";
  write_timeline_svg(out.report.trace, 2, "plain DP, 2 ranks", path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
  EXPECT_NE(text.str().find("rank 1"), std::string::npos);
  EXPECT_NE(text.str().find("forward-backward"), std::string::npos);
}

}  // namespace
}  // namespace dtw::train
