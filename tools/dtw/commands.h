#pragma once
// The subcommands of the dtw program; main.cpp wires them to CLI11.
// Each returns the process exit status.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dtw/train/run_spec.h"
#include "manifest.h"

namespace dtw::cli {

/// The build and its chapters, loaded once per command that needs them.
struct Context {
  BuildInfo build;
  std::vector<Chapter> chapters;
};
Context load_context();

int list_command(const Context& context);

struct CheckOptions {
  std::string chapter;
  std::string step;     // empty: every step
  bool rerun = false;   // ignore results of the last run
  bool verbose = false;  // the whole failure text
  std::string program;   // for tests of dtw check: this test program, no build, no cache
};
int check_command(const Context& context, const CheckOptions& options);

int hint_command(const Context& context, const std::string& chapter, const std::string& step);
int diff_command(const Context& context, const std::string& chapter);

struct RunOptions {
  std::vector<std::string> words;  // "DEMO", or "pitfall" [NAME]
  int ranks = 0;  // 0: the demo's default
  std::string backend = "threads";
  std::string trace;  // Chrome trace output file, empty: none
  std::string json;   // the whole outcome (checks, errors, traffic matrix) as JSON, empty: none
  std::string hostfile;  // OpenMPI hostfile for --backend mpi, empty: this machine only
  bool list = false;
  bool lab = false;          // --lab: run the demo with the learner's library
  bool lab_program = false;  // this is a chapter's lab-run program (dtw_chNN_lab_run)
};
int run_command(const RunOptions& options);
int tour_command();

struct TrainCommandOptions {
  // The run: train::standard_run's defaults, the one set dtw train, the
  // tests, the demos and the benchmarks share.
  train::RunSpec spec = train::standard_run("gpt-tiny");
  std::string task;  // empty: not given (corpus for a GPT; the MLP has none)
  std::string optimizer = "adamw";
  std::string dtype = "float32";
  std::optional<double> lr;  // empty: the optimizer's default in the RunSpec
  std::string strategy = "single";
  int ranks = 1;
  std::string backend = "threads";  // or mpi: under mpirun, which dtw starts itself
  std::string device = "host";      // or cuda: threads ranks sharing the machine's GPUs
  std::string hostfile;  // OpenMPI hostfile for --backend mpi, empty: this machine only
  std::vector<std::string> knobs;  // --set key=value
  std::int64_t memory_cap = 0;     // per-rank ledger cap in bytes, 0: none
  bool compare = false;            // compare with the reference (runs it once more)
  std::string fabric = "nvlink-8";  // the modeled cluster the timeline is replayed on
  bool list = false;               // list the strategies
  std::string out;  // file stem for .csv and .svg; empty: train-<model>
  std::string json;  // --json FILE: losses, every rank's timeline and memory; empty: none
  bool lab = false;          // --lab: train with the learner's library of the strategy's chapter
  bool lab_program = false;  // this is a chapter's lab-run program (dtw_chNN_lab_run)
  std::vector<std::string> words;  // the arguments after `train`, as typed (--lab hands them over)
};
/// Trains with a registered strategy (single: the reference) and reports as it goes.
int train_command(const TrainCommandOptions& options);

struct PlanOptions {
  // The run to plan: train::standard_run's defaults with the model, --batch,
  // --seq-len and --dtype of the command line, as dtw train builds it.
  train::RunSpec spec = train::standard_run("gpt-tiny");
  std::string dtype = "float32";
  int ranks = 1;
  std::string fabric = "nvlink-8";   // a modeled GPU cluster (train::gpu_clusters)
  std::int64_t memory_cap = 0;       // bytes per rank, 0: none
  std::vector<int> micro_batches;    // m to try; empty: the planner's 2·pp
  std::string json;                  // --json FILE: the rows; empty: none
  bool lab = false;          // --lab: the learner's planner (chapter 08's lab)
  bool lab_program = false;  // this is chapter 08's lab-run program
  std::vector<std::string> words;  // the arguments after `plan`, as typed (--lab hands them over)
};
/// Adds `plan` and its options to `app`, filling `options`; returns the subcommand.
CLI::App* add_plan_subcommand(CLI::App& app, PlanOptions& options);
/// Ranks every layout of chapter 08's hybrid parallelism by its predicted
/// step time on a modeled cluster (ch08::plan) and prints them, best first.
int plan_command(const PlanOptions& options);

/// `args[0]` is the benchmark's name, the rest are passed on.
int bench_command(const Context& context, const std::vector<std::string>& args);

}  // namespace dtw::cli
