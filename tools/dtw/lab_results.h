#pragma once
// Runs a chapter's test program and turns its GoogleTest JSON report into one
// status per step: pass, fail, not started, in progress, or waiting on an
// earlier step. Which tests belong to which step comes from the program itself
// (`--dtw_list_steps`, from the DTW_TEST_STEPS declarations of the tests).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hints.h"
#include "manifest.h"
#include "process.h"

namespace dtw::cli {

/// One test as the program lists it.
struct PlannedTest {
  std::string name;                // "Suite.Test"
  std::vector<std::string> steps;  // steps whose code it runs, in the text's order
  /// The test's own step, the last of `steps` ("" for a test that runs no lab code).
  const std::string& own() const;
};

/// Every test of a chapter's test program, with its steps.
struct TestPlan {
  std::vector<std::string> steps;     // the chapter's steps, in the text's order
  std::vector<std::string> problems;  // what is wrong with the declarations
  std::vector<PlannedTest> tests;     // in the program's order
};

/// Asks `program --dtw_list_steps`; throws std::runtime_error if it cannot.
TestPlan load_plan(const fs::path& program);
nlohmann::json plan_to_json(const TestPlan& plan);
TestPlan plan_from_json(const nlohmann::json& j);

struct TestResult {
  std::string name;  // "Suite.Test"
  bool passed = false;
  bool skipped = false;
  std::vector<std::string> failures;  // GoogleTest's failure texts ("file:line\nmessage")
};
nlohmann::json result_to_json(const TestResult& result);
TestResult result_from_json(const nlohmann::json& j);

/// What one run of a test program gave.
struct TestRun {
  ProcessResult process;
  std::vector<TestResult> tests;
  bool reported = false;  // the JSON report was written (the program did not crash)
};

/// Runs `program` on the tests named in `names` (all when empty) with
/// --gtest_output=json, output captured.
TestRun run_test_program(const fs::path& program, const std::vector<std::string>& names,
                         std::chrono::seconds timeout = std::chrono::seconds(600));

/// GoogleTest's JSON report writes each byte of a non-ASCII message as a
/// character of its own ("×", bytes C3 97, becomes "\u00C3\u0097"), so the
/// parsed text is the message's UTF-8 encoded twice. This returns the original
/// bytes when `text` is such a double encoding of valid UTF-8, else `text`.
std::string undo_byte_escapes(const std::string& text);

/// The step a failure text reports as not written yet: "00.1" for a DTW_TODO's
/// NotImplemented ("...exception with description \"rank 0: 00.1: ...\""),
/// nothing for any other failure.
std::optional<std::string> not_implemented_step(const std::string& failure);

enum class StepState { kPass, kFail, kNotStarted, kInProgress, kWaiting, kUnchecked, kNoTests };

struct StepStatus {
  std::string step;
  StepState state = StepState::kNoTests;
  int tests = 0, passed = 0, run = 0;         // own tests; passed; with a result
  const TestResult* first_failure = nullptr;  // for kFail: its first test with a real failure
  std::vector<std::string> failing;           // every own test with a real failure, in order
  std::vector<std::string> waiting_on;        // for kWaiting: every unfinished step it needs
  StepProgress progress;
};

/// One status per step of `plan`, in the text's order, from the results known.
std::vector<StepStatus> classify_steps(const TestPlan& plan,
                                       const std::map<std::string, TestResult>& results,
                                       const std::map<std::string, StepProgress>& progress);

/// "pass", "fail", "not started", "in progress (1 of 2)", "waiting on 00.1, 00.3",
/// "not checked", "no tests".
std::string state_label(const StepStatus& status);

}  // namespace dtw::cli
