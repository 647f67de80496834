// Step 05.7: the bubble, measured from a timeline. On a hand-made timeline
// whose answer is known; against the chapter's formula on real runs of GPipe
// and 1F1B replayed on ideal-8 (equal stages, free messages); and against
// the training layer's own analysis (analyze_timeline) of the same phases,
// on the replay and on the run's measured trace.
#include <gtest/gtest.h>

#include <vector>

#include "dtw/train/timeline.h"
#include "pipeline_test_util.h"

namespace dtw::ch05 {
namespace {

using testing::error_of;

TraceEvent event(const char* name, const char* category, int rank, int stage, double start, double end) {
  TraceEvent e;
  e.name = name;
  e.category = category;
  e.rank = rank;
  e.stage = stage;
  e.start_us = start;
  e.end_us = end;
  return e;
}

// Two stages from 100 us to 150 us, out of order, with what must not count:
// the optimizer's step (a compute phase of no stage), messages and labels.
std::vector<TraceEvent> hand_made() {
  return {event("optimizer", "compute", 0, -1, 150, 170), event("backward", "compute", 1, 1, 120, 140),
          event("forward", "compute", 0, 0, 100, 110),    event("send", "comm", 0, -1, 95, 200),
          event("backward", "compute", 0, 0, 130, 150),   event("step", "phase", 1, -1, 0, 300),
          event("forward", "compute", 1, 1, 110, 120),    event("optimizer", "compute", 1, -1, 150, 170)};
}

DTW_TEST_STEPS(BubbleTest, "05.7");
TEST(BubbleTest, AHandMadeTimelineHasTheBubbleItsPhasesLeave) {
  {
    DTW_TRACE("pipeline_bubble of a hand-made timeline, ranks = 2: busy 60 us of 2 × 50 us "
              "(span 100 to 150 us), bubble 1 − 60/100 = 0.4");
    // Σ compute = 10 + 20 + 10 + 20 = 60 us over 2 × 50 us of rank-time.
    EXPECT_NEAR(pipeline_bubble(hand_made(), 2), 0.4, 1e-12);
  }
  {
    DTW_TRACE("pipeline_bubble of the same hand-made timeline, ranks = 3 (rank 2 never computes): "
              "busy 60 us of 3 × 50 us, bubble 1 − 60/150 = 0.6");
    EXPECT_NEAR(pipeline_bubble(hand_made(), 3), 0.6, 1e-12);
  }
  {
    DTW_TRACE("pipeline_bubble of one forward phase alone, ranks = 1: no bubble");
    EXPECT_NEAR(pipeline_bubble({event("forward", "compute", 0, 0, 7, 9)}, 1), 0.0, 1e-12);
  }
}

TEST(BubbleTest, ATimelineWithoutPipelinePhasesOrOfOtherRanksIsAClearError) {
  DTW_TRACE("pipeline_bubble of timelines it cannot measure");
  EXPECT_NE(error_of<InvalidArgument>([] {
              pipeline_bubble({event("optimizer", "compute", 0, -1, 0, 1)}, 1);
            }).find("no compute phase of a pipeline stage"),
            std::string::npos);
  const std::string e = error_of<InvalidArgument>([] { pipeline_bubble(hand_made(), 1); });
  EXPECT_NE(e.find("rank 1"), std::string::npos) << e;
  EXPECT_NE(e.find("[0, 1)"), std::string::npos) << e;
}

// Only the pipeline's own phases: what pipeline_bubble measures.
std::vector<TraceEvent> stage_phases(const std::vector<TraceEvent>& events) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : events)
    if (e.category == "compute" && e.stage >= 0) out.push_back(e);
  return out;
}

DTW_TEST_STEPS(BubbleReplayTest, "05.1", "05.2", "05.3", "05.6", "05.7");
TEST(BubbleReplayTest, OnIdealStagesItIsTheFormulaAndTheTimelinesOwn) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB})
    for (const auto& [p, m] : std::vector<std::pair<int, int>>{{2, 1}, {2, 4}, {4, 4}, {4, 8}}) {
      DTW_TRACE("pipeline_bubble of " << name_of(kind) << ", p = " << p << ", m = " << m
                                      << ", replayed on ideal-8");
      std::vector<TraceEvent> measured;
      const train::Replay replay = testing::ideal_replay(kind, p, m, 1, &measured);
      const double bubble = pipeline_bubble(replay.events, p);
      EXPECT_NEAR(bubble, (p - 1.0) / (m + p - 1.0), 0.01) << name_of(kind) << ", p = " << p << ", m = " << m;
      EXPECT_NEAR(bubble, train::analyze_timeline(stage_phases(replay.events), p).bubble, 1e-9);
      // The run's own trace (this machine's times, not a model's): the same
      // definition as the training layer's.
      EXPECT_NEAR(pipeline_bubble(measured, p), train::analyze_timeline(stage_phases(measured), p).bubble, 1e-9);
    }
}

}  // namespace
}  // namespace dtw::ch05
