#pragma once
// Which lab steps a chapter test runs the code of.
//
// Every GoogleTest suite of a chapter declares, next to its tests, the steps
// whose `@lab` regions its tests reach:
//
//   DTW_TEST_STEPS(AllreduceRingTest, "01.4", "01.5", "01.8");
//   TEST(AllreduceRingTest, MatchesReference) { ... }
//
// The last of those steps in the chapter text's order is the test's *own*
// step: `dtw check` counts the test there, and `dtw check NN NN.K` runs it.
// The chapter's solution test program checks each declaration against what
// the test really reaches (the solution is built with a probe at the start of
// every region): a test fails when it runs the code of a step its suite does
// not declare, or never reaches its own step. So declarations cannot drift
// from the code: a test's own step is always the last step whose code it runs,
// and a suite whose tests end in different steps must be split. (A test may
// stop before an earlier declared step, e.g. when bad input is caught early.)
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

namespace dtw::testing {

/// One DTW_TEST_STEPS line.
struct StepDeclaration {
  std::string suite;
  std::vector<std::string> steps;
  const char* file;
  int line;
};

/// Every DTW_TEST_STEPS of this program, in the order their files initialised.
inline std::vector<StepDeclaration>& step_declarations() {
  static std::vector<StepDeclaration> declarations;
  return declarations;
}

/// Records a declaration (what DTW_TEST_STEPS expands to); returns true.
inline bool declare_steps(const char* suite, std::initializer_list<const char*> steps,
                          const char* file, int line) {
  StepDeclaration d{suite, {}, file, line};
  for (const char* s : steps) d.steps.emplace_back(s);
  step_declarations().push_back(std::move(d));
  return true;
}

/// Set by the probe runtime (dtw_step_probe.cpp) when the program runs probed
/// solution code; empty otherwise.
struct ProbeHooks {
  void (*begin_test)() = nullptr;              ///< forget what was reached
  std::set<std::string> (*reached)() = nullptr;  ///< steps reached since begin_test
};
inline ProbeHooks& probe_hooks() {
  static ProbeHooks hooks;
  return hooks;
}

}  // namespace dtw::testing

/// Declares the lab steps (as strings, "01.4") whose code the tests of suite
/// `Suite` run; none for a suite that runs no lab code. At namespace scope, once
/// per suite.
#define DTW_TEST_STEPS(Suite, ...)                                    \
  [[maybe_unused]] static const bool dtw_test_steps_##Suite##_ =     \
      ::dtw::testing::declare_steps(#Suite, {__VA_ARGS__}, __FILE__, __LINE__)
