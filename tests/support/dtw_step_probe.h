#pragma once
// Probes of the chapter solutions' lab regions, for checking DTW_TEST_STEPS.
//
// cmake/DtwChapter.cmake builds a copy of each chapter's solution for its
// solution test program in which tools/gen-labs has replaced every
// `// @lab NN.K: ...` marker line with DTW_STEP_PROBE("NN.K") (this header is
// force-included). The test program's main (dtw_test_main.cpp) resets the
// record before each test and compares it, after the test, with the steps the
// test's suite declares, through dtw::testing::probe_hooks(), which the
// probe runtime (dtw_step_probe.cpp) fills in when it is linked.
#include <atomic>

namespace dtw::testing::probe {

/// One probed region. `seen` is the test epoch in which it last recorded its step.
struct Site {
  const char* step;
  std::atomic<unsigned> seen{0};
};

/// Incremented before every test; 0 means "no test has started".
extern std::atomic<unsigned> epoch;
/// Records `site.step` for the running test (the slow path of hit()).
void record(Site& site);

/// Records the site's step once per test; afterwards costs two relaxed loads.
inline void hit(Site& site) {
  const unsigned now = epoch.load(std::memory_order_relaxed);
  if (site.seen.load(std::memory_order_relaxed) != now) {
    site.seen.store(now, std::memory_order_relaxed);
    record(site);
  }
}

}  // namespace dtw::testing::probe

/// What a `// @lab NN.K:` marker line becomes in the probed solution.
#define DTW_STEP_PROBE(step)                                       \
  do {                                                             \
    static ::dtw::testing::probe::Site dtw_probe_site_{step};      \
    ::dtw::testing::probe::hit(dtw_probe_site_);                   \
  } while (0)
