#pragma once
// The subcommands of the dtw program; main.cpp wires them to CLI11.
// Each returns the process exit status.
#include <cstdint>
#include <string>
#include <vector>

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
  int ranks = 0;        // 0: the tests' own choice
  std::string backend;  // empty: the tests' own choice
  bool rerun = false;   // ignore results of the last run
  bool verbose = false;  // the whole failure text
  std::string program;   // for tests of dtw check: this test program, no build, no cache
  std::string reaching;  // for tests of dtw check: only the tests that reach this step
};
int check_command(const Context& context, const CheckOptions& options);

int hint_command(const Context& context, const std::string& chapter, const std::string& step);
int diff_command(const Context& context, const std::string& chapter);

struct RunOptions {
  std::string demo;
  int ranks = 0;  // 0: the demo's default
  std::string backend = "threads";
  std::string trace;  // Chrome trace output file, empty: none
  std::string hostfile;  // OpenMPI hostfile for --backend mpi, empty: this machine only
  bool list = false;
};
int run_command(const RunOptions& options);
int tour_command();

struct TrainCommandOptions {
  std::string model = "gpt-tiny";
  std::int64_t steps = 200;
  std::int64_t batch = 8;
  std::int64_t seq_len = 0;  // 0: the model's context
  std::string task = "corpus";
  std::string optimizer = "adamw";
  double lr = 0;  // 0: the optimizer's default in dtw::model::TrainOptions
  double clip = 1.0;
  std::int64_t warmup = 30;  // linear learning-rate warm-up steps
  std::uint64_t seed = 1234;
  std::string out;  // file stem for .csv and .svg; empty: train-<model>
};
/// Trains on one device with dtw::train_reference and reports as it goes.
int train_command(const TrainCommandOptions& options);

/// `args[0]` is the benchmark's name, the rest are passed on.
int bench_command(const Context& context, const std::vector<std::string>& args);

}  // namespace dtw::cli
