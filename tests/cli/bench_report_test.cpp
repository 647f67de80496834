// The collectives report's own output rules: one rank gets a note saying why
// busbw is 0 (instead of a bare 0.000), and an output that cannot be written
// is refused before anything is measured.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "program.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;

#ifdef DTW_BENCH_COLLECTIVES
TEST(BenchReportTest, OneRankSaysWhyBusbwIsZero) {
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_COLLECTIVES, "--ranks", "1", "--algo", "ring", "--sizes", "64", "--iters", "2",
       "--warmup", "0", "--no-peers"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("on 1 rank an allreduce moves no data between ranks"));
  EXPECT_THAT(run.output, HasSubstr("is 0 by definition"));
}

TEST(BenchReportTest, AnUnwritableJsonFailsBeforeMeasuring) {
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_COLLECTIVES, "--ranks", "2", "--sizes", "64", "--json", "/nonexistent-dtw/r.json"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--json: cannot write /nonexistent-dtw/r.json"));
  EXPECT_EQ(run.output.find("busbw"), std::string::npos) << "measured first: " << run.output;
}
#endif

}  // namespace
}  // namespace dtw
