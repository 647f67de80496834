// main() of every chapter test program (lab, solution, planted bug):
// GoogleTest, plus what `dtw check` and the step check need.
//
//   PROGRAM --dtw_list_steps   prints the chapter's steps (in the text's order)
//                              and every test with its steps as JSON, and exits
//   DTW_SHOW_STEPS=1 chNN_solution_tests   prints the steps each test reaches
//                              (for writing DTW_TEST_STEPS)
//
// Two tests are added to every program: DtwChapterTest.StepsAreDeclared (each
// suite has a valid DTW_TEST_STEPS) and DtwChapterTest.EveryStepHasItsOwnTests.
// In the solution program (kExpectProbes) the steps whose code a test runs
// must also be covered by its suite's declaration, and include the test's own
// step (see dtw_test_steps.h).
//
// This file is compiled once for every chapter: what differs between programs
// (the chapter's steps, whether probes are expected) comes from two constants
// that a small generated file of each program defines (cmake/DtwChapter.cmake),
// so the heavy GoogleTest headers are not compiled again for every program.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dtw_test_steps.h"

namespace dtw::testing {
// The chapter's steps, "01.1 01.2 ...", in the text's order.
extern const char* const kChapterSteps;
// True in a solution program, whose probed solution reports the steps it runs.
extern const bool kExpectProbes;
}  // namespace dtw::testing

namespace {

using dtw::testing::StepDeclaration;

constexpr const char* kOwnSuite = "DtwChapterTest";

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The name DTW_TEST_STEPS uses for a gtest suite: "Sizes/FooTest" (value-
// parameterised) and "FooTest/0" (typed) are both "FooTest".
std::string base_suite(const std::string& suite) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t slash; (slash = suite.find('/', start)) != std::string::npos; start = slash + 1)
    parts.push_back(suite.substr(start, slash - start));
  parts.push_back(suite.substr(start));
  if (parts.size() >= 3) return parts[1];
  if (parts.size() == 2)
    return std::all_of(parts[1].begin(), parts[1].end(), [](char c) { return c >= '0' && c <= '9'; })
               ? parts[0]
               : parts[1];
  return suite;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The chapter's steps, the declarations, and what is wrong with them.
struct Manifest {
  std::vector<std::string> steps = split_words(dtw::testing::kChapterSteps);
  std::map<std::string, std::vector<std::string>> suite_steps;  // base suite -> steps
  std::vector<std::string> problems;

  int order(const std::string& step) const {
    const auto it = std::find(steps.begin(), steps.end(), step);
    return it == steps.end() ? -1 : static_cast<int>(it - steps.begin());
  }

  void load() {
    suite_steps[kOwnSuite] = {};
    for (const StepDeclaration& d : dtw::testing::step_declarations()) {
      const std::string where = std::string(d.file) + ":" + std::to_string(d.line);
      std::vector<std::string> sorted;
      for (const std::string& s : d.steps) {
        if (order(s) < 0) {
          problems.push_back(where + ": DTW_TEST_STEPS(" + d.suite + ", ...) names step '" + s +
                             "', which is not a step of this chapter (" + join(steps, " ") + ")");
          continue;
        }
        if (std::find(sorted.begin(), sorted.end(), s) == sorted.end()) sorted.push_back(s);
      }
      std::sort(sorted.begin(), sorted.end(),
                [&](const std::string& a, const std::string& b) { return order(a) < order(b); });
      const auto [it, inserted] = suite_steps.try_emplace(d.suite, sorted);
      if (!inserted && it->second != sorted)
        problems.push_back(where + ": suite " + d.suite +
                           " declares its steps twice, differently (one DTW_TEST_STEPS per suite)");
    }
    const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
    std::set<std::string> suites;
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
      const std::string suite = base_suite(unit.GetTestSuite(i)->name());
      suites.insert(suite);
      if (!suite_steps.count(suite))
        problems.push_back("suite " + suite +
                           " declares no steps: add DTW_TEST_STEPS(" + suite +
                           ", \"NN.K\", ...) beside its tests, naming every step whose lab code "
                           "they run (none for a suite that runs no lab code)");
    }
    for (const auto& [suite, unused] : suite_steps)
      if (suite != kOwnSuite && !suites.count(suite))
        problems.push_back("DTW_TEST_STEPS names suite " + suite + ", which has no tests");
  }

  // The step a test counts for: the last of its suite's steps in the text's order.
  std::string own_step(const std::string& suite) const {
    const auto it = suite_steps.find(base_suite(suite));
    return it == suite_steps.end() || it->second.empty() ? "" : it->second.back();
  }
};

Manifest& manifest() {
  static Manifest m;
  return m;
}

void list_steps() {
  const Manifest& m = manifest();
  std::string out = "{\n  \"steps\": [";
  for (std::size_t i = 0; i < m.steps.size(); ++i) out += (i ? ", " : "") + json_string(m.steps[i]);
  out += "],\n  \"problems\": [";
  for (std::size_t i = 0; i < m.problems.size(); ++i)
    out += (i ? ",\n    " : "\n    ") + json_string(m.problems[i]);
  out += "],\n  \"tests\": [";
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  bool first = true;
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    const auto it = m.suite_steps.find(base_suite(suite.name()));
    std::string steps;
    if (it != m.suite_steps.end())
      for (const std::string& s : it->second) steps += (steps.empty() ? "" : ", ") + json_string(s);
    for (int j = 0; j < suite.total_test_count(); ++j) {
      out += (first ? "\n    " : ",\n    ");
      first = false;
      out += "{\"name\": " + json_string(std::string(suite.name()) + "." +
                                         suite.GetTestInfo(j)->name()) +
             ", \"steps\": [" + steps + "]}";
    }
  }
  out += "\n  ]\n}\n";
  std::fputs(out.c_str(), stdout);
}

// After each test of the solution program: the steps reached must be the ones declared.
class StepCheck : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override {
    dtw::testing::probe_hooks().begin_test();
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const std::string suite = base_suite(info.test_suite_name());
    const auto it = manifest().suite_steps.find(suite);
    if (suite == kOwnSuite || info.result()->Skipped() || it == manifest().suite_steps.end())
      return;
    const std::set<std::string> reached = dtw::testing::probe_hooks().reached();
    // For a chapter's author writing DTW_TEST_STEPS: what each test reaches.
    if (std::getenv("DTW_SHOW_STEPS"))
      std::printf("[ steps    ] %s.%s reaches {%s}\n", info.test_suite_name(), info.name(),
                  join({reached.begin(), reached.end()}, ", ").c_str());
    const std::set<std::string> declared(it->second.begin(), it->second.end());
    std::vector<std::string> missing;
    for (const std::string& s : reached)
      if (!declared.count(s)) missing.push_back(s);
    const std::string own = it->second.empty() ? "" : it->second.back();
    std::string why;
    if (!missing.empty())
      why += " it runs the code of step(s) " + join(missing, ", ") + ", which the suite does not declare;";
    if (!own.empty() && !reached.count(own))
      why += " it never reaches its own step " + own + " (the suite's last), so it does not test it;";
    if (own.empty() && !reached.empty()) why += " the suite declares no steps;";
    if (why.empty()) return;
    ADD_FAILURE() << "DTW_TEST_STEPS(" << suite << ", ...) does not fit what "
                  << info.test_suite_name() << "." << info.name() << " runs:" << why
                  << " it reaches {" << join({reached.begin(), reached.end()}, ", ")
                  << "}. A suite declares every step its tests reach, and each test must reach "
                     "the last of them; move a test that reaches other steps to a suite of its own.";
  }
};

class StepsAreDeclared : public ::testing::Test {
  void TestBody() override {
    for (const std::string& p : manifest().problems) ADD_FAILURE() << p;
    if (dtw::testing::kExpectProbes && !dtw::testing::probe_hooks().begin_test)
      ADD_FAILURE() << "this solution test program runs no probed solution code, so "
                       "DTW_TEST_STEPS cannot be checked (cmake/DtwChapter.cmake links the "
                       "probed solution; does the chapter have any // @lab region?)";
  }
};

class EveryStepHasItsOwnTests : public ::testing::Test {
  void TestBody() override {
    const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
    std::map<std::string, int> own;
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
      const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
      own[manifest().own_step(suite.name())] += suite.total_test_count();
    }
    for (const std::string& step : manifest().steps)
      EXPECT_GT(own[step], 0) << "step " << step
                              << " has no tests of its own: no suite's last declared step is "
                              << step << ", so `dtw check` could never say it passes";
  }
};

}  // namespace

int main(int argc, char** argv) {
  // A sweep frees and allocates buffers of megabytes thousands of times. By
  // default glibc returns them to the kernel (munmap, or madvise when a rank
  // thread's arena shrinks), so each new one is page-faulted in again: that
  // was most of the system time of a chapter's tests (0.86 M faults for two
  // sweeps). Keeping freed memory in the process cuts it to a fifteenth.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest allowed value
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  bool list = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dtw_list_steps") == 0) {
      list = true;
      continue;
    }
    args.push_back(argv[i]);
  }
  int count = static_cast<int>(args.size());
  args.push_back(nullptr);
  ::testing::InitGoogleTest(&count, args.data());
  ::testing::RegisterTest(kOwnSuite, "StepsAreDeclared", nullptr, nullptr, __FILE__, __LINE__,
                          []() -> ::testing::Test* { return new StepsAreDeclared; });
  ::testing::RegisterTest(kOwnSuite, "EveryStepHasItsOwnTests", nullptr, nullptr, __FILE__,
                          __LINE__, []() -> ::testing::Test* { return new EveryStepHasItsOwnTests; });
  manifest().load();
  if (list) {
    list_steps();
    return 0;
  }
  if (dtw::testing::kExpectProbes && dtw::testing::probe_hooks().begin_test)
    ::testing::UnitTest::GetInstance()->listeners().Append(new StepCheck);
  return RUN_ALL_TESTS();
}
