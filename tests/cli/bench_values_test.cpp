// Benchmark options that were silently ignored or wrongly accepted, each now
// refused where it enters (exit 2, one line, nothing measured): an empty
// output path, a name given twice or an empty item in a list, a folder as a
// file stem, a value given both by a flag and by a knob, a backend the
// program would not run on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "program.h"

namespace dtw {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::Finished;

std::string bench(const std::string& name) { return testing::bench_program(name); }

class BenchValuesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtw-bench-values-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Finished run(const std::string& name, std::vector<std::string> args) {
    args.insert(args.begin(), bench(name));
    return testing::run_program(args, dir_.string());
  }
  // Refused with exit status 2 and `message` in one line: nothing ran first.
  void expect_refused(const std::string& name, const std::vector<std::string>& args,
                      const std::string& message) {
    if (!fs::exists(bench(name))) GTEST_SKIP() << bench(name) << " is not built";
    std::string shown = name;
    for (const std::string& a : args) shown += " '" + a + "'";
    const Finished r = run(name, args);
    EXPECT_EQ(r.exit_code, 2) << shown << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << shown;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << shown << ": " << r.output;
  }

  fs::path dir_;
};

TEST_F(BenchValuesTest, CollectivesRefusesAnEmptyOutputPath) {
  // Both ran to the end, wrote nothing and exited 0.
  expect_refused("collectives", {"--json", ""}, "--json: the path is empty");
  expect_refused("collectives", {"--plot", ""}, "--plot: the path is empty");
}

TEST_F(BenchValuesTest, CollectivesRefusesAnAlgorithmTwiceOrAnEmptyOne) {
  // ring,ring measured and printed ring twice.
  expect_refused("collectives", {"--algo", "ring,ring"}, "--algo: ring is named twice in ring,ring");
  expect_refused("collectives", {"--algo", "ring,"}, "--algo takes a comma-separated list of names, got ring,: an empty item");
  expect_refused("collectives", {"--algo", "ringo"}, "--algo: unknown name ringo; the known ones: naive");
}

// Every list option is a sweep (a row per value): a value given twice was
// measured and printed twice.
TEST_F(BenchValuesTest, EverySweepRefusesAValueTwice) {
  expect_refused("collectives", {"--sizes", "8,8"}, "--sizes 8,8: 8 bytes is measured twice");
  // Sizes are whole elements: 12 bytes of int64 is 8.
  expect_refused("collectives", {"--sizes", "12,8", "--dtype", "int64"},
                 "--sizes 12,8: 8 bytes is measured twice");
  expect_refused("train", {"--micro-batches", "4,2,4"}, "--micro-batches: 4 is given twice in 4,2,4");
  if (fs::exists(bench("data-parallelism")))
    expect_refused("data-parallelism", {"--caps", "1,1"}, "--caps: 1 is given twice in 1,1");
  if (fs::exists(bench("zero")))
    expect_refused("zero", {"--ranks", "2,2"}, "--ranks: 2 is given twice in 2,2");
}

TEST_F(BenchValuesTest, TrainRefusesAFolderAsTheTimelineStem) {
  // It wrote DIR-single-p1.svg next to the folder DIR, exit 0.
  expect_refused("train", {"--svg", dir_.string()},
                 "--svg " + dir_.string() + ": that is a folder, and --svg takes a file stem");
  EXPECT_FALSE(fs::exists(dir_.string() + "-single-p1.svg"));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(BenchValuesTest, TrainRefusesAnEmptyStrategyOnEitherSideAndOneTwice) {
  // "single," ran single; ",single" was refused (as an unknown strategy '').
  for (const char* list : {"single,", ",single", "single,,dp-allreduce", ""})
    expect_refused("train", {"--strategy", list}, "--strategy takes a comma-separated list of names");
  expect_refused("train", {"--strategy", "single,single"}, "--strategy: single is named twice");
  expect_refused("train", {"--strategy", "ddp"}, "--strategy: unknown name ddp; the known ones: single");
}

// --ranks 2,4 runs each strategy on both worlds (chapters 06 and 07 compare
// their strategies that way); a world twice or an empty item is refused, and
// so is a list over MPI, where every row runs on the processes mpirun starts.
TEST_F(BenchValuesTest, TrainRanksIsAListOfWorlds) {
  expect_refused("train", {"--ranks", "2,2"}, "--ranks: 2 is given twice in 2,2");
  expect_refused("train", {"--ranks", "2,"}, "--ranks takes a comma-separated list of integers");
  expect_refused("train", {"--ranks", "0"}, "--ranks must be between 1 and");
  expect_refused("train", {"--ranks", "2,4", "--backend", "mpi"},
                 "--backend mpi runs every row on the processes mpirun starts: give one --ranks, "
                 "got 2");
}

TEST_F(BenchValuesTest, TrainRefusesMicroBatchesEmptyTwiceOrAlsoGivenAsAKnob) {
  // '' ran one row with the knob's default; with --set micro_batches=4 the
  // flag's 1 was used and the 4 dropped; both exit 0.
  expect_refused("train", {"--micro-batches", ""}, "--micro-batches takes a comma-separated list of integers");
  expect_refused("train", {"--micro-batches", "0"}, "--micro-batches must be between 1 and");
  expect_refused("train", {"--micro-batches", "2,2"}, "--micro-batches: 2 is given twice");
  expect_refused("train", {"--micro-batches", "1", "--set", "micro_batches=4"},
                 "--micro-batches and --set micro_batches=4 both set the knob micro_batches");
}

TEST_F(BenchValuesTest, TrainRefusesABackendItDoesNotRunOn) {
  // --backend mpi starts mpirun (train_mpi_test.cpp); another is refused, and
  // so is a hostfile for the threads backend.
  expect_refused("train", {"--backend", "nope"}, "--backend nope: dtw bench train runs on threads or mpi");
  expect_refused("train", {"--hostfile", "hosts"}, "--hostfile only applies to --backend mpi");
}

TEST_F(BenchValuesTest, TrainRunsTheSingleBaselineOnceWhereverItIsNamed) {
  if (!fs::exists(bench("train"))) GTEST_SKIP() << bench("train") << " is not built";
  // Named second, single was run twice: once as the baseline put first, once
  // where it was named.
  const Finished r = run("train", {"--strategy", "dp-allreduce,single", "--ranks", "2", "--model",
                                   "mlp-tiny", "--steps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  int single_rows = 0;
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("single ")) ++single_rows;
    if (line.starts_with("single ") || line.starts_with("dp-allreduce ")) rows.push_back(line);
  }
  EXPECT_EQ(single_rows, 1) << r.output;
  ASSERT_EQ(rows.size(), 2u) << r.output;
  EXPECT_TRUE(rows[0].starts_with("single ")) << "the baseline is the first row: " << r.output;
}

TEST_F(BenchValuesTest, TrainRunsEveryStrategyOnEveryWorldAndSingleOnce) {
  if (!fs::exists(bench("train"))) GTEST_SKIP() << bench("train") << " is not built";
  const Finished r = run("train", {"--strategy", "dp-allreduce", "--ranks", "2,3", "--model",
                                   "mlp-tiny", "--steps", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("single ") || line.starts_with("dp-allreduce ")) rows.push_back(line);
  ASSERT_EQ(rows.size(), 3u) << r.output;
  // The ranks column: single on 1, then the strategy on 2 and on 3.
  const auto ranks_of = [](const std::string& row) {
    std::istringstream in(row);
    std::string name;
    int ranks = 0;
    in >> name >> ranks;
    return ranks;
  };
  EXPECT_EQ(ranks_of(rows[0]), 1) << r.output;
  EXPECT_EQ(ranks_of(rows[1]), 2) << r.output;
  EXPECT_EQ(ranks_of(rows[2]), 3) << r.output;
}

}  // namespace
}  // namespace dtw
