// A child process that dies is a failure wherever dtw runs one: its wait
// status is decoded (signal, or mpirun's 128 + signal), the lines in which
// OpenMPI names the rank are kept, and the program exits with 3 (a run
// failed) instead of passing a skipped row or a raw status as success. A
// stand-in mpirun on PATH plays a job whose rank 1 was killed with SIGKILL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "process.h"
#include "program.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

TEST(ChildFailureTest, SignalsAndMpirunStatusesAreDecoded) {
  const cli::ProcessResult killed =
      cli::run_process({"sh", "-c", "kill -9 $$"}, {.output = cli::Output::kCapture});
  EXPECT_FALSE(killed.ok());
  EXPECT_EQ(killed.describe(), "killed by signal 9 (Killed)");
  const cli::ProcessResult status =
      cli::run_process({"sh", "-c", "exit 137"}, {.output = cli::Output::kCapture});
  EXPECT_THAT(status.describe(), HasSubstr("exit status 137 (128 + signal 9, Killed"));
  EXPECT_EQ(cli::run_process({"sh", "-c", "exit 2"}, {.output = cli::Output::kCapture}).describe(),
            "exit status 2");
}

TEST(ChildFailureTest, FailureLinesKeepTheLineNamingTheRank) {
  cli::ProcessResult r;
  r.exit_code = 137;
  r.output = std::string(40, '-') + "\n" + std::string(500, 'x') + "\n" +
             "mpirun noticed that process rank 3 with PID 77 on node n1 exited on signal 9 (Killed).\n" +
             std::string(40, '-') + "\n";
  EXPECT_THAT(r.failure_lines(), HasSubstr("process rank 3 with PID 77"));
  EXPECT_EQ(r.failure_lines().find(std::string(500, 'x')), std::string::npos);
}

class DeadMpiRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dtw-fake-mpirun-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    fake_mpirun("echo '--------------------------------------------------------------------------'\n"
                "echo 'mpirun noticed that process rank 1 with PID 4242 on node testhost exited on "
                "signal 9 (Killed).'\n"
                "echo '--------------------------------------------------------------------------'\n"
                "exit 137\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The stand-in mpirun: a shell script with `body`.
  void fake_mpirun(const std::string& body) {
    std::ofstream script(dir_ / "mpirun");
    script << "#!/bin/sh\n" << body;
    script.close();
    fs::permissions(dir_ / "mpirun", fs::perms::owner_all);
  }

  // Runs argv with the stand-in mpirun first on PATH.
  testing::Finished with_fake_mpirun(std::vector<std::string> argv) {
    const char* path = std::getenv("PATH");
    argv.insert(argv.begin(), {"/usr/bin/env", "PATH=" + dir_.string() + ":" + (path ? path : "")});
    return testing::run_program(argv, dir_.string());
  }

  fs::path dir_;
};

#ifdef DTW_BENCH_COLLECTIVES
TEST_F(DeadMpiRankTest, FailsTheCollectivesBench) {
  const testing::Finished run =
      with_fake_mpirun({DTW_BENCH_COLLECTIVES, "--backend", "mpi", "--ranks", "2", "--algo",
                        "ring", "--sizes", "8", "--iters", "2", "--warmup", "0"});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_THAT(run.output, HasSubstr("FAILED: mpirun -np 2 ended with exit status 137 (128 + signal 9"));
  EXPECT_THAT(run.output, HasSubstr("process rank 1 with PID 4242 on node testhost exited on signal 9"));
  EXPECT_EQ(run.output.find("skipped"), std::string::npos) << run.output;
}
#endif

#if DTW_HAVE_MPI_RUN
TEST_F(DeadMpiRankTest, FailsDtwRun) {
  const testing::Finished run =
      with_fake_mpirun({DTW_PROGRAM, "run", "token-ring", "--backend", "mpi", "--ranks", "2"});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_THAT(run.output, HasSubstr("process rank 1 with PID 4242"));
  EXPECT_THAT(run.output, HasSubstr("mpirun -np 2 ended with exit status 137 (128 + signal 9"));
}

TEST_F(DeadMpiRankTest, MpirunsOwnFailureIsDecodedNotPassedOnAsACheck) {
  // mpirun's status 1 (it could not start the job) read as dtw's "a check failed".
  fake_mpirun("echo 'Open RTE was unable to open the hostfile'\nexit 1\n");
  const testing::Finished run =
      with_fake_mpirun({DTW_PROGRAM, "run", "token-ring", "--backend", "mpi", "--ranks", "2"});
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_THAT(run.output, HasSubstr("mpirun -np 2 ended with exit status 1"));
}

TEST_F(DeadMpiRankTest, ARanksOwnStatusPassesThrough) {
  // A rank of dtw's mpirun leaves with 80 + its status, and is told so.
  fake_mpirun("[ \"$DTW_RANK_OF_DTW_MPIRUN\" = 1 ] || exit 99\n"
              "echo 'rank 0: demo result wrong'\nexit 81\n");
  const testing::Finished run =
      with_fake_mpirun({DTW_PROGRAM, "run", "token-ring", "--backend", "mpi", "--ranks", "2"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_THAT(run.output, Not(HasSubstr("ended with"))) << run.output;
}

TEST_F(DeadMpiRankTest, AMissingHostfileIsRefusedBeforeMpirunStarts) {
  const testing::Finished run =
      with_fake_mpirun({DTW_PROGRAM, "run", "token-ring", "--backend", "mpi", "--ranks", "2",
                        "--hostfile", (dir_ / "no-hostfile").string()});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_THAT(run.output, HasSubstr("no-hostfile: no such file"));
  EXPECT_THAT(run.output, Not(HasSubstr("PID 4242"))) << "mpirun ran: " << run.output;
}
#endif

}  // namespace
}  // namespace dtw
