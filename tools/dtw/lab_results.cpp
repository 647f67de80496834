#include "lab_results.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

namespace dtw::cli {
namespace {

// True when `bytes` is well-formed UTF-8 (no overlong forms, no surrogates).
bool valid_utf8(const std::string& bytes) {
  static constexpr std::uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
  for (std::size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    // The lead byte says how many continuation bytes follow.
    const std::size_t extra = b < 0x80 ? 0
                              : (b & 0xE0) == 0xC0 ? 1
                              : (b & 0xF0) == 0xE0 ? 2
                              : (b & 0xF8) == 0xF0 ? 3
                                                   : 4;
    if (extra == 4) return false;
    std::uint32_t code = b & (0x7F >> extra);
    if (i + extra >= bytes.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto c = static_cast<unsigned char>(bytes[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      code = (code << 6) | (c & 0x3F);
    }
    if (code < kLeast[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

}  // namespace

std::string undo_byte_escapes(const std::string& text) {
  // Code points U+0080..U+00FF are two bytes, C2 or C3 then a continuation
  // byte; anything above U+00FF cannot come from GoogleTest's byte escapes.
  std::string bytes;
  bool changed = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      bytes += text[i];
      continue;
    }
    if ((b != 0xC2 && b != 0xC3) || i + 1 == text.size()) return text;
    const auto c = static_cast<unsigned char>(text[i + 1]);
    if ((c & 0xC0) != 0x80) return text;
    bytes += static_cast<char>(((b & 0x03) << 6) | (c & 0x3F));
    changed = true;
    ++i;
  }
  return changed && valid_utf8(bytes) ? bytes : text;
}

const std::string& PlannedTest::own() const {
  static const std::string kNone;
  return steps.empty() ? kNone : steps.back();
}

nlohmann::json plan_to_json(const TestPlan& plan) {
  nlohmann::json tests = nlohmann::json::array();
  for (const PlannedTest& t : plan.tests) tests.push_back({{"name", t.name}, {"steps", t.steps}});
  return {{"steps", plan.steps}, {"problems", plan.problems}, {"tests", tests}};
}

TestPlan plan_from_json(const nlohmann::json& j) {
  TestPlan plan;
  plan.steps = j.at("steps").get<std::vector<std::string>>();
  plan.problems = j.at("problems").get<std::vector<std::string>>();
  for (const nlohmann::json& t : j.at("tests"))
    plan.tests.push_back(
        {t.at("name").get<std::string>(), t.at("steps").get<std::vector<std::string>>()});
  return plan;
}

TestPlan load_plan(const fs::path& program) {
  const ProcessResult listed = run_process({program.string(), "--dtw_list_steps"},
                                           {.output = Output::kCapture,
                                            .timeout = std::chrono::seconds(60)});
  if (!listed.ok())
    throw std::runtime_error(fmt::format("{} --dtw_list_steps stopped with {}:\n{}",
                                         program.string(), listed.describe(), listed.output));
  try {
    return plan_from_json(nlohmann::json::parse(listed.output));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{} --dtw_list_steps did not print the step list ({})",
                                         program.string(), e.what()));
  }
}

nlohmann::json result_to_json(const TestResult& r) {
  return {{"name", r.name}, {"passed", r.passed}, {"skipped", r.skipped}, {"failures", r.failures}};
}

TestResult result_from_json(const nlohmann::json& j) {
  return {j.at("name").get<std::string>(), j.at("passed").get<bool>(), j.at("skipped").get<bool>(),
          j.at("failures").get<std::vector<std::string>>()};
}

TestRun run_test_program(const fs::path& program, const std::vector<std::string>& names,
                         std::chrono::seconds timeout) {
  const fs::path report = fs::temp_directory_path() /
                          fmt::format("dtw-{}-{}.json", program.filename().string(), getpid());
  fs::remove(report);
  std::vector<std::string> argv{program.string(), "--gtest_output=json:" + report.string()};
  if (!names.empty()) argv.push_back("--gtest_filter=" + fmt::format("{}", fmt::join(names, ":")));
  TestRun run;
  run.process = run_process(argv, {.output = Output::kCapture, .timeout = timeout});
  std::ifstream in(report);
  if (!in) return run;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const nlohmann::json& suite : j.at("testsuites")) {
      for (const nlohmann::json& test : suite.at("testsuite")) {
        TestResult t;
        t.name = suite.at("name").get<std::string>() + "." + test.at("name").get<std::string>();
        t.skipped = test.value("result", "") == "SKIPPED";
        if (test.contains("failures"))
          for (const nlohmann::json& f : test.at("failures"))
            t.failures.push_back(undo_byte_escapes(f.value("failure", "")));
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

std::vector<StepStatus> classify_steps(const TestPlan& plan,
                                       const std::map<std::string, TestResult>& results,
                                       const std::map<std::string, StepProgress>& progress) {
  const auto order = [&](const std::string& step) {
    const auto it = std::ranges::find(plan.steps, step);
    return it == plan.steps.end() ? -1 : static_cast<int>(it - plan.steps.begin());
  };
  std::vector<StepStatus> out;
  // A step before `step` that is not done: one whose code a test of `step`
  // runs and that is known to fail or to be unwritten (or not checked yet
  // while the lab still has its DTW_TODO).
  const auto unfinished = [&](const std::string& earlier) {
    const auto it = std::ranges::find(out, earlier, &StepStatus::step);
    if (it == out.end()) return false;
    switch (it->state) {
      case StepState::kFail:
      case StepState::kNotStarted:
      case StepState::kInProgress:
      case StepState::kWaiting: return true;
      case StepState::kUnchecked: return it->progress.todo > 0;
      default: return false;
    }
  };
  for (const std::string& step : plan.steps) {
    StepStatus status;
    status.step = step;
    if (const auto p = progress.find(step); p != progress.end()) status.progress = p->second;
    bool own_todo = false, missing = false;
    std::set<std::string> waiting;
    for (const PlannedTest& planned : plan.tests) {
      if (planned.own() != step) continue;
      ++status.tests;
      const auto it = results.find(planned.name);
      if (it == results.end()) {
        missing = true;
        continue;
      }
      const TestResult& t = it->second;
      ++status.run;
      if (t.passed || t.skipped) {
        ++status.passed;
        continue;
      }
      bool stopped = false;  // at a DTW_TODO, its own step's or another's
      for (const std::string& f : t.failures) {
        const std::optional<std::string> todo = not_implemented_step(f);
        if (todo && *todo == step) {
          own_todo = stopped = true;
        } else if (todo) {
          // The test stopped at the first unwritten step it met: it waits on that one.
          waiting.insert(*todo);
          stopped = true;
        } else if (status.failing.empty() || status.failing.back() != t.name) {
          // A real failure; a test is listed once however many checks failed.
          if (status.failing.empty()) status.first_failure = &t;
          status.failing.push_back(t.name);
        }
      }
      // A test that stopped at a DTW_TODO never reached the code after it, so
      // which unwritten steps it met says little (chapter 05's pipelines stop
      // at 05.6's schedule check before their 05.3 to 05.5 code runs). It
      // waits on every unfinished step it declares, reached or not.
      if (stopped)
        for (const std::string& s : planned.steps)
          if (s != step && unfinished(s)) waiting.insert(s);
    }
    for (const std::string& s : waiting) status.waiting_on.push_back(s);
    std::ranges::sort(status.waiting_on, {}, order);
    if (status.tests == 0) {
      status.state = StepState::kNoTests;
    } else if (!status.failing.empty()) {
      status.state = StepState::kFail;
    } else if (!status.waiting_on.empty()) {
      status.state = StepState::kWaiting;
    } else if (own_todo) {
      const StepProgress& p = status.progress;
      status.state = p.todo < p.regions ? StepState::kInProgress : StepState::kNotStarted;
    } else if (missing) {
      status.state = StepState::kUnchecked;
    } else {
      status.state = StepState::kPass;
    }
    out.push_back(std::move(status));
  }
  return out;
}

std::string state_label(const StepStatus& status) {
  switch (status.state) {
    case StepState::kPass: return "pass";
    case StepState::kFail: return "fail";
    case StepState::kNotStarted: return "not started";
    case StepState::kInProgress:
      return fmt::format("in progress ({} of {} parts)", status.progress.regions - status.progress.todo,
                         status.progress.regions);
    case StepState::kWaiting: return fmt::format("waiting on {}", fmt::join(status.waiting_on, ", "));
    case StepState::kUnchecked: return "not checked";
    case StepState::kNoTests: return "no tests";
  }
  return "?";
}

}  // namespace dtw::cli
