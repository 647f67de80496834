// The strategy registry and harness: "single" is always first and matches the
// reference; unknown names, bad worlds and bad knobs are named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "dtw/errors.h"
#include "dtw/launch.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"

namespace dtw::train {
namespace {

template <class T>
void noop(RankRun<T>&) {}
DTW_REGISTER_STRATEGY({.name = "test-noop", .chapter = "99", .description = "does nothing",
                       .max_ranks = 3, .run = [](auto& run) { noop(run); }});

TEST(StrategyTest, SingleIsFirstAndUnknownNamesListTheKnownOnes) {
  ASSERT_FALSE(strategies().empty());
  EXPECT_EQ(strategies().front().name, "single");
  EXPECT_EQ(find_strategy("test-noop").chapter, "99");
  try {
    find_strategy("ddp-magic");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown strategy 'ddp-magic'; known: single"),
              std::string::npos)
        << e.what();
  }
}

TEST(StrategyTest, ANameRegisteredTwiceIsReportedWhenUsed) {
  EXPECT_TRUE(register_strategy({.name = "test-twice", .chapter = "97"}));
  EXPECT_FALSE(register_strategy({.name = "test-twice", .chapter = "98"}));
  try {
    find_strategy("test-twice");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("test-twice is registered twice: test-twice (chapters 97 and 98)"),
              std::string::npos)
        << e.what();
  }
}

TEST(StrategyTest, SingleMatchesTheReferenceInBothPrecisions) {
  RunSpec spec = standard_run("gpt-tiny");
  spec.steps = 3;
  spec.batch = 4;
  for (DType d : {DType::kFloat64, DType::kFloat32}) {
    spec.dtype = d;
    int calls = 0;
    HarnessOptions o;
    o.on_step = [&](const model::StepInfo& s) {
      EXPECT_EQ(s.step, calls++);
      EXPECT_EQ(s.tokens, 4 * 32);
    };
    const RunOutcome out = run_strategy(find_strategy("single"), spec, o);
    EXPECT_TRUE(out.matches) << out.mismatch;
    EXPECT_EQ(out.max_abs_param_diff, 0.0);  // the same computation, bitwise
    EXPECT_EQ(calls, 3);
    ASSERT_EQ(out.report.memory.size(), 1u);
    EXPECT_GT(out.report.memory[0].peak_of(MemoryCategory::kActivations), 0);
  }
}

TEST(StrategyTest, ARankRunMadeFromTemporariesKeepsItsOwnSpecAndKnobs) {
  // Both arguments die at the end of the declaration; a RankRun that kept
  // references to them read freed memory afterwards (ASan:
  // stack-use-after-scope), as any strategy called from a test this way did.
  launch(1, LaunchOptions{}, [](Comm& comm) {
    RankRun<double> run(comm, standard_run("mlp-tiny"),
                        Knobs::parse({"bucket_kib=64", "check_every=3"}));
    const std::vector<RunSpec> others(8, standard_run("gpt-tiny"));  // reuses the stack
    EXPECT_EQ(run.spec().model, "mlp-tiny");
    EXPECT_EQ(run.spec().steps, standard_run("mlp-tiny").steps);
    EXPECT_EQ(run.knobs().describe(), "bucket_kib=64 check_every=3");
    EXPECT_EQ(run.knobs().get_int("check_every", 1), 3);
    run.record_loss(0, 1.5);  // reads spec() for the progress line
    EXPECT_EQ(run.losses(), std::vector<double>{1.5});
    EXPECT_EQ(others.size(), 8u);
  });
}

TEST(StrategyTest, WorldsOutsideTheStrategysRangeAreRefused) {
  HarnessOptions o;
  o.ranks = 4;
  try {
    run_strategy(find_strategy("test-noop"), standard_run("mlp-tiny"), o);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("strategy test-noop on 4 ranks, mlp-tiny, batch 8: it "
                                         "runs on 1 to 3 ranks, not 4"),
              std::string::npos)
        << e.what();
  }
  // A range said as a person would: "1 to 1" and "2 to 1048576" (the
  // default bound) read "exactly 1 rank" and "at least 2 ranks".
  o.ranks = 2;
  EXPECT_THROW(
      {
        try {
          run_strategy(find_strategy("single"), standard_run("mlp-tiny"), o);
        } catch (const InvalidArgument& e) {
          EXPECT_THAT(e.what(), ::testing::HasSubstr("it runs on exactly 1 rank, not 2"));
          throw;
        }
      },
      InvalidArgument);
  Strategy two_up;
  two_up.name = "two-up";
  two_up.min_ranks = 2;
  try {
    check_strategy(two_up, standard_run("mlp-tiny"), 1, Knobs());
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("it runs on at least 2 ranks, not 1"));
  }
}

// A strategy that reports parameters the reference never had: the harness
// must catch it unless the strategy declares that it does not reproduce the
// reference for this run (asynchronous training), and then say so.
template <class T>
void off_by_one(RankRun<T>& run) {
  const std::vector<T> wrong(4, T(1));
  run.record_loss(0, 123.0);
  run.report_params(wrong, 0);
}
DTW_REGISTER_STRATEGY({.name = "test-inexact", .chapter = "96", .description = "not the reference",
                       .knobs = {{.name = "exact", .default_value = "no", .help = "yes: claim to be"}},
                       .run = [](auto& run) { off_by_one(run); },
                       .reproduces_reference = [](int ranks, const Knobs& knobs) {
                         return ranks == 1 && knobs.get("exact", "no") == "yes";
                       }});

TEST(StrategyTest, AStrategyThatDoesNotReproduceTheReferenceIsNotCompared) {
  RunSpec spec = standard_run("mlp-tiny");
  spec.steps = 1;
  spec.dtype = DType::kFloat64;
  const Strategy& s = find_strategy("test-inexact");
  HarnessOptions o;
  o.ranks = 2;
  RunOutcome out = run_strategy(s, spec, o);
  EXPECT_FALSE(out.checked);
  EXPECT_TRUE(out.matches);
  EXPECT_EQ(out.compared, 0);
  o.ranks = 1;
  o.knobs.set("exact", "yes");  // where it claims to reproduce it, it is compared
  out = run_strategy(s, spec, o);
  EXPECT_TRUE(out.checked);
  EXPECT_FALSE(out.matches);
  EXPECT_NE(out.mismatch.find("rank 0"), std::string::npos) << out.mismatch;
  EXPECT_TRUE(find_strategy("single").reproduces(1, Knobs{}));
}

// A strategy whose knob `rows_per_rank` must fit the batch: its check hook
// refuses what its rank function would, and the rank function counts its
// calls (threads backend: one process), so a test can see that nothing ran.
std::atomic<int> counted_runs{0};
void check_rows(const RunSpec& spec, int ranks, const Knobs& knobs) {
  const std::int64_t rows = knobs.get_int("rows_per_rank", 1);
  DTW_CHECK_ARG(rows * ranks <= spec.batch, "rows_per_rank=" << rows << " x " << ranks
                                                             << " ranks exceeds the batch of "
                                                             << spec.batch);
}
template <class T>
void counted(RankRun<T>& run) {
  check_rows(run.spec(), run.comm().size(), run.knobs());
  ++counted_runs;
}
DTW_REGISTER_STRATEGY({.name = "test-checked", .chapter = "95", .description = "checks its knob",
                       .knobs = {{.name = "rows_per_rank", .default_value = "1", .help = "rows"}},
                       .run = [](auto& run) { counted(run); },
                       .check = check_rows});

TEST(StrategyTest, TheCheckHookRefusesBadKnobsBeforeAnyRankRuns) {
  RunSpec spec = standard_run("mlp-tiny");
  spec.steps = 1;
  spec.batch = 8;
  const Strategy& s = find_strategy("test-checked");
  HarnessOptions o;
  o.ranks = 4;
  o.compare = false;
  o.knobs.set("rows_per_rank", "3");
  counted_runs = 0;
  try {
    run_strategy(s, spec, o);
    FAIL() << "rows_per_rank=3 on 4 ranks was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("strategy test-checked on 4 ranks, mlp-tiny, batch 8, "
                                         "rows_per_rank=3: rows_per_rank=3 x 4 ranks exceeds "
                                         "the batch of 8"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(counted_runs, 0) << "a rank ran before the check refused the knobs";
  EXPECT_THROW(check_strategy(s, spec, 4, o.knobs), InvalidArgument);
  // Where the check passes, every rank runs.
  o.knobs.set("rows_per_rank", "2");
  EXPECT_NO_THROW(check_strategy(s, spec, 4, o.knobs));
  run_strategy(s, spec, o);
  EXPECT_EQ(counted_runs, 4);
  // A spec that is itself invalid is the run's fault: no strategy prefix.
  spec.batch = 0;
  try {
    check_strategy(s, spec, 1, Knobs{});
    FAIL() << "batch 0 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).find("strategy test-checked"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch 0 must be at least 1"), std::string::npos)
        << e.what();
  }
}

TEST(StrategyTest, AnUnknownKnobIsRefusedBeforeAnyRankRuns) {
  RunSpec spec = standard_run("mlp-tiny");
  spec.steps = 1;
  const Strategy& s = find_strategy("test-checked");
  HarnessOptions o;
  o.ranks = 2;
  o.compare = false;
  o.knobs.set("rows_per_rnak", "1");  // a typo: it must not run the default
  counted_runs = 0;
  try {
    run_strategy(s, spec, o);
    FAIL() << "the unknown knob rows_per_rnak was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "strategy test-checked on 2 ranks, mlp-tiny, batch 8, rows_per_rnak=1: unknown "
                  "knob 'rows_per_rnak' (did you mean rows_per_rank?); test-checked's knobs are "
                  "rows_per_rank"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(counted_runs, 0) << "a rank ran before the unknown knob was refused";
  // A key far from every knob gets no suggestion; a strategy without knobs says so.
  try {
    check_strategy(s, spec, 2, Knobs().set("foo", "bar"));
    FAIL() << "foo=bar was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown knob 'foo'; test-checked's knobs are rows_per_rank"),
              std::string::npos)
        << e.what();
  }
  try {
    check_strategy(find_strategy("single"), spec, 1, Knobs().set("bucket_kib", "64"));
    FAIL() << "single took bucket_kib";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("unknown knob 'bucket_kib': single takes no knobs"),
              std::string::npos)
        << e.what();
  }
  // Declared knobs pass, and then every rank runs.
  o.knobs = Knobs().set("rows_per_rank", "2");
  run_strategy(s, spec, o);
  EXPECT_EQ(counted_runs, 2);
}

// A strategy whose second knob's default depends on the run.
DTW_REGISTER_STRATEGY({.name = "test-defaults", .chapter = "94", .description = "two knobs",
                       .knobs = {{.name = "depth", .default_value = "3", .help = "a fixed default"},
                                 {.name = "width",
                                  .default_value = "2p",
                                  .help = "twice the ranks",
                                  .default_for = [](const RunSpec&, int ranks, const Knobs&) {
                                    return std::to_string(2 * ranks);
                                  }}},
                       .run = [](auto& run) { noop(run); }});

TEST(StrategyTest, KnobsInForceNameEveryKnobWithItsDefault) {
  const RunSpec spec = standard_run("mlp-tiny");
  const Strategy& s = find_strategy("test-defaults");
  EXPECT_EQ(knobs_in_force(s, spec, 3, Knobs{}), "depth=3 width=6");
  EXPECT_EQ(knobs_in_force(s, spec, 3, Knobs().set("width", "5")), "depth=3 width=5");
  EXPECT_EQ(knobs_in_force(find_strategy("single"), spec, 1, Knobs{}), "");
}

TEST(StrategyTest, KnobsParseAndNameBadValues) {
  const Knobs k = Knobs::parse({"bucket_kib=64", "schedule=1f1b", "ratio=0.5"});
  EXPECT_EQ(k.get_int("bucket_kib", 0), 64);
  EXPECT_EQ(k.get_int("missing", 7), 7);
  EXPECT_EQ(k.get("schedule", ""), "1f1b");
  EXPECT_EQ(k.get_double("ratio", 0), 0.5);
  EXPECT_THROW(k.get_int("schedule", 0), InvalidArgument);
  EXPECT_THROW(Knobs::parse({"novalue"}), InvalidArgument);
  // A key given twice was the last one silently: refused, naming both values.
  try {
    Knobs::parse({"check_every=1", "bucket_kib=4", "check_every=2"});
    ADD_FAILURE() << "a key given twice was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("check_every is given twice (check_every=1 and "
                                         "check_every=2)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(k.describe(), "bucket_kib=64 ratio=0.5 schedule=1f1b");
  EXPECT_EQ(k.keys(), (std::vector<std::string>{"bucket_kib", "ratio", "schedule"}));
}

}  // namespace
}  // namespace dtw::train
