// Two outputs of one command that are one file are refused before any work
// (exit 2), naming both options: the later write would silently replace the
// earlier one (`dtw train --out a --json a.csv` kept the JSON under the loss
// curve's name and exited 0). dtw train (its --out stem's three files), dtw
// run, and every benchmark that writes more than one file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "program.h"

namespace dtw {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Finished;

std::string program(const std::string& name) {
  return name == "dtw" ? testing::dtw_program() : testing::bench_program(name);
}

class OutputPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtw-output-paths-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
            std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `name` with `args` in dir_, refused with exit 2 as one clash naming
  // `first` and `second`, having written nothing: dir_ stays empty.
  void expect_clash(const std::string& name, std::vector<std::string> args,
                    const std::string& first, const std::string& second) {
    const std::string path = program(name);
    if (path.empty() || !fs::exists(path)) GTEST_SKIP() << name << " is not built";
    std::string shown = name;
    for (const std::string& a : args) shown += " " + a;
    args.insert(args.begin(), path);
    const Finished r = testing::run_program(args, dir_.string());
    EXPECT_EQ(r.exit_code, 2) << shown << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(first)) << shown;
    EXPECT_THAT(r.output, HasSubstr(second)) << shown;
    EXPECT_THAT(r.output, HasSubstr("are the same file")) << shown;
    EXPECT_TRUE(fs::is_empty(dir_)) << shown << ": wrote files before refusing";
  }
  std::string at(const std::string& file) const { return (dir_ / file).string(); }

  fs::path dir_;
};

TEST_F(OutputPathsTest, DtwTrainRefusesJsonOnAFileOfItsOutStem) {
  // It trained, wrote the JSON over a.csv, exit 0 (gnuplot then failed on it).
  expect_clash("dtw", {"train", "--model", "mlp-tiny", "--steps", "1", "--out", at("a"), "--json",
                       at("a.csv")},
               "dtw train --out (the loss curve) (" + at("a.csv") + ")",
               "dtw train --json (" + at("a.csv") + ")");
  expect_clash("dtw", {"train", "--model", "mlp-tiny", "--steps", "1", "--out", "a", "--json",
                       "./a-timeline.svg"},
               "dtw train --out (the timeline) (a-timeline.svg)", "dtw train --json");
  // The default stem, train-<model>, counts too.
  expect_clash("dtw", {"train", "--model", "mlp-tiny", "--steps", "1", "--json", "train-mlp-tiny.svg"},
               "dtw train --out (the loss plot)", "dtw train --json (train-mlp-tiny.svg)");
}

TEST_F(OutputPathsTest, DtwRunRefusesJsonAndTraceOnOneFile) {
  // It ran, and same.json held the trace, exit 0.
  expect_clash("dtw", {"run", "token-ring", "--json", "same.json", "--trace", "./same.json"},
               "dtw run --trace (./same.json)", "dtw run --json (same.json)");
}

TEST_F(OutputPathsTest, CollectivesRefusesJsonOnThePlotOrItsData) {
  const std::vector<std::string> small = {"--ranks", "2", "--sizes", "8", "--no-peers"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), small.begin(), small.end());
    return more;
  };
  expect_clash("collectives", with({"--json", "x.svg", "--plot", at("x.svg")}), "--json (x.svg)",
               "--plot (" + at("x.svg") + ")");
  // --plot p.svg writes its data to p.dat beside it.
  expect_clash("collectives", with({"--plot", "p.svg", "--json", "p.dat"}), "--json (p.dat)",
               "--plot (its data) (p.dat)");
  expect_clash("collectives", with({"--plot", "p.dat"}), "--plot (p.dat)", "--plot (its data) (p.dat)");
}

TEST_F(OutputPathsTest, TrainBenchRefusesJsonOnATimeline) {
  expect_clash("train", {"--model", "mlp-tiny", "--steps", "1", "--svg", "t", "--json", "t-single-p1.svg"},
               "--json (t-single-p1.svg)", "--svg (single, measured) (t-single-p1.svg)");
  expect_clash("train", {"--model", "mlp-tiny", "--steps", "1", "--svg", "t", "--fabric", "ideal-8",
                         "--json", "t-single-p1-ideal-8.svg"},
               "--json", "--svg (single, modeled) (t-single-p1-ideal-8.svg)");
}

TEST_F(OutputPathsTest, ParameterServerBenchRefusesJsonOnItsPlot) {
  expect_clash("parameter-server", {"--json", "p.csv", "--plot", "p"}, "--json (p.csv)",
               "--plot (the curves) (p.csv)");
}

}  // namespace
}  // namespace dtw
