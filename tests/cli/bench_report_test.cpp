// The reports' own output rules. The collectives report: one rank gets a
// note saying why busbw is 0 (instead of a bare 0.000), and an output that
// cannot be written is refused before anything is measured. The training
// report: a row that cannot run is refused before any row runs, and a row
// that fails while running still leaves the table of the rows before it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <new>

#include "bench_main.h"
#include "cli_values.h"
#include "program.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;

// A std::bad_alloc no estimate caught printed "dtw bench kernels:
// std::bad_alloc": now it says out of memory, with the options in force.
TEST(BenchMainTest, BadAllocSaysOutOfMemoryWithTheOptions) {
  CLI::App app{"a probe", "dtw bench probe"};
  std::int64_t size = 1;
  cli::add_int(app, "--size", size, "n");
  std::string words[] = {"probe", "--size", "8"};
  char* argv[] = {words[0].data(), words[1].data(), words[2].data()};
  ::testing::internal::CaptureStderr();
  const int status = cli::bench_main(app, 3, argv, []() -> int { throw std::bad_alloc(); });
  const std::string error = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 3);
  EXPECT_THAT(error, HasSubstr("dtw bench probe: out of memory (std::bad_alloc) with the "
                               "options --size 8"));
}

#ifdef DTW_BENCH_COLLECTIVES
TEST(BenchReportTest, OneRankSaysWhyBusbwIsZero) {
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_COLLECTIVES, "--ranks", "1", "--algo", "ring", "--sizes", "64", "--iters", "2",
       "--warmup", "0", "--no-peers"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("on 1 rank an allreduce moves no data between ranks"));
  EXPECT_THAT(run.output, HasSubstr("is 0 by definition"));
}

// The header says whose algorithms the rows time; `dtw bench collectives
// --lab` times the learner's lab (a lab step not written yet stops it, named),
// and a benchmark without a lab program says so instead of timing the solution.
TEST(BenchReportTest, TheHeaderNamesWhoseCodeTheRowsTimeAndLabTimesTheLab) {
  const testing::Finished solution = testing::run_program(
      {DTW_BENCH_COLLECTIVES, "--ranks", "2", "--algo", "ring", "--sizes", "64", "--iters", "2",
       "--warmup", "0", "--no-peers"});
  ASSERT_EQ(solution.exit_code, 0) << solution.output;
  EXPECT_THAT(solution.output, HasSubstr("# code: chapter 01's solution"));
  const testing::Finished lab = testing::run_program(
      {DTW_PROGRAM, "bench", "collectives", "--lab", "--ranks", "2", "--algo", "ring", "--sizes", "64",
       "--iters", "2", "--warmup", "0", "--no-peers"});
  // The lab as the learner left it: written (the rows are theirs) or not yet
  // (the run stops at the first step it needs, in the lab's file).
  if (lab.exit_code == 0)
    EXPECT_THAT(lab.output, HasSubstr("# code: your chapter 01 lab")) << lab.output;
  else
    EXPECT_THAT(lab.output, ::testing::AllOf(HasSubstr("NotImplemented"), HasSubstr("labs/01-collectives/")))
        << "exit " << lab.exit_code << ": " << lab.output;
  const testing::Finished none = testing::run_program({DTW_PROGRAM, "bench", "kernels", "--lab"});
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_THAT(none.output, HasSubstr("dtw bench kernels has no --lab"));
}

TEST(BenchReportTest, AnUnwritableJsonFailsBeforeMeasuring) {
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_COLLECTIVES, "--ranks", "2", "--sizes", "64", "--json", "/nonexistent-dtw/r.json"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("--json: cannot write /nonexistent-dtw/r.json"));
  EXPECT_EQ(run.output.find("busbw"), std::string::npos) << "measured first: " << run.output;
}
#endif

#ifdef DTW_BENCH_TRAIN
// Each measured row prints "NAME on P rank(s): done" as it ends, and the table
// starts with its header; neither may appear when a row was refused.
void expect_nothing_ran(const std::string& output) {
  EXPECT_EQ(output.find(": done"), std::string::npos) << "a row ran: " << output;
  EXPECT_EQ(output.find("tokens/s"), std::string::npos) << "a table was printed: " << output;
}

TEST(BenchTrainTest, ARowThatCannotRunIsRefusedBeforeAnyRowRuns) {
  // ddp-accumulate's default of 4 micro-batches on 8 ranks needs 32 rows;
  // the batch has 8. The three rows before it would run (and be lost) first.
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_TRAIN, "--strategy", "single,ddp-bucketed,zero1,ddp-accumulate", "--ranks", "8",
       "--batch", "8", "--model", "mlp-tiny", "--steps", "1"});
  EXPECT_EQ(run.exit_code, 2) << run.output;  // bad usage (dtw --help)
  EXPECT_THAT(run.output, HasSubstr("1 of 4 rows cannot run, so none was run"));
  EXPECT_THAT(run.output,
              HasSubstr("strategy ddp-accumulate on 8 ranks, mlp-tiny, batch 8: a global batch of "
                        "8 rows cannot feed 8 ranks x 4 micro-batches"));
  expect_nothing_ran(run.output);
}

TEST(BenchTrainTest, EveryChaptersStrategiesCheckTheirRowsBeforeAnyRuns) {
  // One refused row per training chapter, each named with what it lacks;
  // balance=blocks is a pipeline knob, given to the pipelines' rows only.
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_TRAIN, "--strategy", "dp-server,ps-sync,zero3,pp-gpipe,pp-interleaved", "--ranks",
       "12", "--model", "mlp-tiny", "--batch", "8", "--steps", "1", "--set", "balance=blocks"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("5 of 6 rows cannot run"));
  for (const char* why :
       {"strategy dp-server on 12 ranks, mlp-tiny, batch 8: a global batch of 8 "
        "cannot be split over 12 data shards",
        "strategy ps-sync on 12 ranks, mlp-tiny, batch 8: a global batch of 8 "
        "cannot be split over 11 data shards",
        "strategy zero3 on 12 ranks, mlp-tiny, batch 8: ZeRO: a global batch of 8 "
        "rows cannot be split over 12 ranks x 1 micro-batches",
        "strategy pp-gpipe on 12 ranks, mlp-tiny, batch 8, balance=blocks: 12 ranks × 1 chunk(s) "
        "each need 12 units, but mlp-tiny has 3",
        "strategy pp-interleaved on 12 ranks, mlp-tiny, batch 8, balance=blocks: 12 ranks × 2 "
        "chunk(s) each need 24 units"})
    EXPECT_THAT(run.output, HasSubstr(why));
  expect_nothing_ran(run.output);
}

TEST(BenchTrainTest, AKnobNoChosenStrategyHasIsRefusedBeforeAnyRowRuns) {
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_TRAIN, "--strategy", "ddp-bucketed,zero1", "--ranks", "2", "--model", "mlp-tiny",
       "--steps", "1", "--set", "bucket_kb=8"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("2 of 3 rows cannot run, so none was run"));
  EXPECT_THAT(run.output, HasSubstr("strategy ddp-bucketed on 2 ranks, mlp-tiny, batch 8, "
                                    "bucket_kb=8: unknown knob 'bucket_kb' (did you mean "
                                    "bucket_kib?); ddp-bucketed's knobs are bucket_kib, check_every"));
  EXPECT_THAT(run.output, HasSubstr("strategy zero1 on 2 ranks, mlp-tiny, batch 8, bucket_kb=8: "
                                    "unknown knob 'bucket_kb'"));
  expect_nothing_ran(run.output);
}

TEST(BenchTrainTest, AKnobOrSweepGivenToTheBaselineAloneIsRefusedNotDropped) {
  // single takes no knobs: alone, it must refuse them, not run without them.
  for (const std::vector<std::string>& given :
       {std::vector<std::string>{"--set", "bucket_kib=8"},
        std::vector<std::string>{"--micro-batches", "2,4"}}) {
    std::vector<std::string> args = {DTW_BENCH_TRAIN, "--strategy", "single", "--model",
                                     "mlp-tiny", "--steps", "1"};
    args.insert(args.end(), given.begin(), given.end());
    const testing::Finished run = testing::run_program(args);
    EXPECT_EQ(run.exit_code, 2) << given[0] << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr("rows cannot run, so none was run")) << given[0];
    EXPECT_THAT(run.output, HasSubstr("single takes no knobs")) << given[0];
    expect_nothing_ran(run.output);
  }
}

TEST(BenchTrainTest, EachRowGetsTheKnobsItsStrategyHasAndNamesThemInForce) {
  // bucket_kib is ddp-bucketed's, micro_batches zero1's: one command
  // compares them, and each row says the knobs it ran with, defaults included.
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_TRAIN, "--strategy", "ddp-bucketed,zero1", "--ranks", "2", "--model", "mlp-tiny",
       "--steps", "1", "--set", "bucket_kib=8", "--set", "micro_batches=2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("single on 1 rank(s): done\n"));
  EXPECT_THAT(run.output,
              HasSubstr("ddp-bucketed on 2 rank(s): done (knobs bucket_kib=8 check_every=1)"));
  EXPECT_THAT(run.output, HasSubstr("zero1 on 2 rank(s): done (knobs micro_batches=2 save=none "
                                    "save_after=0 resume=none)"));
}

TEST(BenchTrainTest, ARowNotComparedWithTheReferencePrintsADashForMaxDtheta) {
  // ps-async does not reproduce the single-device run, so nothing is
  // compared: its max|dθ| is "-" (null in the JSON), not a 0 that reads as
  // "matches exactly"; single is compared and prints its number.
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_TRAIN, "--strategy", "ps-async", "--ranks", "3", "--model", "mlp-tiny", "--steps",
       "2"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::size_t table = run.output.find("tokens/s");
  ASSERT_NE(table, std::string::npos) << "no table: " << run.output;
  const std::string rows = run.output.substr(table);
  // The last two cells of a row: max|dθ| (9 wide) and the loss.
  EXPECT_THAT(rows, ::testing::ContainsRegex("\nps-async +3 [^\n]* +- +[0-9]+\\.[0-9]+\n"))
      << rows;
  EXPECT_THAT(rows, ::testing::ContainsRegex("\nsingle +1 [^\n]* +[0-9][0-9.e+-]* +[0-9]+\\.[0-9]+\n"))
      << rows;
  EXPECT_THAT(rows, HasSubstr("max|dθ|: vs the reference (-: not compared)"));
}

TEST(BenchTrainTest, ARowThatFailsWhileRunningLeavesTheTableOfTheRowsBefore) {
  // zero1 passes the check but cannot read the checkpoint it is told to
  // resume from; single and ddp-bucketed ran before it, zero2 never runs.
  const testing::Finished run = testing::run_program(
      {DTW_BENCH_TRAIN, "--strategy", "single,ddp-bucketed,zero1,zero2", "--ranks", "2", "--model",
       "mlp-tiny", "--steps", "1", "--set", "resume=/nonexistent-dtw/checkpoint"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output,
              HasSubstr("zero1 on 2 rank(s): failed (the error is below); 1 row(s) not run"));
  EXPECT_THAT(run.output, HasSubstr("cannot read checkpoint file /nonexistent-dtw/checkpoint"));
  const std::size_t table = run.output.find("tokens/s");
  ASSERT_NE(table, std::string::npos) << "no table: " << run.output;
  const std::string rows = run.output.substr(table);
  EXPECT_THAT(rows, ::testing::ContainsRegex("\nsingle +1 "));
  EXPECT_THAT(rows, ::testing::ContainsRegex("\nddp-bucketed +2 "));
  EXPECT_THAT(rows, ::testing::Not(::testing::ContainsRegex("\nzero[12] ")));
}
#endif

}  // namespace
}  // namespace dtw
