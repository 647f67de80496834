// `dtw train --backend mpi` and `dtw bench train --backend mpi` (issue 29):
// dtw starts mpirun itself, one process per rank, as `dtw run --backend mpi`
// does; each process runs its rank through the training harness on the mpi
// backend, rank 0 prints, and every strategy matches the reference as it does
// on threads. A bad --hostfile is refused before mpirun starts. Skipped where
// the build has no MPI or mpirun is not on PATH.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "program.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Finished;
using testing::run_program;
namespace fs = std::filesystem;

bool mpirun_on_path() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (access((fs::path(dir.empty() ? "." : dir) / "mpirun").c_str(), X_OK) == 0) return true;
  return false;
}

class TrainMpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtw-train-mpi-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Finished dtw(std::vector<std::string> args) {
    args.insert(args.begin(), testing::dtw_program());
    return run_program(args, dir_.string());
  }
  // Skips the test where MPI cannot run; returns false then.
  bool mpi_runs() {
    const Finished probe = dtw({"train", "--backend", "mpi", "--steps", "1", "--model", "mlp-tiny",
                                "--hostfile", (dir_ / "none").string()});
    if (probe.output.find("this build has no mpi backend") != std::string::npos) return false;
    return mpirun_on_path();
  }

  fs::path dir_;
};

// One strategy of every training chapter, run on 3 MPI processes, matches
// the single-device reference as it does on threads; rank 0 alone prints.
TEST_F(TrainMpiTest, EveryChaptersStrategiesMatchTheReferenceOnThreeProcesses) {
  if (!mpi_runs()) GTEST_SKIP() << "no MPI in this build, or no mpirun on PATH";
  for (const char* strategy : {"dp-allreduce", "ddp-bucketed", "ps-sync", "zero3", "pp-1f1b"}) {
    const Finished run =
        dtw({"train", "--backend", "mpi", "--ranks", "3", "--strategy", strategy, "--steps", "2",
             "--model", "gpt-tiny", "--compare", "--out", (dir_ / strategy).string()});
    EXPECT_EQ(run.exit_code, 0) << strategy << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr("dtw: ")) << strategy << ": no mpirun line";
    EXPECT_THAT(run.output, HasSubstr(" -np 3 ")) << strategy;
    EXPECT_THAT(run.output, HasSubstr(std::string("training with ") + strategy)) << strategy;
    EXPECT_THAT(run.output, HasSubstr("on 3 ranks (mpi")) << strategy;
    EXPECT_THAT(run.output, HasSubstr("reference: matches")) << strategy << ": " << run.output;
    // Rank 0 prints; the other processes are quiet.
    const std::string header = std::string("training with ") + strategy;
    EXPECT_EQ(run.output.find(header), run.output.rfind(header)) << strategy << ": " << run.output;
    EXPECT_TRUE(fs::exists(dir_ / (std::string(strategy) + ".csv"))) << strategy;
  }
}

// A run that fails on a rank ends with exit status 3, the error said once.
TEST_F(TrainMpiTest, ARanksFailureEndsWithTheRunFailedStatus) {
  if (!mpi_runs()) GTEST_SKIP() << "no MPI in this build, or no mpirun on PATH";
  const Finished run = dtw({"train", "--backend", "mpi", "--ranks", "3", "--strategy", "ps-sync",
                            "--steps", "2", "--set", "crash=1:2", "--out",
                            (dir_ / "crash").string()});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  const std::string said = "ps: worker 1 (rank 2) crashed before its push of step 2";
  EXPECT_THAT(run.output, HasSubstr(said));
  EXPECT_EQ(run.output.find("dtw: error"), run.output.rfind("dtw: error")) << run.output;
}

// A --hostfile that cannot be read is bad usage, refused before mpirun
// starts (mpirun's own failure would be status 1, "a check failed"); and
// --hostfile without --backend mpi is refused too.
TEST_F(TrainMpiTest, ABadHostfileIsRefusedBeforeMpirun) {
  if (!mpi_runs()) GTEST_SKIP() << "no MPI in this build, or no mpirun on PATH";
  const Finished missing =
      dtw({"train", "--backend", "mpi", "--ranks", "2", "--strategy", "dp-allreduce", "--steps",
           "1", "--hostfile", (dir_ / "no-such-hosts").string()});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("no-such-hosts: no such file"));
  EXPECT_THAT(missing.output, Not(HasSubstr("-np 2"))) << "mpirun was started";
  const Finished folder = dtw({"train", "--backend", "mpi", "--steps", "1", "--hostfile",
                               dir_.string()});
  EXPECT_EQ(folder.exit_code, 2) << folder.output;
  EXPECT_THAT(folder.output, HasSubstr("not a readable file"));
  const Finished threads = dtw({"train", "--steps", "1", "--hostfile", dir_.string()});
  EXPECT_EQ(threads.exit_code, 2) << threads.output;
  EXPECT_THAT(threads.output, HasSubstr("--hostfile only applies to --backend mpi"));
}

// dtw bench train on MPI: every row (single's on rank 0, the others on the
// job's processes) measured and matching; one table, printed by rank 0.
TEST_F(TrainMpiTest, BenchTrainRunsItsRowsOnMpi) {
  if (!mpi_runs()) GTEST_SKIP() << "no MPI in this build, or no mpirun on PATH";
  const std::string bench = testing::bench_program("train");
  if (bench.empty() || !fs::exists(bench)) GTEST_SKIP() << "no dtw_bench_train in this build";
  const Finished run =
      run_program({bench, "--backend", "mpi", "--ranks", "2", "--strategy", "dp-allreduce",
                   "--steps", "2", "--json", (dir_ / "rows.json").string()},
                  dir_.string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("dp-allreduce on 2 rank(s): done"));
  const std::string table = "tokens/s: median step";
  EXPECT_NE(run.output.find(table), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find(table), run.output.rfind(table)) << "printed twice: " << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("  ! "))) << "a row did not match the reference";
  EXPECT_TRUE(fs::exists(dir_ / "rows.json"));
  const Finished bad =
      run_program({bench, "--backend", "mpi", "--ranks", "2", "--hostfile",
                   (dir_ / "no-such-hosts").string()},
                  dir_.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("no such file"));
}

}  // namespace
}  // namespace dtw
