// Output files: check_writable refuses, before any work, what could not be
// written; write_file reports every failed write (a full disk included),
// so a program never says "wrote" for a file it lost.
#include "dtw/output_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "dtw/errors.h"

namespace dtw {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dtw-output-file-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// The message of the Error `fn` raises; fails the test when it raises none.
template <class E, class Fn>
std::string message_of(Fn fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error raised";
  return "";
}

TEST_F(OutputFileTest, WritesTheWholeContentsAndReplacesAnOldFile) {
  const std::string path = (dir_ / "out.txt").string();
  std::ofstream(path) << "an old and longer content\n";
  write_file(path, "new\n", "--out");
  std::ifstream in(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "new\n");
}

TEST_F(OutputFileTest, AFullDiskIsAnErrorNamingThePath) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  check_writable("/dev/full", "--json");  // it can be opened: only the write fails
  const std::string what =
      message_of<Error>([] { write_file("/dev/full", std::string(1 << 16, 'x'), "--json"); });
  EXPECT_THAT(what, HasSubstr("--json: writing /dev/full failed: No space left on device"));
}

TEST_F(OutputFileTest, AMissingFolderIsAnErrorNamingIt) {
  const std::string path = (dir_ / "missing" / "x.json").string();
  EXPECT_THAT(message_of<InvalidArgument>([&] { check_writable(path, "--json"); }),
              HasSubstr("does not exist"));
  EXPECT_THAT(message_of<Error>([&] { write_file(path, "{}", "--json"); }),
              HasSubstr("--json: cannot write " + path));
  EXPECT_THAT(message_of<InvalidArgument>([&] { check_writable(dir_.string(), "--svg"); }),
              HasSubstr("it is a folder"));
}

// An output folder (a checkpoint's): one that exists or can be made is
// accepted and nothing is created; a file in the way is named.
TEST_F(OutputFileTest, AFolderThatCannotBeMadeIsNamedAndNothingIsCreated) {
  EXPECT_NO_THROW(check_folder_writable(dir_.string(), "save"));
  const fs::path deep = dir_ / "a" / "b";
  EXPECT_NO_THROW(check_folder_writable(deep.string(), "save"));
  EXPECT_FALSE(fs::exists(dir_ / "a")) << "the check made a folder";
  const std::string file = (dir_ / "file").string();
  write_file(file, "x", "test");
  EXPECT_THAT(message_of<InvalidArgument>([&] { check_folder_writable(file, "save=" + file); }),
              HasSubstr("save=" + file + ": cannot make the folder " + file +
                        ": it exists and is not a folder"));
  EXPECT_THAT(message_of<InvalidArgument>([&] { check_folder_writable(file + "/sub", "save"); }),
              HasSubstr("exists and is not a folder"));
  EXPECT_THAT(message_of<InvalidArgument>([&] { check_folder_writable("", "save"); }),
              HasSubstr("save: the folder name is empty"));
}

// The filesystem is asked, not the mode bits: /proc passes access() for root,
// but no folder can be made there (it was found after training, exit 3).
TEST_F(OutputFileTest, AFolderTheFilesystemRefusesIsRefusedAndNothingIsLeft) {
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc on this system";
  for (const std::string dir : {"/proc/dtw-check", "/proc/dtw-check/a/b"}) {
    EXPECT_THAT(message_of<InvalidArgument>([&] { check_folder_writable(dir, "save=" + dir); }),
                ::testing::ContainsRegex("save=" + dir + ": cannot (make|write into) the folder " + dir));
  }
  EXPECT_THAT(message_of<InvalidArgument>([&] { check_folder_writable("/proc", "save"); }),
              HasSubstr("save: cannot write into the folder /proc"));
  // A folder that can be made, many times over and deep: accepted, nothing left.
  for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(check_folder_writable((dir_ / "x/y/z").string(), "save"));
  EXPECT_TRUE(fs::is_empty(dir_)) << "the check left something in " << dir_;
}

// Every rank of a run checks its checkpoint folder at once (ZeroOptions::
// validate): one rank's check removing the folder it made must not fail
// another's ("cannot write into the folder ...: No such file or directory").
TEST_F(OutputFileTest, ChecksOfOneNewFolderAtOnceAllPass) {
  const std::string dir = (dir_ / "ckpt" / "deep").string();
  std::atomic<int> failed{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 8; ++r)
    ranks.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        try {
          check_folder_writable(dir, "save");
        } catch (const InvalidArgument& e) {
          if (failed++ == 0) ADD_FAILURE() << e.what();
        }
      }
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(failed.load(), 0);
  // No probe file is left; a folder may be (one check's rmdir can meet
  // another's probe), which the run that passed the check makes anyway.
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir_))
    EXPECT_TRUE(e.is_directory()) << "left behind: " << e.path();
}

// Two outputs of one command that are one file: the later write would replace
// the earlier one, so the pair is refused however the file is spelled.
TEST_F(OutputFileTest, TwoOutputsThatAreOneFileAreRefusedNamingBoth) {
  const std::string a = (dir_ / "a.csv").string();
  EXPECT_THAT(message_of<InvalidArgument>([&] {
                check_distinct_outputs({{a, "--out (the loss curve)"}, {a, "--json"}});
              }),
              HasSubstr("--out (the loss curve) (" + a + ") and --json (" + a +
                        ") are the same file"));
  // Spelled differently: "." and "..", a relative path, a symbolic link to
  // the folder, a hard link to an existing file.
  const std::string dotted = (dir_ / "sub" / ".." / "." / "a.csv").string();
  EXPECT_THROW(check_distinct_outputs({{a, "--plot"}, {dotted, "--json"}}), InvalidArgument);
  const fs::path here = fs::current_path();
  fs::current_path(dir_);
  EXPECT_THROW(check_distinct_outputs({{"a.csv", "--plot"}, {a, "--json"}}), InvalidArgument);
  fs::current_path(here);
  fs::create_directory_symlink(dir_, dir_ / "link");
  EXPECT_THROW(check_distinct_outputs({{a, "--plot"}, {(dir_ / "link" / "a.csv").string(), "--json"}}),
               InvalidArgument);
  write_file(a, "x", "test");
  fs::create_hard_link(a, dir_ / "hard.csv");
  EXPECT_THROW(check_distinct_outputs({{a, "--plot"}, {(dir_ / "hard.csv").string(), "--json"}}),
               InvalidArgument);
}

TEST_F(OutputFileTest, DistinctOutputsAndOnesNotAskedForPass) {
  const std::string a = (dir_ / "a").string();
  EXPECT_NO_THROW(check_distinct_outputs({{a + ".csv", "--out"}, {a + ".svg", "--out"},
                                          {a, "--json"}, {"", "--trace"}, {"", "--plot"}}));
  EXPECT_NO_THROW(check_distinct_outputs({}));
}

}  // namespace
}  // namespace dtw
