// `dtw train --list` lists and trains nothing: an option beside it would be
// ignored (--list --strategy nope listed every strategy and exited 0), so it
// is refused (exit 2) naming both options.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "program.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Finished;

Finished dtw(std::vector<std::string> args) { return testing::run_dtw(std::move(args)); }

TEST(DtwTrainListTest, RefusesAnOptionItWouldIgnore) {
  for (const std::vector<std::string>& beside :
       {std::vector<std::string>{"--strategy", "nope"}, std::vector<std::string>{"--steps", "3"},
        std::vector<std::string>{"--out", "x"}}) {
    std::vector<std::string> args{"train", "--list"};
    args.insert(args.end(), beside.begin(), beside.end());
    const Finished run = dtw(args);
    EXPECT_EQ(run.exit_code, 2) << beside[0] << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr("cannot be given together")) << run.output;
    EXPECT_THAT(run.output, HasSubstr(beside[0])) << run.output;
    EXPECT_THAT(run.output, Not(HasSubstr("single"))) << "it listed: " << run.output;
  }
  // Given after the option, too.
  const Finished after = dtw({"train", "--strategy", "nope", "--list"});
  EXPECT_EQ(after.exit_code, 2) << after.output;
  EXPECT_THAT(after.output, HasSubstr("--strategy and --list cannot be given together"));
}

TEST(DtwTrainListTest, AloneItListsTheStrategies) {
  const Finished run = dtw({"train", "--list"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("single"));
  EXPECT_THAT(run.output, HasSubstr("dp-allreduce"));
}

}  // namespace
}  // namespace dtw
