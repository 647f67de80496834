#pragma once
// Runs a chapter's lab test program and turns its GoogleTest JSON report into
// one status per step: pass, fail, not started, or waiting on another step.
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "manifest.h"
#include "process.h"

namespace dtw::cli {

struct TestResult {
  std::string suite;
  std::string name;
  bool passed = false;
  bool skipped = false;
  std::vector<std::string> failures;  // GoogleTest's failure texts ("file:line\nmessage")

  std::string full_name() const { return suite + "." + name; }
};

/// What one run of a test program gave.
struct TestRun {
  ProcessResult process;
  std::vector<TestResult> tests;
  bool reported = false;  // the JSON report was written (the program did not crash)
};

/// Runs `program` with --gtest_output=json, output captured; `env` is added.
TestRun run_test_program(const fs::path& program,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         std::chrono::seconds timeout = std::chrono::seconds(300));

/// The step a failure text reports as not written yet: "00.1" for a DTW_TODO's
/// NotImplemented ("...exception with description \"rank 0: 00.1: ...\""),
/// nothing for any other failure.
std::optional<std::string> not_implemented_step(const std::string& failure);

enum class StepState { kPass, kFail, kNotStarted, kWaiting, kNoTests };

struct StepStatus {
  const Step* step = nullptr;
  StepState state = StepState::kNoTests;
  int tests = 0, passed = 0;
  const TestResult* first_failure = nullptr;  // for kFail: the first real failure
  std::string waiting_on;                     // for kWaiting: the unwritten step it needs
};

/// One status per step of `chapter`, in the manifest's order.
std::vector<StepStatus> classify_steps(const Chapter& chapter, const TestRun& run);

/// "pass", "fail", "not started", "waiting on 00.1", "no tests".
std::string state_label(const StepStatus& status);

}  // namespace dtw::cli
