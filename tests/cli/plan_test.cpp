// `dtw plan`: chapter 08's planner on the command line. The table lists the
// layouts best first and names the proposal; a memory cap drops rows and the
// footer counts them; a cap nothing fits exits 1 naming the smallest need;
// bad values exit 2 naming them, before any prediction; --json holds the
// same rows. Predictions only: every case runs in well under a second.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "program.h"

namespace dtw {
namespace {

using testing::Finished;
using ::testing::HasSubstr;
using ::testing::Not;

Finished plan(std::vector<std::string> args) {
  args.insert(args.begin(), "plan");
  return testing::run_dtw(std::move(args));
}

// gpt-tiny on one NVLink node: every case below plans this run.
const std::vector<std::string> kTiny{"--model", "gpt-tiny", "--ranks", "8", "--fabric", "nvlink-8"};

std::vector<std::string> tiny_with(std::vector<std::string> more) {
  std::vector<std::string> args = kTiny;
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The table's rows: lines that start with the row number.
struct Row {
  int number = 0;
  double step_us = 0;
};
std::vector<Row> rows_of(const std::string& output) {
  // "  1    2   4   1   2    yes    33.3 us ..." : number, pp dp tp m, ZeRO-1, step.
  static const std::regex kRow(
      R"(^\s*(\d+)\s+\d+\s+\d+\s+\d+\s+\d+\s+(yes|no)\s+([0-9.]+) (us|ms|s)\b)");
  std::vector<Row> rows;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, kRow)) continue;
    const double scale = m[4] == "us" ? 1 : m[4] == "ms" ? 1e3 : 1e6;
    rows.push_back({std::stoi(m[1]), std::stod(m[3]) * scale});
  }
  return rows;
}

// "14 valid layouts, 6 dropped by the memory cap": the two counts.
std::pair<int, int> footer_counts(const std::string& output) {
  std::smatch m;
  static const std::regex kFooter(R"((\d+) valid layouts?, (\d+) dropped by the memory cap)");
  if (!std::regex_search(output, m, kFooter)) return {-1, -1};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

TEST(DtwPlanTest, ListsTheLayoutsBestFirstAndNamesTheProposal) {
  const Finished run = plan(kTiny);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("planning gpt-tiny on 8 ranks of nvlink-8"));
  EXPECT_THAT(run.output, HasSubstr("batch 8 x 32 tokens, float32, no memory cap"));
  const std::vector<Row> rows = rows_of(run.output);
  ASSERT_GE(rows.size(), 2u) << run.output;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].number, static_cast<int>(i + 1)) << run.output;
    if (i > 0) {
      EXPECT_LE(rows[i - 1].step_us, rows[i].step_us) << "row " << i + 1 << ":\n" << run.output;
    }
  }
  const auto [valid, dropped] = footer_counts(run.output);
  EXPECT_EQ(valid, static_cast<int>(rows.size())) << run.output;
  EXPECT_EQ(dropped, 0) << run.output;
  // The proposal is row 1's layout, in Layout::describe's words.
  EXPECT_THAT(run.output, HasSubstr("the planner proposes pp "));
  EXPECT_THAT(run.output, HasSubstr("(row 1: "));
}

TEST(DtwPlanTest, AMemoryCapDropsLayoutsAndTheFooterCountsThem) {
  const Finished all = plan(kTiny);
  const Finished capped = plan(tiny_with({"--memory-cap", "1M"}));
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_THAT(capped.output, HasSubstr("memory cap 1.0 MiB per rank"));
  const std::size_t before = rows_of(all.output).size(), after = rows_of(capped.output).size();
  EXPECT_LT(after, before) << capped.output;
  EXPECT_GE(after, 1u) << capped.output;
  const auto [valid, dropped] = footer_counts(capped.output);
  EXPECT_EQ(valid, static_cast<int>(before)) << capped.output;
  EXPECT_EQ(dropped, static_cast<int>(before - after)) << capped.output;
}

TEST(DtwPlanTest, ACapNothingFitsExitsOneNamingTheSmallestNeed) {
  const Finished run = plan(tiny_with({"--memory-cap", "1K"}));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr("no layout fits the memory cap of 1.0 KiB per rank"));
  EXPECT_THAT(run.output, HasSubstr("the smallest need is "));
  EXPECT_THAT(run.output, HasSubstr("KiB per rank (pp "));
  EXPECT_TRUE(rows_of(run.output).empty()) << run.output;
}

TEST(DtwPlanTest, BadValuesExitTwoNamingThem) {
  const Finished fabric = plan({"--model", "gpt-tiny", "--ranks", "8", "--fabric", "nvlink-9"});
  EXPECT_EQ(fabric.exit_code, 2) << fabric.output;
  EXPECT_THAT(fabric.output, HasSubstr("--fabric: unknown name nvlink-9"));
  for (const char* known : {"pcie-8", "nvlink-8", "ib-2x8", "ib-4x8", "ideal-8"})
    EXPECT_THAT(fabric.output, HasSubstr(known)) << fabric.output;

  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--model", "gpt-huge", "--ranks", "8", "--fabric", "nvlink-8"},
       "--model: unknown name gpt-huge"},
      {{"--model", "gpt-tiny", "--ranks", "0", "--fabric", "nvlink-8"},
       "--ranks must be between 1"},
      {tiny_with({"--memory-cap", "64Q"}), "--memory-cap takes a size in bytes"},
      {tiny_with({"--memory-cap", "-1M"}), "--memory-cap must be at least 0, got -1M"},
      {tiny_with({"--micro-batches", "2,0"}), "--micro-batches must be between 1"},
  };
  for (const Case& c : cases) {
    const Finished run = plan(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.says << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr(c.says));
    EXPECT_THAT(run.output, Not(HasSubstr("planning"))) << "it planned: " << run.output;
  }
}

TEST(DtwPlanTest, JsonHoldsOneEntryPerRow) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("dtw-plan-" + std::to_string(getpid()) + ".json");
  const Finished run = plan(tiny_with({"--memory-cap", "1M", "--json", path.string()}));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream file(path);
  ASSERT_TRUE(file) << path;
  const nlohmann::json parsed = nlohmann::json::parse(file);
  std::filesystem::remove(path);
  const std::vector<Row> rows = rows_of(run.output);
  ASSERT_EQ(parsed.at("rows").size(), rows.size()) << run.output;
  EXPECT_EQ(parsed.at("model"), "gpt-tiny");
  EXPECT_EQ(parsed.at("memory_cap"), 1 << 20);
  EXPECT_EQ(parsed.at("dropped_by_cap"), footer_counts(run.output).second);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& row = parsed.at("rows")[i];
    EXPECT_EQ(row.at("rank"), i + 1);
    EXPECT_EQ(row.at("pp").get<int>() * row.at("dp").get<int>() * row.at("tp").get<int>(), 8);
    EXPECT_LE(row.at("peak_memory_bytes").get<double>(), 1 << 20);
    EXPECT_NEAR(row.at("step_s").get<double>() * 1e6, rows[i].step_us, 0.06) << i;
  }
}

TEST(DtwPlanTest, HelpDocumentsEveryOption) {
  const Finished run = plan({"--help"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  for (const char* option : {"--model", "--ranks", "--fabric", "--memory-cap", "--batch",
                             "--seq-len", "--micro-batches", "--dtype", "--json"})
    EXPECT_THAT(run.output, HasSubstr(option));
}

// --lab predicts with the learner's chapter 08 (its lab-run program): the
// header says whose planner it is; a lab not written yet stops at the first
// step the planner needs, named, with exit status 3.
TEST(DtwPlanTest, LabPredictsWithTheLearnersPlanner) {
  const Finished solution = plan({"--model", "gpt-tiny", "--ranks", "4", "--fabric", "nvlink-8"});
  ASSERT_EQ(solution.exit_code, 0) << solution.output;
  EXPECT_THAT(solution.output, HasSubstr("the solution's planner (chapter 08)"));
  const Finished lab =
      plan({"--model", "gpt-tiny", "--ranks", "4", "--fabric", "nvlink-8", "--lab"});
  if (lab.exit_code == 0) {
    EXPECT_THAT(lab.output, HasSubstr("your planner (labs/08-hybrid-parallelism)")) << lab.output;
  } else {
    EXPECT_EQ(lab.exit_code, 3) << lab.output;
    EXPECT_THAT(lab.output, ::testing::AllOf(HasSubstr("your lab has not written step 08."),
                                             HasSubstr("dtw plan --lab needed it")))
        << lab.output;
  }
  // Bad usage is refused before the hand-over, as without --lab.
  const Finished bad = plan({"--model", "gpt-tiny", "--ranks", "0", "--fabric", "nvlink-8", "--lab"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

}  // namespace
}  // namespace dtw
