// Every benchmark program (`dtw bench NAME`) as a user drives it, under the
// dtw program's rules: a bad value is refused where it enters, with a readable
// message and exit status 2, before anything is measured (a refusal is the
// only line printed); an output that cannot be written fails first, and a
// write that fails is an error (3), never "wrote ..." and 0; progress reaches
// a pipe as it is printed. Sizes are the smallest that run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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

std::string bench(const std::string& name) { return testing::bench_program(name); }

std::size_t lines_of(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

// The benchmarks this build has (a chapter's exists once the chapter does;
// gpu where CUDA was found).
std::vector<std::string> built_benches() {
  std::vector<std::string> names;
  for (const char* name :
       {"kernels", "collectives", "data-parallelism", "parameter-server", "zero", "train", "gpu"})
    if (fs::exists(bench(name))) names.emplace_back(name);
  return names;
}

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtw-bench-cli-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Finished run(const std::string& name, std::vector<std::string> args) {
    if (!fs::exists(bench(name))) return {.exit_code = -2, .output = "not built: " + bench(name)};
    args.insert(args.begin(), bench(name));
    return testing::run_program(args, dir_.string());
  }
  // Refused with exit status 2 and `message`, in one short line: nothing was
  // measured or printed before it.
  void expect_refused(const std::string& name, const std::vector<std::string>& args,
                      const std::string& message) {
    if (!fs::exists(bench(name))) GTEST_SKIP() << bench(name) << " is not built";
    std::string shown = name;
    for (const std::string& a : args) shown += " " + a;
    const Finished r = run(name, args);
    EXPECT_EQ(r.signal, 0) << shown << ": crashed: " << r.output;
    EXPECT_EQ(r.exit_code, 2) << shown << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << shown;
    EXPECT_EQ(lines_of(r.output), 1u) << shown << ": printed (measured?) before refusing: " << r.output;
    EXPECT_LT(r.output.size(), 400u) << shown << ": unreadably long: " << r.output;
  }

  fs::path dir_;
};

TEST_F(BenchCliTest, EveryBenchRefusesAnUnknownOptionWithTheUsageStatus) {
  // CLI11_PARSE exited 109 here, outside dtw's convention (dtw --help).
  ASSERT_FALSE(built_benches().empty());
  for (const std::string& name : built_benches())
    expect_refused(name, {"--bogus"}, "dtw bench " + name + ": The following argument was not expected: --bogus");
}

TEST_F(BenchCliTest, KernelsRefusesBadSizesInsteadOfCrashing) {
  // --repeats 0 read the median of no runs (SIGSEGV); --size -5 reached OpenBLAS.
  expect_refused("kernels", {"--repeats", "0", "--size", "8"}, "--repeats must be between 1 and 100000, got 0");
  expect_refused("kernels", {"--size", "-5", "--repeats", "1"}, "--size must be between 1 and 16384, got -5");
  expect_refused("kernels", {"--batch", "0", "--size", "8", "--repeats", "1"}, "--batch must be between 1 and");
  expect_refused("kernels", {"--steps", "0", "--size", "8", "--repeats", "1"}, "--steps must be between 1 and");
  // Checked before the matmul and attention sections run, not after.
  expect_refused("kernels", {"--model", "mlp-tiny", "--size", "8", "--repeats", "1"},
                 "--model must be a GPT (gpt-tiny, gpt-small, gpt-base, gpt2-124m), not mlp-tiny");
}

// --batch 100000 printed only "std::bad_alloc": the sizes' memory is now
// checked before anything is allocated, naming the need and the room.
TEST_F(BenchCliTest, KernelsRefusesSizesThatCannotFitBeforeAllocating) {
  if (!fs::exists(bench("kernels"))) GTEST_SKIP() << bench("kernels") << " is not built";
  const Finished r = testing::run_program({"/bin/sh", "-c", "ulimit -v 4000000 && exec \"$@\"",
                                           "sh", bench("kernels"), "--batch", "100000", "--size",
                                           "8", "--repeats", "1"},
                                          dir_.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--batch 100000 with --model gpt-small (the training step) "
                                  "needs an estimated"));
  EXPECT_THAT(r.output, HasSubstr("out of memory before it starts"));
  EXPECT_EQ(lines_of(r.output), 1u) << "measured before refusing: " << r.output;
}

// --steps 0 printed -nan, inf and -9223372036854775808 B with exit 0, and
// --layers 0 or -1 ran; empty paths were "not given".
TEST_F(BenchCliTest, TrainRefusesNoStepsNoLayersAndEmptyPaths) {
  const std::vector<std::string> small = {"--model", "mlp-tiny"};
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), small.begin(), small.end());
    return args;
  };
  expect_refused("train", with({"--steps", "0"}), "--steps must be at least 1, got 0");
  expect_refused("train", with({"--layers", "0"}), "--layers must be between 1 and 65536, got 0");
  expect_refused("train", with({"--layers", "-1"}), "--layers must be between 1 and 65536, got -1");
  expect_refused("train", with({"--json", ""}), "--json: the path is empty");
  expect_refused("train", with({"--svg", ""}), "--svg: the path is empty");
  expect_refused("train", with({"--steps", "2", "--steps", "3"}),
                 "--steps is given 2 times: give it once");
}

// An empty output path was read as "not given": nothing was written, exit 0.
TEST_F(BenchCliTest, EveryChapterBenchRefusesAnEmptyOutputPath) {
  expect_refused("data-parallelism", {"--model", "mlp-tiny", "--part", "server", "--out", ""},
                 "--out: the path is empty");
  for (const char* flag : {"--json", "--plot"})
    expect_refused("parameter-server", {"--model", "mlp-tiny", "--steps", "1", flag, ""},
                   std::string(flag) + ": the path is empty");
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "1", "--svg", ""},
                 "--svg: the path is empty");
}

TEST_F(BenchCliTest, CollectivesRefusesCountsItUsedToReplaceWithDefaults) {
  const std::vector<std::string> small = {"--sizes", "64", "--no-peers", "--algo", "ring"};
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), small.begin(), small.end());
    return args;
  };
  expect_refused("collectives", with({"--iters", "0"}), "--iters must be between 1 and 1000000, got 0");
  expect_refused("collectives", with({"--iters", "-1"}), "--iters must be between 1 and 1000000, got -1");
  expect_refused("collectives", with({"--warmup", "-5"}), "--warmup must be between 0 and 1000000, got -5");
  expect_refused("collectives", with({"--ranks", "0"}), "--ranks must be between 1 and 256, got 0");
  expect_refused("collectives", with({"--trials", "0"}), "--trials must be between 1 and 100, got 0");
  expect_refused("collectives", with({"--backend", "gpu"}),
                 "--backend: unknown name gpu; the known ones: threads, mpi, nccl");
  // CLI11 said "--ranks: At Most 1 required but received 2".
  expect_refused("collectives", with({"--ranks", "2", "--ranks", "4"}),
                 "--ranks is given 2 times: give it once");
}

// --backend nccl where this machine cannot run it: a build without NCCL is
// bad usage (2); NCCL built but no GPU is a run that failed (3), as `dtw run
// --backend nccl` says it. It was 1, "a check failed".
TEST_F(BenchCliTest, CollectivesOnNcclWithoutAGpuIsARunThatFailed) {
  if (!fs::exists(bench("collectives"))) GTEST_SKIP() << bench("collectives") << " is not built";
  const Finished r = run("collectives", {"--backend", "nccl", "--sizes", "64", "--no-peers"});
  if (r.output.find("no CUDA device") != std::string::npos)
    EXPECT_EQ(r.exit_code, 3) << r.output;
  else if (r.output.find("this build has no NCCL") != std::string::npos)
    EXPECT_EQ(r.exit_code, 2) << r.output;
  else
    GTEST_SKIP() << "this machine has a GPU: nothing refused";
}

TEST_F(BenchCliTest, ParameterServerRefusesBadValues) {
  const auto small = [](std::vector<std::string> args) {
    for (const char* a : {"--model", "mlp-tiny", "--repeats", "1"}) args.emplace_back(a);
    return args;
  };
  expect_refused("parameter-server", small({"--target", "nan", "--steps", "1"}),
                 "--target must be a finite number, got nan");
  expect_refused("parameter-server", small({"--target", "-1", "--steps", "1"}), "--target must be positive, got -1");
  // --steps 0 ended in a deadlock of the server; -1 in a RunSpec error after the header.
  expect_refused("parameter-server", small({"--steps", "0"}), "--steps must be between 1 and 1000000, got 0");
  expect_refused("parameter-server", small({"--steps", "-1"}), "--steps must be between 1 and 1000000, got -1");
  expect_refused("parameter-server", small({"--factor", "0.5", "--steps", "1"}), "--factor must be at least 1, got 0.5");
  expect_refused("parameter-server", small({"--staleness", "-1", "--steps", "1"}),
                 "--staleness must be between 0 and 1000000, got -1");
  expect_refused("parameter-server", small({"--workers", "0", "--steps", "1"}), "--workers must be between 1 and 64, got 0");
  expect_refused("parameter-server", small({"--workers", "4", "--batch", "2", "--steps", "1"}),
                 "--batch 2 is too small for 4 workers");
}

TEST_F(BenchCliTest, ZeroRefusesUnknownStrategiesListingTheKnownOnes) {
  // Unknown names were skipped ("skipping zero9") and the run went on, exit 0.
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "1", "--strategies", "zero1,zero9"},
                 "--strategies: unknown name zero9; the known ones: ");
  const Finished r = run("zero", {"--model", "mlp-tiny", "--ranks", "1", "--strategies", "zero9"});
  EXPECT_THAT(r.output, HasSubstr("zero3"));
  // --ranks went through std::stoi ("stoi", exit 1).
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "1,x"}, "--ranks takes an integer, got x");
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "0"}, "--ranks must be between 1 and 4096, got 0");
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "1,,2"}, "--ranks takes a comma-separated list");
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "16"},
                 "--ranks 16: the batch of 8 rows cannot be split over 16 ranks");
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "1", "--steps", "0"},
                 "--steps must be between 1 and 1000000, got 0");
}

TEST_F(BenchCliTest, DataParallelismRefusesBadValues) {
  const auto small = [](std::vector<std::string> args) {
    for (const char* a : {"--model", "mlp-tiny", "--part", "server"}) args.emplace_back(a);
    return args;
  };
  expect_refused("data-parallelism", small({"--steps", "0"}), "--steps must be between 1 and 100000, got 0");
  expect_refused("data-parallelism", small({"--caps", "0"}), "--caps must be between 1 and");
  expect_refused("data-parallelism", small({"--caps", "64,,256"}), "--caps takes a comma-separated list");
  expect_refused("data-parallelism", {"--part", "both"},
                 "--part: unknown name both; the known ones: server, buckets, all");
  // The bucket sweep's ib-2x8 runs have 16 ranks: refused before the sweep, not in its middle.
  expect_refused("data-parallelism", {"--model", "mlp-tiny", "--part", "buckets", "--batch", "8"},
                 "--batch 8 is too small for --part buckets: it runs 16 ranks");
}

TEST_F(BenchCliTest, AnUnwritableOutputFailsBeforeMeasuring) {
  const std::string missing = (dir_ / "missing").string();
  const std::vector<std::string> ps = {"--model", "mlp-tiny", "--workers", "1", "--steps", "1",
                                       "--batch", "1", "--repeats", "1"};
  const auto plus = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  // parameter-server printed "wrote .../x.json" and exited 0.
  expect_refused("parameter-server", plus(ps, {"--json", missing + "/x.json"}), "--json: cannot write");
  expect_refused("parameter-server", plus(ps, {"--plot", missing + "/curves"}), "--plot: cannot write");
  // zero checked its --svg only after measuring every world.
  expect_refused("zero", {"--model", "mlp-tiny", "--ranks", "1", "--strategies", "zero1", "--svg",
                          missing + "/z.svg"},
                 "--svg: cannot write");
  expect_refused("data-parallelism",
                 {"--model", "mlp-tiny", "--part", "server", "--batch", "8", "--out", missing + "/dp"},
                 "--out: cannot write");
  expect_refused("collectives", {"--sizes", "64", "--no-peers", "--algo", "ring", "--plot", dir_.string()},
                 "it is a folder");
}

TEST_F(BenchCliTest, AWriteThatFailsIsAnErrorNotASuccess) {
  // /dev/full passes the check (it can be opened) and fails every write.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const struct {
    std::string name;
    std::vector<std::string> args;
  } cases[] = {
      {"zero", {"--model", "mlp-tiny", "--ranks", "1", "--strategies", "zero1", "--svg", "/dev/full"}},
      {"parameter-server", {"--model", "mlp-tiny", "--workers", "1", "--steps", "1", "--batch", "1",
                            "--repeats", "1", "--json", "/dev/full"}},
      {"collectives", {"--ranks", "1", "--sizes", "64", "--iters", "1", "--warmup", "0", "--no-peers",
                       "--algo", "ring", "--json", "/dev/full"}},
  };
  for (const auto& c : cases) {
    if (!fs::exists(bench(c.name))) continue;
    const Finished r = run(c.name, c.args);
    EXPECT_EQ(r.exit_code, 3) << c.name << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("writing /dev/full failed: No space left on device")) << c.name;
    EXPECT_THAT(r.output, Not(HasSubstr("wrote /dev/full"))) << c.name;
  }
}

TEST_F(BenchCliTest, ProgressReachesAPipeAsItIsPrinted) {
  // Runs far too long to finish: each first line must arrive while the
  // program still runs, not when a block buffer fills or the program exits.
  const struct {
    std::string name;
    std::vector<std::string> args;
    std::string first_line;
  } cases[] = {
      {"kernels", {"--size", "8", "--repeats", "100000"}, "dtw / BLAS throughput"},
      {"parameter-server", {"--model", "mlp-tiny", "--workers", "1", "--steps", "1000000", "--batch", "1"},
       "dtw bench parameter-server: mlp-tiny"},
      {"zero", {"--model", "gpt-small", "--ranks", "8", "--steps", "1000000"}, "per-rank peak memory"},
      {"data-parallelism", {"--model", "gpt-small", "--part", "buckets", "--steps", "100000"},
       "ddp-bucketed on nvlink-8"},
  };
  for (const auto& c : cases) {
    if (!fs::exists(bench(c.name))) continue;
    std::vector<std::string> argv = c.args;
    argv.insert(argv.begin(), bench(c.name));
    testing::Running r(argv, dir_.string());
    EXPECT_TRUE(r.wait_for_line(c.first_line, std::chrono::seconds(60)))
        << c.name << ": no progress line on the pipe; got: " << r.seen();
    EXPECT_TRUE(r.alive()) << c.name << ": the line came only at the end";
  }
}

}  // namespace
}  // namespace dtw
