// `dtw check`'s own output, on a stand-in for chapter 04's lab test program
// (check_fixture.cpp) whose tests end as a scenario says: a message in UTF-8
// arrives byte for byte, a crashed test program still gets a result for every
// test of the step and says how to find the crash, a step names every
// unfinished step it waits on, and the next step shows every region's hint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "program.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Finished;

// `dtw check 04` on the fixture, its tests ending as `scenario` says.
Finished check(const std::string& scenario, bool verbose = false) {
  ::setenv("DTW_FIXTURE_SCENARIO", scenario.c_str(), 1);
  ::setenv("NO_COLOR", "1", 1);
  std::vector<std::string> args = {DTW_PROGRAM, "check", "04", "--program", DTW_CHECK_FIXTURE};
  if (verbose) args.push_back("--verbose");
  Finished out = testing::run_program(args);
  ::unsetenv("DTW_FIXTURE_SCENARIO");
  return out;
}

// The distinct short hints of step `step`'s regions in the solution of chapter 04.
std::set<std::string> short_hints(const std::string& step) {
  const std::regex marker("^[ \\t]*// @lab " + std::regex_replace(step, std::regex("\\."), "\\.") +
                          ":[ \\t]*(.*?)[ \\t]*$");
  std::set<std::string> hints;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(DTW_SOURCE_DIR) / "solutions/04-zero")) {
    std::ifstream in(e.path());
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_match(line, m, marker)) hints.insert(m[1]);
  }
  return hints;
}

int count_lines_starting(const std::string& text, const std::string& start) {
  int n = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, start.size(), start) == 0) ++n;
    at = end + 1;
  }
  return n;
}

TEST(CheckOutputTest, AMessageInUtf8ArrivesByteForByte) {
  // GoogleTest's JSON report escapes each byte above 0x7f on its own; read
  // naively, "×" (C3 97) came out as "Ã\u0097" (C3 83 C2 97).
  const Finished out = check("utf8");
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_THAT(out.output, HasSubstr("First failure: step 04.1, FixtureOneTest.Trains"));
  EXPECT_THAT(out.output,
              HasSubstr("\n  loss ×2.0000 the reference's: θ − θ_ref = 0.5 (μ, ½, →)\n"));
  EXPECT_THAT(out.output, Not(HasSubstr("\xc3\x83\xc2\x97"))) << "× encoded twice";
}

TEST(CheckOutputTest, ACrashedTestProgramStillCountsEveryTestOfTheStep) {
  const Finished out = check("crash");
  EXPECT_EQ(out.exit_code, 1) << out.output;
  // The tests after the crash run in a new program: five of six pass.
  EXPECT_TRUE(std::regex_search(out.output, std::regex("\n  04\\.4 +fail +5/6 tests pass\n")))
      << out.output;
  EXPECT_THAT(out.output, HasSubstr("First failure: step 04.4, FixtureFourTest.Second"));
  EXPECT_THAT(out.output, HasSubstr("\n  the test program crashed in this test: killed by signal "
                                    "11 (Segmentation fault)\n"))
      << out.output;
  // The README's sanitizer build, on this very test.
  EXPECT_THAT(out.output, HasSubstr("cmake --preset asan && cmake --build --preset asan --target "
                                    "ch04_lab_tests && build-asan/chapters/ch04_lab_tests "
                                    "--gtest_filter=FixtureFourTest.Second"))
      << out.output;
  EXPECT_THAT(out.output, Not(HasSubstr("stopped with killed")));
}

TEST(CheckOutputTest, VerboseNamesEveryFailingTestOfTheStep) {
  const Finished brief = check("two");
  EXPECT_EQ(brief.exit_code, 1) << brief.output;
  EXPECT_THAT(brief.output, HasSubstr("First failure: step 04.4, FixtureFourTest.Third"));
  EXPECT_THAT(brief.output, Not(HasSubstr("FixtureFourTest.Fifth"))) << brief.output;
  const Finished verbose = check("two", true);
  EXPECT_EQ(verbose.exit_code, 1) << verbose.output;
  EXPECT_THAT(verbose.output, HasSubstr("every failing test of step 04.4:\n"
                                        "    FixtureFourTest.Third\n"
                                        "    FixtureFourTest.Fifth\n"))
      << verbose.output;
}

TEST(CheckOutputTest, AStepNamesEveryUnfinishedStepItWaitsOn) {
  // Step 04.5's test stops at 04.1's DTW_TODO, the first it meets; it runs
  // 04.3's code too, which is unwritten as well.
  const Finished out = check("todo");
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_TRUE(std::regex_search(out.output, std::regex("\n  04\\.5 +waiting on 04\\.1, 04\\.3 ")))
      << out.output;
  EXPECT_THAT(out.output, HasSubstr("Next: step 04.1 ("));
}

TEST(CheckOutputTest, AStepWaitsOnTheUnfinishedStepsOfATestThatStoppedAtItsOwnCode) {
  // FixtureFiveCheckedTest stops at 04.5's own DTW_TODO before it runs 04.4's
  // code; 04.4 is unwritten all the same, so 04.5 waits on it as well as on
  // 04.3, where FixtureFiveTest stopped. Before, only the step a test stopped
  // at counted (chapter 05's 05.6 read "waiting on 05.3, 05.4" with 05.5
  // unwritten too). 04.4's own tests stop at its DTW_TODO, before 04.3's code.
  const Finished out = check("own");
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_TRUE(std::regex_search(out.output, std::regex("\n  04\\.5 +waiting on 04\\.3, 04\\.4 ")))
      << out.output;
  EXPECT_TRUE(std::regex_search(out.output, std::regex("\n  04\\.4 +waiting on 04\\.3 ")))
      << out.output;
  EXPECT_THAT(out.output, HasSubstr("Next: step 04.3 (not started)"));
}

TEST(CheckOutputTest, ADeadlockShowsTheFirstBlockedRankWhole) {
  // The report is six lines: the headline, the cycle, and two ranks of two
  // lines each. The short form named rank 0's receive without the operation
  // (tag and all) and ended on rank 1's operation without its rank line.
  const Finished out = check("deadlock");
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_THAT(out.output,
              HasSubstr("\n    cycle: rank 0 -> rank 1 -> rank 0\n"
                        "    rank   0  in recv, waiting 0.0 ms for:\n"
                        "                recv from rank 1, tag 4 (kLeftward), 8 B (1 float64)\n"
                        "  ... (2 more lines: --verbose shows them)\n"
                        "  while: neighbour exchange, p 2, n 1\n"))
      << out.output;
  EXPECT_THAT(out.output, Not(HasSubstr("tag 5 (kRightward)"))) << out.output;
  const Finished verbose = check("deadlock", true);
  EXPECT_THAT(verbose.output,
              HasSubstr("\n    rank   1  in recv, waiting 0.0 ms for:\n"
                        "                recv from rank 0, tag 5 (kRightward), 8 B (1 float64)\n"))
      << verbose.output;
}

// A rank outside the cycle may still be running when the report is made, or
// already blocked elsewhere: its state line must not decide the short form's
// length. Shown as the report's last one-line part, it made chapter 01's
// planted bug 01.4 #3 print 16 lines in one CI run and 15 in others.
TEST(CheckOutputTest, ADeadlockHidesTheStateOfARankOutsideTheCycle) {
  const Finished out = check("deadlock-running");
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_THAT(out.output, HasSubstr("\n  ... (3 more lines: --verbose shows them)\n"
                                    "  while: allgather recursive-doubling, p 3\n"))
      << out.output;
  EXPECT_THAT(out.output, Not(HasSubstr("rank   1  running"))) << out.output;
  EXPECT_THAT(check("deadlock-running", true).output, HasSubstr("rank   1  running"));
}

TEST(CheckOutputTest, TheNextStepShowsTheHintOfEveryRegion) {
  const std::set<std::string> hints = short_hints("04.4");
  ASSERT_GE(hints.size(), 3u) << "chapter 04's step 04.4 has three regions; this test wants a "
                                 "step with more than two";
  const Finished out = check("next");
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_THAT(out.output, HasSubstr("Next: step 04.4 ("));
  EXPECT_EQ(count_lines_starting(out.output, "  hint 04.4: "), static_cast<int>(hints.size()))
      << out.output;
  for (const std::string& h : hints) EXPECT_THAT(out.output, HasSubstr("  hint 04.4: " + h + "\n"));
}

}  // namespace
}  // namespace dtw
