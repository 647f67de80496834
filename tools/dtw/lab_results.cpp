#include "lab_results.h"

#include <fmt/core.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

namespace dtw::cli {

TestRun run_test_program(const fs::path& program,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         std::chrono::seconds timeout) {
  const fs::path report = fs::temp_directory_path() /
                          fmt::format("dtw-{}-{}.json", program.filename().string(), getpid());
  fs::remove(report);
  TestRun run;
  run.process = run_process({program.string(), "--gtest_output=json:" + report.string()},
                            {.output = Output::kCapture, .env = env, .timeout = timeout});
  std::ifstream in(report);
  if (!in) return run;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const nlohmann::json& suite : j.at("testsuites")) {
      for (const nlohmann::json& test : suite.at("testsuite")) {
        TestResult t;
        t.suite = suite.at("name").get<std::string>();
        t.name = test.at("name").get<std::string>();
        t.skipped = test.value("result", "") == "SKIPPED";
        if (test.contains("failures"))
          for (const nlohmann::json& f : test.at("failures"))
            t.failures.push_back(f.value("failure", ""));
        t.passed = t.failures.empty();
        run.tests.push_back(std::move(t));
      }
    }
    run.reported = true;
  } catch (const nlohmann::json::exception&) {
    run.reported = false;  // a half-written report: treat as a crash
  }
  in.close();
  fs::remove(report);
  return run;
}

std::optional<std::string> not_implemented_step(const std::string& failure) {
  // GoogleTest prints an escaping exception as
  //   C++ exception with description "rank 0: 00.1: hint [labs/...]" thrown in the test body.
  // and EXPECT_THROW/EXPECT_NO_THROW as "... throws dtw::NotImplemented with description "...".
  // A DTW_TODO message always starts with its step, so a step right after the
  // opening quote (and an optional "rank R: ") identifies it.
  static const std::regex kDescribed(
      R"((?:NotImplemented|exception)[^"\n]*"(?:rank \d+: )?(\d\d\.\d+): )");
  static const std::regex kNamed(R"(NotImplemented\W+(?:rank \d+: )?(\d\d\.\d+): )");
  std::smatch m;
  if (std::regex_search(failure, m, kDescribed) || std::regex_search(failure, m, kNamed))
    return m[1].str();
  return std::nullopt;
}

std::vector<StepStatus> classify_steps(const Chapter& chapter, const TestRun& run) {
  std::vector<StepStatus> out;
  for (const Step& step : chapter.steps) {
    StepStatus status;
    status.step = &step;
    bool any_real_failure = false;
    bool all_own_todo = true;  // every failure is this step's NotImplemented
    std::string other_step;
    for (const TestResult& t : run.tests) {
      bool mine = false;
      for (const std::string& suite : step.suites) mine = mine || suite_matches(t.suite, suite);
      if (!mine || t.skipped) continue;
      ++status.tests;
      if (t.passed) {
        ++status.passed;
        continue;
      }
      for (const std::string& f : t.failures) {
        const std::optional<std::string> todo = not_implemented_step(f);
        if (todo && *todo == step.id) continue;
        all_own_todo = false;
        if (todo) {
          if (other_step.empty()) other_step = *todo;
        } else if (!any_real_failure) {
          any_real_failure = true;
          status.first_failure = &t;
        }
      }
    }
    if (status.tests == 0) {
      status.state = StepState::kNoTests;
    } else if (status.passed == status.tests) {
      status.state = StepState::kPass;
    } else if (any_real_failure) {
      status.state = StepState::kFail;
    } else if (all_own_todo) {
      status.state = StepState::kNotStarted;
    } else {
      status.state = StepState::kWaiting;
      status.waiting_on = other_step;
    }
    out.push_back(status);
  }
  return out;
}

std::string state_label(const StepStatus& status) {
  switch (status.state) {
    case StepState::kPass: return "pass";
    case StepState::kFail: return "fail";
    case StepState::kNotStarted: return "not started";
    case StepState::kWaiting: return "waiting on " + status.waiting_on;
    case StepState::kNoTests: return "no tests";
  }
  return "?";
}

}  // namespace dtw::cli
