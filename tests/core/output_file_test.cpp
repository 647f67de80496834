// Output files: check_writable refuses, before any work, what could not be
// written; write_file reports every failed write (a full disk included),
// so a program never says "wrote" for a file it lost.
#include "dtw/output_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
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

}  // namespace
}  // namespace dtw
