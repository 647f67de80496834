// A stand-in for chapter 04's lab test program, for the tests of `dtw check`'s
// own output (check_output_test.cpp runs `dtw check 04 --program` on it). It
// declares its suites for chapter 04's steps like a chapter's tests do, and
// the environment variable DTW_FIXTURE_SCENARIO says how its tests end:
//
//   utf8    step 04.1 fails with a message in UTF-8 (×, θ, −); the rest pass
//   crash   one test of step 04.4's six dies of SIGSEGV; the rest pass
//   todo    steps 04.1, 04.3 and 04.4 are unwritten (a DTW_TODO's message);
//           step 04.5's tests run 04.1's code first
//   next    steps 04.1 to 04.3 pass; 04.4 and 04.5 are unwritten
//   two     two of step 04.4's six tests fail (the third and the fifth)
//   own     steps 04.1 and 04.2 pass; 04.3 to 04.5 are unwritten, and the
//           tests of 04.4 and of FixtureFiveCheckedTest stop at their own
//           step's DTW_TODO first (as chapter 05's pipelines stop at 05.6's
//           schedule check) before the code of the earlier steps they declare
//   deadlock  step 04.1's test fails with the threads backend's deadlock
//           report of two ranks, each blocked in a receive from the other
//   deadlock-running  the same of three ranks: 0 and 2 in the cycle, rank 1
//           still running (its state is the report's last line)
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "dtw_test_steps.h"

// What a chapter program's generated file says (cmake/DtwChapter.cmake):
// chapter 04's steps, a lab program (no probes).
namespace dtw::testing {
extern const char* const kChapterSteps;
extern const bool kExpectProbes;
const char* const kChapterSteps = "04.1 04.2 04.3 04.4 04.5";
const bool kExpectProbes = false;
}  // namespace dtw::testing

namespace {

std::string scenario() {
  const char* s = std::getenv("DTW_FIXTURE_SCENARIO");
  return s == nullptr ? "" : s;
}

// What DTW_TODO("NN.K: ...") makes GoogleTest report: an escaping exception
// whose message starts with the step.
void unwritten(const char* step) {
  throw std::runtime_error(std::string(step) + ": written by the learner (a DTW_TODO)");
}

DTW_TEST_STEPS(FixtureOneTest, "04.1");
TEST(FixtureOneTest, Trains) {
  if (scenario() == "deadlock")
    throw std::runtime_error(
        "rank 0: deadlock: every live rank is blocked and none can make progress (world of 2, "
        "threads backend)\n"
        "  cycle: rank 0 -> rank 1 -> rank 0\n"
        "  rank   0  in recv, waiting 0.0 ms for:\n"
        "              recv from rank 1, tag 4 (kLeftward), 8 B (1 float64)\n"
        "  rank   1  in recv, waiting 0.0 ms for:\n"
        "              recv from rank 0, tag 5 (kRightward), 8 B (1 float64)\n"
        "  while: neighbour exchange, p 2, n 1");
  if (scenario() == "deadlock-running")
    throw std::runtime_error(
        "rank 1: deadlock: a cycle of blocking calls has closed (world of 3, threads backend)\n"
        "  cycle: rank 0 -> rank 2 -> rank 0\n"
        "  rank   0  in sendrecv, waiting 0.0 ms for:\n"
        "              sendrecv from rank 2, collective operation 0, 0 B (0 float32)\n"
        "              sendrecv to rank 2, collective operation 0, 0 B (0 float32)\n"
        "  rank   2  in sendrecv, waiting 0.0 ms for:\n"
        "              sendrecv from rank 0, collective operation 0, 0 B (0 float32)\n"
        "  rank   1  running\n"
        "  while: allgather recursive-doubling, p 3");
  if (scenario() == "utf8")
    ADD_FAILURE() << "loss ×2.0000 the reference's: θ − θ_ref = 0.5 (μ, ½, →)";
  if (scenario() == "todo") unwritten("04.1");
}

DTW_TEST_STEPS(FixtureTwoTest, "04.1", "04.2");
TEST(FixtureTwoTest, Trains) {}

DTW_TEST_STEPS(FixtureThreeTest, "04.2", "04.3");
TEST(FixtureThreeTest, Trains) {
  if (scenario() == "todo" || scenario() == "own") unwritten("04.3");
}

// Six tests, as step 04.4 of chapter 04 has; the second one crashes.
DTW_TEST_STEPS(FixtureFourTest, "04.3", "04.4");
void four(bool crashes) {
  if (scenario() == "todo" || scenario() == "next" || scenario() == "own") unwritten("04.4");
  if (crashes && scenario() == "crash") {
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  }
}
TEST(FixtureFourTest, First) { four(false); }
TEST(FixtureFourTest, Second) { four(true); }
TEST(FixtureFourTest, Third) {
  four(false);
  if (scenario() == "two") ADD_FAILURE() << "the third is wrong";
}
TEST(FixtureFourTest, Fourth) { four(false); }
TEST(FixtureFourTest, Fifth) {
  four(false);
  if (scenario() == "two") ADD_FAILURE() << "the fifth is wrong";
}
TEST(FixtureFourTest, Sixth) { four(false); }

DTW_TEST_STEPS(FixtureFiveTest, "04.1", "04.3", "04.5");
TEST(FixtureFiveTest, Resumes) {
  if (scenario() == "todo") unwritten("04.1");  // the first unwritten step it meets
  if (scenario() == "next") unwritten("04.5");
  if (scenario() == "own") unwritten("04.3");
}

// Runs 04.4's code too, after a check of 04.5's own that comes first.
DTW_TEST_STEPS(FixtureFiveCheckedTest, "04.2", "04.4", "04.5");
TEST(FixtureFiveCheckedTest, Resumes) {
  if (scenario() == "own") unwritten("04.5");
}

}  // namespace
