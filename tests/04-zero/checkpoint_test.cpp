// Step 04.5, sharded checkpoints: a run saved after 2 of 4 steps on p ranks
// loads on p' ranks (4 → 2, 2 → 3, and across stages) and ends exactly where
// the uninterrupted run ends; a truncated or altered shard, and a checkpoint
// of another model, are refused on every rank with the file and rank named;
// and a save replaces each file in one step (a rename), never writing into
// the file a reader or the previous checkpoint still has.
//
// Both runs happen inside one launch (on sub-communicators of the largest
// world), so the folder rank 0 makes is known to every rank on every backend.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "collectives.h"
#include "dtw/results.h"
#include "dtw_train_test.h"
#include "zero_test_util.h"

namespace dtw::ch04 {
namespace {

using testing::tiny;

// A fresh folder, made by rank 0 and named to every rank.
std::string shared_temp_dir(Comm& comm) {
  std::string dir;
  if (comm.rank() == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dtw-ch04-XXXXXX").string();
    dir = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  dir = allgather_results(comm, dir)[0];
  EXPECT_FALSE(dir.empty()) << "could not make a temporary folder";
  return dir;
}

// Runs `stage` on the first `ranks` ranks of `comm` with `knobs`; the others wait.
train::RankRun<double>* run_on_first(Comm& comm, int ranks, const train::RunSpec& spec,
                                     const train::Knobs& knobs, int stage,
                                     std::unique_ptr<Comm>& sub,
                                     std::unique_ptr<train::RankRun<double>>& run) {
  sub = comm.split(comm.rank() < ranks ? 0 : kNoColor, comm.rank());
  if (!sub) return nullptr;
  run = std::make_unique<train::RankRun<double>>(*sub, spec, knobs);
  train_zero(*run, ZeroOptions::from_knobs(knobs, stage));
  return run.get();
}

// Saves after 2 of 4 steps with `from_stage` on `from` ranks, resumes with
// `to_stage` on `to` ranks, and checks the losses and final parameters.
void reshard(const std::string& model, int from, int from_stage, int to, int to_stage) {
  const train::RunSpec spec = tiny(model, 4);
  train::HarnessOptions o = testing::on(std::max(from, to));
  o.compare = false;  // the resumed run is compared inside the ranks below
  DTW_TRACE(model << ": ZeRO-" << from_stage << " on " << from << " ranks, then ZeRO-" << to_stage
                  << " on " << to);
  train::run_ranks<double>(spec, o, [&](train::RankRun<double>& world) {
    Comm& comm = world.comm();
    const std::string dir = shared_temp_dir(comm);
    std::unique_ptr<Comm> sub;
    std::unique_ptr<train::RankRun<double>> run;
    run_on_first(comm, from, spec, train::Knobs::parse({"save=" + dir, "save_after=2"}), from_stage,
                 sub, run);
    ch01::barrier(comm);
    const std::int64_t before = comm.traffic().total_bytes_sent();
    if (run_on_first(comm, to, spec, train::Knobs::parse({"resume=" + dir}), to_stage, sub, run)) {
      // Loading needs no messages: what was sent is exactly two steps' bytes.
      EXPECT_EQ(comm.traffic().total_bytes_sent() - before,
                2 * testing::bytes_per_step(spec, to_stage, to, sub->rank()))
          << "rank " << sub->rank() << " did not resume at step 2";
      EXPECT_EQ(run->losses().size(), 4u) << "2 losses from the index, 2 trained";
      for (const auto& [begin, values] : run->reported())
        DTW_EXPECT_MATCHES_REFERENCE(sub->rank(), spec, run->losses(), values, begin);
    }
    ch01::barrier(comm);
    if (comm.rank() == 0) std::filesystem::remove_all(dir);
  });
}

DTW_TEST_STEPS(CheckpointTest, "04.1", "04.2", "04.3", "04.5");
TEST(CheckpointTest, SaveThenLoadReshardsExactly) {
  // No training, no collectives: four ranks each step their own quarter of
  // a full replica once and save it; three ranks load thirds. Every value of
  // every range (parameters and both moments) must be exactly the one a
  // single replica that stepped everything holds.
  const train::RunSpec spec = tiny("gpt-tiny", 1);
  train::HarnessOptions o = testing::on(4);
  o.compare = false;
  DTW_TRACE("gpt-tiny after one step, saved on 4 ranks, loaded on 3");
  train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    Comm& comm = run.comm();
    const std::string dir = shared_temp_dir(comm);
    train::Replica<double> whole(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    whole.forward_backward(0, 0, 1);
    whole.step(0);
    const std::int64_t psi = whole.model_size();
    const Sharding four = Sharding::of(spec, 4);
    train::Replica<double> mine(spec, comm.exec(), {{{0, psi}}, {{0, psi}}, testing::owned_ranges(spec, 4, comm.rank())});
    mine.forward_backward(0, 0, 1);
    mine.step(0);
    const std::vector<double> losses = {1.5};
    save_checkpoint(comm, mine, dir, 1, losses);
    std::unique_ptr<Comm> three = comm.split(comm.rank() < 3 ? 0 : kNoColor, comm.rank());
    if (three) {
      const Sharding sharding = Sharding::of(spec, 3);
      train::Replica<double> loaded(spec, comm.exec(),
                                    train::ReplicaPlan::ranges(testing::owned_ranges(spec, 3, three->rank())));
      const CheckpointInfo info = load_checkpoint(*three, loaded, dir);
      EXPECT_EQ(info.ranks, 4);
      EXPECT_EQ(info.steps_done, 1);
      EXPECT_EQ(info.losses, losses);
      for (const train::Range& r : testing::owned_ranges(spec, 3, three->rank())) {
        const auto same = [&](std::span<double> want, std::span<double> got, const char* what) {
          for (std::size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(want[i], got[i]) << what << " at flat index " << r.begin + static_cast<std::int64_t>(i)
                                       << " on rank " << three->rank();
        };
        same(whole.params(r), loaded.params(r), "parameter");
        for (int k = 0; k < 2; ++k)
          same(whole.optimizer_state(k, r.begin, r.end), loaded.optimizer_state(k, r.begin, r.end),
               k == 0 ? "first moment" : "second moment");
      }
    }
    ch01::barrier(comm);
    if (comm.rank() == 0) std::filesystem::remove_all(dir);
  });
}

TEST(CheckpointTest, FourRanksResumeOnTwo) { reshard("gpt-tiny", 4, 3, 2, 3); }

TEST(CheckpointTest, TwoRanksResumeOnThree) { reshard("mlp-tiny", 2, 3, 3, 3); }

TEST(CheckpointTest, AnyStageResumesAnyOther) {
  reshard("gpt-tiny", 3, 1, 2, 3);  // ZeRO-1 saved, ZeRO-3 resumed
  reshard("mlp-tiny", 2, 3, 3, 2);  // and back
}

// Saves 1 step of gpt-tiny on every rank, lets rank 0 damage the files with
// `damage(dir)`, then expects every rank's load to fail with `expected`.
void refused(int ranks, const std::string& load_model,
             const std::function<void(const std::string&)>& damage, const std::string& expected) {
  const train::RunSpec spec = tiny("gpt-tiny", 1);
  train::HarnessOptions o = testing::on(ranks);
  o.compare = false;
  train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    Comm& comm = run.comm();
    const std::string dir = shared_temp_dir(comm);
    train_zero(run, ZeroOptions::from_knobs(train::Knobs::parse({"save=" + dir}), 3));
    if (comm.rank() == 0) damage(dir);
    ch01::barrier(comm);
    const train::RunSpec other = tiny(load_model, 1);
    const train::Knobs resume = train::Knobs::parse({"resume=" + dir});  // RankRun keeps a reference
    train::RankRun<double> again(comm, other, resume);
    try {
      train_zero(again, ZeroOptions::from_knobs(again.knobs(), 3));
      ADD_FAILURE() << "rank " << comm.rank() << ": the damaged checkpoint was loaded";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(comm.rank())),
                std::string::npos)
          << e.what();
    }
    ch01::barrier(comm);
    if (comm.rank() == 0) std::filesystem::remove_all(dir);
  });
}

TEST(CheckpointTest, ATruncatedShardIsRefusedNamingTheFile) {
  refused(
      3, "gpt-tiny",
      [](const std::string& dir) {
        const std::string file = dir + "/shard-1-of-3-step-1.bin";
        std::filesystem::resize_file(file, std::filesystem::file_size(file) - 100);
      },
      "shard-1-of-3-step-1.bin is ");
}

TEST(CheckpointTest, AnAlteredShardFailsItsChecksum) {
  refused(
      2, "gpt-tiny",
      [](const std::string& dir) {
        std::fstream f(dir + "/shard-0-of-2-step-1.bin", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(200);
        f.put('\x7f');
      },
      "shard-0-of-2-step-1.bin does not match its checksum");
}

TEST(CheckpointTest, AnotherModelsCheckpointIsRefused) {
  refused(2, "mlp-tiny", [](const std::string&) {}, "was written for gpt-tiny");
}

TEST(CheckpointTest, AMissingIndexIsAClearError) {
  refused(
      2, "gpt-tiny", [](const std::string& dir) { std::filesystem::remove(dir + "/index"); },
      "cannot read checkpoint file");
}

// Every byte of `path`, or nothing when it cannot be read.
std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every byte still readable through `fd`, from its start.
std::vector<char> read_bytes(int fd) {
  std::vector<char> bytes;
  char buffer[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n <= 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
    at += n;
  }
  return bytes;
}

// Step 04.5's atomic writes. A save writes each file under another name and
// renames it onto its path: the path then names a new file, and whoever had
// the old one open (a reader, or the checkpoint a crash would fall back on)
// still reads it, whole. Writing into the path itself truncates and rewrites
// that very file, which a reader sees change under it and a crash leaves
// half-written. Saving twice with the same step number reuses every name,
// so the second save must replace files that exist.
DTW_TEST_STEPS(CheckpointWriteTest, "04.1", "04.5");
TEST(CheckpointWriteTest, ASaveReplacesEachFileWholeAndLeavesNoTemporaryFile) {
  const train::RunSpec spec = tiny("gpt-tiny", 1);
  train::HarnessOptions o = testing::on(2);
  o.compare = false;
  DTW_TRACE("gpt-tiny saved twice into one folder by 2 ranks, a reader holding the first save");
  train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    Comm& comm = run.comm();
    const int r = comm.rank(), p = comm.size();
    const std::string dir = shared_temp_dir(comm);
    const std::int64_t psi = testing::units_of(spec).back().end;
    train::Replica<double> replica(spec, comm.exec(),
                                   {{{0, psi}}, {{0, psi}}, testing::owned_ranges(spec, p, r)});
    replica.forward_backward(0, 0, 1);
    replica.step(0);
    save_checkpoint(comm, replica, dir, 1, std::vector<double>{1.5});

    // The files this rank wrote, opened as a reader would before the next save.
    std::vector<std::string> mine = {"shard-" + std::to_string(r) + "-of-" + std::to_string(p) +
                                     "-step-1.bin"};
    if (r == 0) mine.push_back("index");
    std::vector<std::vector<char>> before;
    std::vector<int> readers;
    for (const std::string& name : mine) {
      before.push_back(read_bytes(dir + "/" + name));
      ASSERT_FALSE(before.back().empty()) << "rank " << r << ": the first save wrote no " << name;
      readers.push_back(::open((dir + "/" + name).c_str(), O_RDONLY));
      ASSERT_GE(readers.back(), 0) << "rank " << r << ": cannot open " << name;
    }

    // One more optimizer step, saved under the same names.
    replica.forward_backward(0, 0, 1);
    replica.step(0);
    save_checkpoint(comm, replica, dir, 1, std::vector<double>{2.5});

    for (std::size_t i = 0; i < mine.size(); ++i) {
      const std::vector<char> old_file = read_bytes(readers[i]);
      ::close(readers[i]);
      if (old_file != before[i])
        ADD_FAILURE() << "rank " << r << ": " << mine[i]
                      << ", opened before the second save, no longer reads as it did (" << old_file.size()
                      << " bytes now, " << before[i].size()
                      << " then): the save wrote into the file at its path (truncating it) instead "
                         "of writing a temporary file next to it and renaming that onto the path, so "
                         "a crash in the middle of a save leaves a half-written checkpoint";
      if (read_bytes(dir + "/" + mine[i]) == before[i])
        ADD_FAILURE() << "rank " << r << ": the second save did not replace " << mine[i];
    }
    ch01::barrier(comm);
    if (r == 0) {
      // The index and one file per rank; nothing half-done beside them.
      const std::regex kept("index|shard-[0-9]+-of-" + std::to_string(p) + "-step-1\\.bin");
      int files = 0;
      for (const auto& e : std::filesystem::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (!std::regex_match(name, kept))
          ADD_FAILURE() << "the save left " << name << " in the checkpoint folder: rename the "
                           "temporary file onto its path (a crash may leave one; a finished save "
                           "must not)";
        ++files;
      }
      EXPECT_EQ(files, 1 + p) << "files in the checkpoint folder after the save";
      std::filesystem::remove_all(dir);
    }
  });
}

// A save is a sequence: every shard file, then the index, which is what makes
// the new checkpoint exist. Here the shard file of step 2 cannot be written (a
// folder sits at its path), so the save must fail, naming the rank and the
// path, and leave the checkpoint of step 1 loadable: an index written before
// the shard names a file that never came, and a write whose failure goes
// unnoticed does the same.
TEST(CheckpointWriteTest, ASaveThatFailsLeavesThePreviousCheckpointWhole) {
  const train::RunSpec spec = tiny("gpt-tiny", 2);
  train::HarnessOptions o = testing::on(1);
  o.compare = false;
  DTW_TRACE("gpt-tiny saved after step 1, then a save of step 2 whose shard file cannot be "
            "written: the index is written last, so the checkpoint of step 1 stays whole");
  train::run_ranks<double>(spec, o, [&](train::RankRun<double>& run) {
    Comm& comm = run.comm();
    const std::string dir = shared_temp_dir(comm);
    train::Replica<double> replica(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    replica.forward_backward(0, 0, 1);
    replica.step(0);
    save_checkpoint(comm, replica, dir, 1, std::vector<double>{1.5});

    const std::string blocked = dir + "/shard-0-of-1-step-2.bin";
    std::filesystem::create_directories(blocked + "/in-the-way");
    replica.forward_backward(1, 0, 1);
    replica.step(1);
    bool failed = false;
    try {
      save_checkpoint(comm, replica, dir, 2, std::vector<double>{1.5, 2.5});
    } catch (const std::exception& e) {
      failed = true;
      EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos)
          << "the error of a failed write names the rank: " << e.what();
    }
    EXPECT_TRUE(failed) << "rank 0 could not write " << blocked
                        << " (a folder is at that path), yet the save returned as if it had: "
                           "check that the temporary file was written whole and that the rename "
                           "succeeded, and fail naming the rank and the path";

    train::Replica<double> fresh(spec, comm.exec(), train::ReplicaPlan::whole(spec));
    try {
      const CheckpointInfo info = load_checkpoint(comm, fresh, dir);
      EXPECT_EQ(info.steps_done, 1)
          << "after the failed save of step 2 the folder's index says " << info.steps_done
          << " steps: the index must be written last, only after every shard file";
    } catch (const std::exception& e) {
      ADD_FAILURE() << "after a save of step 2 that failed writing its shard file, the checkpoint "
                       "no longer loads: "
                    << e.what()
                    << "\nwrite every shard file first and the index last (after the gather of "
                       "every rank's entry): the index is what makes a checkpoint exist, so a save "
                       "that fails or stops half-way must leave the previous index, naming the "
                       "previous step's files";
    }
    std::filesystem::remove_all(dir);
  });
}

}  // namespace
}  // namespace dtw::ch04
