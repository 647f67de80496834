// The memory ledger, its per-rank cap, Array on the host, and the ledger
// snapshots a launch reports.
#include <gmock/gmock.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "dtw/array.h"
#include "dtw/memory.h"
#include "dtw_test.h"

namespace dtw {
namespace {

using ::testing::HasSubstr;
using testing::launch_bounded;

TEST(LedgerTest, CountsCurrentAndPeakPerCategory) {
  MemoryLedger ledger;
  ledger.allocate(MemoryCategory::kParameters, 100);
  ledger.allocate(MemoryCategory::kActivations, 50);
  ledger.release(MemoryCategory::kActivations, 50);
  ledger.allocate(MemoryCategory::kActivations, 20);
  EXPECT_EQ(ledger.current(MemoryCategory::kParameters), 100);
  EXPECT_EQ(ledger.current(MemoryCategory::kActivations), 20);
  EXPECT_EQ(ledger.peak(MemoryCategory::kActivations), 50);
  EXPECT_EQ(ledger.current(MemoryCategory::kGradients), 0);
  EXPECT_EQ(ledger.current_total(), 120);
  EXPECT_EQ(ledger.peak_total(), 150);
}

TEST(LedgerTest, PeakTotalIsTheWorstMomentNotTheSumOfPeaks) {
  // Activations and gradients never coexist: the total peaks at 80, while
  // the per-category peaks sum to 140.
  MemoryLedger ledger;
  ledger.allocate(MemoryCategory::kActivations, 80);
  ledger.release(MemoryCategory::kActivations, 80);
  ledger.allocate(MemoryCategory::kGradients, 60);
  EXPECT_EQ(ledger.peak_total(), 80);
  EXPECT_EQ(ledger.peak(MemoryCategory::kActivations) + ledger.peak(MemoryCategory::kGradients), 140);
}

TEST(LedgerTest, CapRaisesOutOfMemoryNamingRankCategoryAndBytes) {
  MemoryLedger ledger(3, 1000);
  ledger.allocate(MemoryCategory::kParameters, 600);
  ledger.allocate(MemoryCategory::kGradients, 300);
  try {
    ledger.allocate(MemoryCategory::kActivations, 200);
    FAIL() << "no OutOfMemory past the cap";
  } catch (const OutOfMemory& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 3"));
    EXPECT_THAT(e.what(), HasSubstr("asked for 200 bytes"));
    EXPECT_THAT(e.what(), HasSubstr("of activations"));
    EXPECT_THAT(e.what(), HasSubstr("holding 900 bytes"));
    EXPECT_THAT(e.what(), HasSubstr("cap of 1000 bytes"));
    EXPECT_THAT(e.what(), HasSubstr("parameters 600 B, gradients 300 B"));
  }
  // A refused allocation counts nothing; exactly up to the cap is allowed.
  EXPECT_EQ(ledger.current_total(), 900);
  ledger.allocate(MemoryCategory::kActivations, 100);
  EXPECT_EQ(ledger.current_total(), 1000);
}

TEST(LedgerTest, BadAmountsAreInvalidArgument) {
  MemoryLedger ledger(1);
  EXPECT_THROW(ledger.allocate(MemoryCategory::kOther, -1), InvalidArgument);
  ledger.allocate(MemoryCategory::kOther, 10);
  EXPECT_THROW(ledger.release(MemoryCategory::kOther, 11), InvalidArgument);
  EXPECT_THROW(ledger.release(MemoryCategory::kGradients, 1), InvalidArgument);
  EXPECT_THROW(ledger.set_cap(-5), InvalidArgument);
  EXPECT_THROW(MemoryLedger(0, -1), InvalidArgument);
  EXPECT_EQ(ledger.current_total(), 10);
}

TEST(LedgerTest, ChargeHoldsItsBytesUntilDestroyedOrMoved) {
  MemoryLedger ledger;
  {
    MemoryLedger::Charge a(&ledger, MemoryCategory::kActivations, 64);
    EXPECT_EQ(ledger.current(MemoryCategory::kActivations), 64);
    MemoryLedger::Charge b = std::move(a);
    EXPECT_EQ(a.bytes(), 0);
    EXPECT_EQ(ledger.current(MemoryCategory::kActivations), 64);
    b.reset();
    EXPECT_EQ(ledger.current(MemoryCategory::kActivations), 0);
    MemoryLedger::Charge c(&ledger, MemoryCategory::kActivations, 32);
  }
  EXPECT_EQ(ledger.current_total(), 0);
  EXPECT_EQ(ledger.peak_total(), 64);
  const MemoryLedger::Charge none(nullptr, MemoryCategory::kOther, 1 << 20);  // counts nowhere
  EXPECT_EQ(none.bytes(), 0);
}

TEST(ArrayTest, HostArrayIsCountedForItsWholeLife) {
  auto ledger = std::make_shared<MemoryLedger>();
  const Exec exec = Exec::host().with_ledger(ledger);
  {
    Array<double> a(exec, 10, MemoryCategory::kOptimizerState);
    EXPECT_EQ(ledger->current(MemoryCategory::kOptimizerState), 80);
    Array<double> b = std::move(a);
    EXPECT_EQ(a.size(), 0);
    EXPECT_EQ(b.size(), 10);
    EXPECT_EQ(ledger->current(MemoryCategory::kOptimizerState), 80);
    Array<float> c(exec, 3);
    b = Array<double>(exec, 2, MemoryCategory::kGradients);  // the old 80 bytes go
    EXPECT_EQ(ledger->current(MemoryCategory::kOptimizerState), 0);
    EXPECT_EQ(ledger->current(MemoryCategory::kGradients), 16);
    EXPECT_EQ(ledger->current(MemoryCategory::kOther), 12);
  }
  EXPECT_EQ(ledger->current_total(), 0);
  // The new 16 bytes existed before the old 80 went: all three at once.
  EXPECT_EQ(ledger->peak_total(), 80 + 12 + 16);
}

TEST(ArrayTest, UploadDownloadFillAndCopy) {
  Array<std::int64_t> a(Exec::host(), 5);
  const std::vector<std::int64_t> values{3, 1, 4, 1, 5};
  a.upload(values);
  EXPECT_EQ(a.to_vector(), values);
  EXPECT_EQ(std::accumulate(a.begin(), a.end(), std::int64_t{0}), 14);
  a.fill(-7);
  EXPECT_EQ(a.to_vector(), std::vector<std::int64_t>(5, -7));
  const Array<std::int64_t> b(Exec::host(), std::span<const std::int64_t>(values));
  a.copy_from(b);
  std::vector<std::int64_t> out(5);
  a.download(out);
  EXPECT_EQ(out, values);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
  const Array<float> empty(Exec::host(), 0);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(ArrayTest, BadSizesAreInvalidArgument) {
  auto ledger = std::make_shared<MemoryLedger>(4);
  const Exec exec = Exec::host().with_ledger(ledger);
  try {
    Array<float> a(exec, -3);
    FAIL() << "an Array of negative size was made";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 4: Array of -3 elements"));
  }
  EXPECT_EQ(ledger->current_total(), 0);
  Array<float> a(exec, 4);
  std::vector<float> three(3);
  EXPECT_THROW(a.upload(three), InvalidArgument);
  EXPECT_THROW(a.download(three), InvalidArgument);
  EXPECT_THROW(Exec::cuda(-1), InvalidArgument);
}

TEST(ArrayTest, CommSendsAndReceivesArraysOnItsExec) {
  launch_bounded(3, [](Comm& comm) {
    ASSERT_TRUE(comm.exec().is_host());
    ASSERT_NE(comm.exec().ledger(), nullptr);
    EXPECT_EQ(comm.exec().ledger()->rank(), comm.world_rank());
    Array<float> mine(comm.exec(), 1000, MemoryCategory::kCommBuffers);
    Array<float> theirs(comm.exec(), 1000, MemoryCategory::kCommBuffers);
    mine.fill(static_cast<float>(comm.rank()));
    const int right = (comm.rank() + 1) % comm.size(), left = (comm.rank() + 2) % comm.size();
    comm.sendrecv(mine, right, theirs, left);
    EXPECT_EQ(theirs.to_vector(), std::vector<float>(1000, static_cast<float>(left)));
    Request r = comm.irecv(theirs, left, 1);
    comm.send(mine, right, 1);
    comm.wait(r);
    EXPECT_EQ(comm.exec().ledger()->current(MemoryCategory::kCommBuffers), 8000);
  });
}

TEST(ArrayTest, DeviceArrayOnAHostCommIsInvalidArgument) {
  // An empty device Array needs no CUDA to exist, so this runs everywhere.
  launch_bounded(2, [](Comm& comm) {
    Array<float> on_gpu(Exec::cuda(1), 0);
    try {
      comm.send(on_gpu, 1 - comm.rank());
      ADD_FAILURE() << "a device Array went through a host communicator";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("rank " + std::to_string(comm.rank()) +
                                      ": send: the buffer is on cuda:1 but this communicator "
                                      "runs on host"));
    }
  });
}

TEST(ArrayTest, LaunchCapTurnsTooMuchIntoOutOfMemoryOnThatRank) {
  LaunchOptions options;
  options.memory_cap = 4096;
  const Report report = launch_collecting(3, options, [](Comm& comm) {
    Array<double> params(comm.exec(), 256, MemoryCategory::kParameters);  // 2 KiB
    if (comm.rank() == 1) Array<double> acts(comm.exec(), 512, MemoryCategory::kActivations);
  });
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].rank, 1);
  EXPECT_EQ(report.errors[0].kind, "OutOfMemory");
  EXPECT_THAT(report.errors[0].message, HasSubstr("asked for 4096 bytes (4.0 KiB) of activations"));
  EXPECT_THAT(report.errors[0].message, HasSubstr("holding 2048 bytes"));
  EXPECT_THAT(report.errors[0].message, HasSubstr("parameters 2.0 KiB"));
  LaunchOptions bad;
  bad.memory_cap = -1;
  EXPECT_THROW(launch(2, bad, [](Comm&) {}), InvalidArgument);
}

TEST(ReportMemoryTest, EveryRankSnapshotIsInTheReportAndTable) {
  const Report report = launch_bounded(4, [](Comm& comm) {
    const Array<float> params(comm.exec(), 1024 * (comm.rank() + 1), MemoryCategory::kParameters);
    MemoryLedger::Charge acts(comm.exec().ledger(), MemoryCategory::kActivations, 100);
    comm.barrier();
  });
  ASSERT_EQ(report.memory.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const MemorySnapshot& m = report.memory[static_cast<std::size_t>(r)];
    EXPECT_EQ(m.rank, r);
    EXPECT_EQ(m.peak_of(MemoryCategory::kParameters), 4096 * (r + 1));
    EXPECT_EQ(m.peak_of(MemoryCategory::kActivations), 100);
    EXPECT_EQ(m.peak_total, 4096 * (r + 1) + 100);
    EXPECT_EQ(m.current_total(), 0);
  }
  const std::string table = report.memory_table();
  EXPECT_THAT(table, HasSubstr("parameters"));
  EXPECT_THAT(table, HasSubstr("16.0 KiB"));  // rank 3's parameters
  EXPECT_THAT(table, HasSubstr("none"));      // no cap
}

}  // namespace
}  // namespace dtw
