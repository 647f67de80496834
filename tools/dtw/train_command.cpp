// dtw train: any registered strategy (the single-device reference, "single",
// by default) on P ranks through the training layer's harness, with a progress
// bar, a loss curve (CSV and SVG), the time each kind of layer took and every
// rank's memory by category.
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>

#include "bench_main.h"
#include "commands.h"
#include "exit_codes.h"
#include "lab_run.h"
#include "mpi_launch.h"
#include "process.h"
#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/kernels/matmul.h"
#include "dtw/model/config.h"
#include "dtw/model/profile.h"
#include "dtw/model/trainer.h"
#include "dtw/output_file.h"
#include "dtw/train/fabric.h"
#include "dtw/train/reference.h"
#include "dtw/train/strategy.h"
#include "style.h"
#include "train_output.h"
#include "train_timeline.h"

namespace dtw::cli {
namespace {

void list_strategies() {
  fmt::print("{}\n", paint(Paint::kBold, "strategies (dtw train --strategy NAME)"));
  for (const train::Strategy& s : train::strategies()) {
    const std::string ranks = s.max_ranks == s.min_ranks ? std::to_string(s.min_ranks)
                              : s.max_ranks >= (1 << 20)
                                  ? std::to_string(s.min_ranks) + "+"
                                  : fmt::format("{}-{}", s.min_ranks, s.max_ranks);
    fmt::print("  {:<24} ch {:<3} ranks {:<6} {}\n", s.name, s.chapter.empty() ? "--" : s.chapter,
               ranks, s.description);
    // Its knobs (--set KEY=VALUE), each with its default: any other key is refused.
    for (const train::Knob& k : s.knobs)
      fmt::print("      {:<28} {}\n", k.name + "=" + k.default_value, k.help);
  }
  fmt::print("knobs: --set KEY=VALUE, shown with their defaults; a key the strategy does not "
             "list is refused\n");
}

// dtw train --lab: the same arguments, to the lab-run program of the
// strategy's chapter (its strategies linked with the learner's library).
[[noreturn]] void hand_over_to_lab(const train::Strategy& strategy,
                                   const TrainCommandOptions& options) {
  if (strategy.chapter.empty())
    throw UsageError(fmt::format("--lab: strategy {} is the training layer's own, not a chapter's, "
                                 "so there is no lab of it (dtw train --list names each "
                                 "strategy's chapter)",
                                 strategy.name));
  std::vector<std::string> args;
  const auto train = std::find(options.words.begin(), options.words.end(), "train");
  for (auto it = train; it != options.words.end(); ++it)
    if (*it != "--lab") args.push_back(*it);
  exec_lab_run(strategy.chapter, args);
}

// The arguments after `train`, as typed, for the processes mpirun starts
// (without --hostfile: that was mpirun's).
std::vector<std::string> train_arguments(const TrainCommandOptions& options) {
  const auto train = std::find(options.words.begin(), options.words.end(), "train");
  DTW_CHECK(train != options.words.end(), Error,
            "dtw train --backend mpi: the command line has no `train` to hand to mpirun");
  return without_hostfile(std::vector<std::string>(train, options.words.end()));
}

int train_run(const TrainCommandOptions& options);

}  // namespace

int train_command(const TrainCommandOptions& options) {
  if (options.list) {
    list_strategies();
    return 0;
  }
  if (options.lab && !options.lab_program)
    hand_over_to_lab(train::find_strategy(options.strategy), options);
  // A process that mpirun started (dtw train --backend mpi started mpirun):
  // every process runs its rank and gets the same outcome, or the same error;
  // only rank 0 says it. The others end with the status it ends with, quietly.
  if (options.backend != "mpi" || !inside_mpirun()) return train_run(options);
  try {
    return train_run(options);
  } catch (const NotImplemented&) {
    if (is_printing_process()) throw;
    return kExitRunFailed;
  } catch (const UsageError&) {
    if (is_printing_process()) throw;
    return kExitUsage;
  } catch (const InvalidArgument&) {
    if (is_printing_process()) throw;
    return kExitUsage;
  } catch (const std::exception&) {
    if (is_printing_process()) throw;
    return kExitRunFailed;
  }
}

namespace {

int train_run(const TrainCommandOptions& options) {
  // Everything is checked before any work starts: the run, the strategy, the
  // backend, and that the loss curve can be written where --out says.
  // Each field of the run is refused in the words of its option ("--batch
  // must be at least 1, got 0", as --ranks is), never as RunSpec's own
  // message with a source location: the ranges are the parser's (run_cli.cpp),
  // what depends on the model is checked here, and a name the library does
  // not know keeps the library's list of the known ones.
  const auto option = [](const char* flag, const auto& parse) -> decltype(auto) {
    try {
      return parse();
    } catch (const InvalidArgument& e) {
      throw UsageError(fmt::format("{}: {}", flag, e.message()));
    }
  };
  train::RunSpec spec = options.spec;
  const model::ModelConfig config = option("--model", [&] { return spec.config(); });
  const bool gpt_model = config.kind == model::ModelKind::kGpt;
  if (!gpt_model && !options.task.empty())
    throw UsageError(fmt::format("--task {}: model {} is an MLP, which trains on synthetic "
                                 "classification and has no token task (leave --task out)",
                                 options.task, config.name));
  if (!gpt_model && spec.seq_len != 0)
    throw UsageError(fmt::format("--seq-len {}: model {} is an MLP, which has no sequence (leave "
                                 "--seq-len out)",
                                 spec.seq_len, config.name));
  if (gpt_model && spec.seq_len > config.context)
    throw UsageError(fmt::format("--seq-len must be between 0 and {} (the context of {}; 0: all "
                                 "of it), got {}",
                                 config.context, config.name, spec.seq_len));
  // Only a given --task is set: the MLP has none.
  if (!options.task.empty())
    spec.task = option("--task", [&] { return model::token_task_from_name(options.task); });
  if (options.optimizer != "adamw" && options.optimizer != "sgd")
    throw UsageError(fmt::format("--optimizer must be adamw or sgd, got '{}'", options.optimizer));
  spec.optimizer = options.optimizer == "sgd" ? model::Optimizer::kSgd : model::Optimizer::kAdamW;
  // A given --lr is always used (and validated with the rest): never silently
  // replaced by the default.
  if (options.lr) spec.set_lr(*options.lr);
  spec.dtype = option("--dtype", [&] { return train::dtype_from_name(options.dtype); });
  spec.validate();  // what the options' own checks above left (nothing, for the command line)
  const train::Strategy& strategy =
      option("--strategy", [&]() -> const train::Strategy& { return train::find_strategy(options.strategy); });
  if (options.fabric == "this-machine")
    throw UsageError("dtw train models the named GPU clusters; this-machine (links fitted by "
                     "ping-pong) is in dtw bench train --fabric this-machine");
  const train::Cluster& fabric =
      option("--fabric", [&]() -> const train::Cluster& { return train::find_gpu_cluster(options.fabric); });
  const bool on_mpi = options.backend == "mpi";
  if (options.backend != "threads" && !on_mpi)
    throw UsageError("dtw train runs on the threads or the mpi backend, got --backend " +
                     options.backend);
  if (!options.hostfile.empty() && !on_mpi)
    throw UsageError("--hostfile only applies to --backend mpi");
  if (on_mpi && !DTW_HAVE_MPI)
    throw UsageError("this build has no mpi backend: install OpenMPI (./dtw setup) and rebuild");
  // Under mpirun (which the parent started) every process runs its rank;
  // the parent checked the outputs and rank 0 writes them.
  const bool rank_process = on_mpi && inside_mpirun();
  const std::string stem = options.out.empty() ? "train-" + config.name : options.out;
  // --out is a stem that names are made from: a folder or a device there
  // would not be written, STEM.csv beside it would (--out /tmp: /tmp.csv).
  std::error_code ec;
  const std::filesystem::file_status is = std::filesystem::status(stem, ec);
  if (!rank_process && std::filesystem::exists(is) && !std::filesystem::is_regular_file(is))
    throw UsageError(fmt::format(
        "dtw train --out {}: that is {}, and --out takes a file stem: it writes STEM.csv, "
        "STEM.svg and STEM-timeline.svg{}",
        stem, std::filesystem::is_directory(is) ? "a folder" : "a device or other special file",
        std::filesystem::is_directory(is) ? fmt::format(" (e.g. --out {}/run)", stem) : ""));
  if (!rank_process) {
    check_writable(stem + ".csv", "dtw train --out (the loss curve)");
    check_writable(stem + ".svg", "dtw train --out (the loss plot)");
    check_writable(stem + "-timeline.svg", "dtw train --out (the timeline)");
    if (!options.json.empty()) check_writable(options.json, "dtw train --json");
    check_distinct_outputs({{stem + ".csv", "dtw train --out (the loss curve)"},
                            {stem + ".svg", "dtw train --out (the loss plot)"},
                            {stem + "-timeline.svg", "dtw train --out (the timeline)"},
                            {options.json, "dtw train --json"}});
  }

  model::LayerTimes times;
  const bool gpt = config.kind == model::ModelKind::kGpt;
  const std::string unit = gpt ? "tok" : "rows";
  const std::string data =
      gpt ? std::string(spec.options().task == model::TokenTask::kCorpus ? "corpus" : "synthetic") +
                " text"
          : "synthetic classification";
  Progress progress(spec.steps, unit);
  train::HarnessOptions harness;
  harness.ranks = options.ranks;
  harness.backend = options.backend;
  harness.device = options.device == "host" ? "" : options.device;
  harness.memory_cap = options.memory_cap;
  harness.knobs = train::Knobs::parse(options.knobs);
  harness.compare = options.compare;
  harness.layer_times = &times;
  harness.trace = true;  // the timeline and the fabric replay
  harness.on_step = [&](const model::StepInfo& s) { progress.update(s); };

  // The strategy's knobs and ranks are checked before the header (run_strategy
  // checks them again, cheaply): a refused run prints only why.
  train::check_strategy(strategy, spec, options.ranks, harness.knobs);
  const std::string knobs = train::knobs_in_force(strategy, spec, options.ranks, harness.knobs);
  {
    // What launch would refuse (a bad DTW_MPI_WATCHDOG_SECONDS) is refused
    // now, before mpirun starts processes that would each refuse it.
    LaunchOptions probe;
    probe.backend = options.backend;
    probe.device = options.device == "host" ? "" : options.device;
    check_launch_options(options.ranks, probe);
  }
  if (on_mpi && !rank_process) {
    // Everything is checked: mpirun runs this program again with the same
    // arguments, one process per rank (mpi_launch.h), and rank 0 prints.
    if (!options.hostfile.empty()) check_hostfile(options.hostfile);
    return run_mpirun({train_arguments(options), options.ranks, options.hostfile});
  }
  const bool printing = !rank_process || is_printing_process();
  if (rank_process && options.ranks > mpi_job_size()) {
    if (!printing) return kExitUsage;
    throw UsageError(fmt::format(
        "--ranks {} but mpirun started {} process(es): use mpirun -np {}, or let dtw start "
        "mpirun (dtw train --backend mpi --ranks {})",
        options.ranks, mpi_job_size(), options.ranks, options.ranks));
  }

  // The header names whose code runs and every hyper-parameter in force, the
  // strategy's knobs with their defaults included, so a log says exactly what ran.
  const std::string whose =
      strategy.chapter.empty() ? ""
      : options.lab_program
          ? fmt::format(" (your lab of chapter {})", strategy.chapter)
          : fmt::format(" (chapter {}'s solution; --lab runs yours)", strategy.chapter);
  if (printing)
    fmt::print("{} with {}{} on {} rank{} ({}{}): {}{}\n", paint(Paint::kBold, "training"),
               strategy.name, whose, options.ranks, options.ranks == 1 ? "" : "s",
               options.backend + (options.device == "cuda" ? " on CUDA devices" : ""),
               options.memory_cap > 0
                   ? ", memory cap " + human_bytes(static_cast<double>(options.memory_cap))
                   : "",
               spec.hyperparameters(), knobs.empty() ? "" : ", knobs " + knobs);
  train::RunOutcome out;
  try {
    out = train::run_strategy(strategy, spec, harness);
  } catch (const NotImplemented& e) {
    const std::optional<NotWritten> w = not_written(e.what());
    if (!options.lab_program || !w) throw;
    if (!printing) return kExitRunFailed;
    print_not_written(*w, strategy.chapter, strategy.name, "dtw train without --lab runs the solution");
    return kExitRunFailed;
  }
  DTW_CHECK(!out.losses.empty(), Error,
            "dtw train: strategy " << strategy.name << " recorded no losses (RankRun::record_loss)");
  // Every process has the same outcome (run_ranks shares it); rank 0 reports
  // it and writes the files, the others end with the status it ends with.
  if (!printing) return out.matches ? kExitOk : kExitCheckFailed;

  // A resumed run computed only the steps after its checkpoint: the rate is theirs.
  const std::int64_t ran = spec.steps - out.resumed_steps;
  const double rate =
      out.seconds > 0 ? static_cast<double>(ran * spec.tokens_per_step()) / out.seconds : 0;
  if (out.resumed_steps > 0 && ran > 0)
    fmt::print("resumed from a checkpoint after step {}; this run computed {}\n",
               out.resumed_steps,
               ran == 1 ? fmt::format("step {}", spec.steps)
                        : fmt::format("steps {}-{}", out.resumed_steps + 1, spec.steps));
  else if (out.resumed_steps > 0)
    fmt::print("resumed from a checkpoint after step {}, the run's last: nothing left to "
               "compute\n",
               out.resumed_steps);
  fmt::print("{} parameters; loss {:.4f} -> {:.4f}; {} {} in {} ({} {}/s)\n",
             model::param_layout(config).size(), out.losses.front(), out.losses.back(),
             ran * spec.tokens_per_step(), unit, human_seconds(out.seconds), human_rate(rate),
             unit);
  if (options.compare && !out.checked)
    fmt::print("reference: not compared ({} does not reproduce the single-device run with "
               "these settings)\n",
               strategy.name);
  else if (options.compare)
    fmt::print("reference: {} (max |θ − θ_ref| = {:.3g} over {} values)\n",
               out.matches ? paint(Paint::kGreen, "matches") : paint(Paint::kRed, out.mismatch),
               out.max_abs_param_diff, out.compared);
  const bool timed = std::any_of(out.ranks.begin(), out.ranks.end(),
                                 [](const train::RankOutcome& o) { return !o.layer_times.empty(); });
  if (timed) {
    print_breakdown(out.ranks, out.seconds);
    fmt::print("  matmul by {}\n", kernels::blas_name());
  }
  fmt::print("\n{}\n{}", paint(Paint::kBold, "memory per rank (the ledger: peak by category)"),
             out.report.memory_table());

  const TimelineFigures timeline = timeline_figures(out.report, options.ranks, fabric, spec.steps);
  print_timeline(timeline);

  write_timeline(out.report, options.ranks, spec.steps, strategy.name, stem + "-timeline.svg");
  write_csv(stem + ".csv", out.losses);
  fmt::print("\nwrote {}.csv (step,loss)\n", stem);
  if (!options.json.empty()) {
    write_train_json(options.json,
                     {strategy.name, config.name, spec.hyperparameters(), out.seconds, out.losses},
                     out.report, timeline);
    fmt::print("wrote {} (losses, every rank's timeline and memory)\n", options.json);
  }
  write_plot(stem + ".csv", stem + ".svg",
             fmt::format("{}, {} on {} rank(s), batch {}, {} data, {}", config.name,
                         strategy.name, options.ranks, spec.batch, data, options.optimizer));
  return out.matches ? 0 : 1;
}

}  // namespace
}  // namespace dtw::cli
