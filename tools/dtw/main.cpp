// dtw: the workbench's one command. Subcommands are wired to CLI11 here; each
// lives in its own *_command.cpp.
#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cli_values.h"
#include "commands.h"
#include "exit_codes.h"
#include "mpi_launch.h"
#include "run_cli.h"
#include "dtw/errors.h"
#include "style.h"

namespace dtw::cli {

namespace {

int run_main(int argc, char** argv) {
  CLI::App app{
      "dtw -- the Distributed Training Workbench.\n"
      "Learn each parallelism technique by writing it: read chapters/NN-*/README.md, fill in\n"
      "labs/NN-*/, and let `dtw check NN` tell you where you stand.\n"
      "`dtw help CMD` (or `dtw CMD --help`) shows a subcommand's options.",
      "dtw"};
  app.set_version_flag("--version", std::string("dtw ") + DTW_VERSION);
  app.footer(kExitCodesHelp);
  app.require_subcommand(0, 1);
  std::function<int()> action;

  app.add_subcommand("list", "Chapters, their steps, and your progress (as the last `dtw check` found it)")
      ->callback([&] { action = [] { return list_command(load_context()); }; });

  CheckOptions check;
  CLI::App* check_cmd = app.add_subcommand(
      "check",
      "Rebuild chapter NN's lab, run its tests step by step in the order of the text, and show\n"
      "each step: pass / fail / not started; then the first failure with its context and hint.\n"
      "Results of an unchanged lab come from the last run. Exit status 0 only when every step\n"
      "(or the one step asked for) passes.");
  check_cmd->add_option("chapter", check.chapter, "Chapter number (00) or folder name")->required();
  check_cmd->add_option("step", check.step, "Only this step's tests (01.5, or 5)");
  check_cmd->add_flag("--rerun", check.rerun, "Run every test again, even if the lab has not changed");
  check_cmd->add_flag("--verbose", check.verbose, "Show the whole text of the first failure and name every failing test of its step");
  check_cmd->add_option("--program", check.program,
                        "(for testing dtw check) run this test program instead of the lab's; "
                        "no build, no cache")
      ->group("");
  check_cmd->callback([&] { action = [&] { return check_command(load_context(), check); }; });

  std::string hint_chapter, hint_step;
  CLI::App* hint_cmd =
      app.add_subcommand("hint", "Show the hints of chapter NN's steps and where to write them");
  hint_cmd->add_option("chapter", hint_chapter, "Chapter number (00) or folder name")->required();
  hint_cmd->add_option("step", hint_step, "Only this step (00.2, or 2)");
  hint_cmd->callback(
      [&] { action = [&] { return hint_command(load_context(), hint_chapter, hint_step); }; });

  std::string diff_chapter;
  CLI::App* diff_cmd = app.add_subcommand(
      "diff", "Show your lab against the solution (diff -ru); spoils the exercise");
  diff_cmd->add_option("chapter", diff_chapter, "Chapter number (00) or folder name")->required();
  diff_cmd->callback([&] { action = [&] { return diff_command(load_context(), diff_chapter); }; });

  RunOptions run;
  CLI::App* run_cmd = add_run_subcommand(app, run);
  run_cmd->callback([&] { action = [&] { return run_command(run); }; });

  app.add_subcommand("tour",
                     "Run every chapter's demos with the solution and print one summary table")
      ->callback([&] { action = [] { return tour_command(); }; });

  TrainCommandOptions train;
  CLI::App* train_cmd = add_train_subcommand(app, train);
  train.words.assign(argv + 1, argv + argc);
  train_cmd->callback([&] { action = [&] { return train_command(train); }; });

  PlanOptions plan;
  CLI::App* plan_cmd = add_plan_subcommand(app, plan);
  plan.words.assign(argv + 1, argv + argc);
  plan_cmd->callback([&] { action = [&] { return plan_command(plan); }; });

  CLI::App* bench_cmd =
      app.add_subcommand("bench", "Run benchmark NAME (build/bench/dtw_bench_NAME) with ARGS");
  bench_cmd->prefix_command();
  bench_cmd->footer(
      "Usage: dtw bench NAME [ARGS...]; ARGS go to the benchmark program as they are\n"
      "(dtw bench NAME --help lists its options). Every one ends with the exit statuses of dtw --help.");
  bench_cmd->callback([&] {
    action = [bench_cmd] { return bench_command(load_context(), bench_cmd->remaining()); };
  });

  // `dtw help` is `dtw --help`, and `dtw help CMD` is `dtw CMD --help`.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "help") {
    args.erase(args.begin());
    args.resize(std::min<std::size_t>(args.size(), 1));
    if (!args.empty()) {
      try {
        app.get_subcommand(args[0]);
      } catch (const CLI::OptionNotFound&) {
        print_error(fmt::format("dtw help: there is no subcommand '{}' (dtw help lists them)",
                                args[0]));
        return kExitUsage;
      }
    }
    args.push_back("--help");
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (105, 109, ...) would break the one convention.
    const std::string command =
        app.get_subcommands().empty() ? "dtw" : "dtw " + app.get_subcommands()[0]->get_name();
    print_error(fmt::format("{} ({} --help lists the options)", parse_error_text(e), command));
    return kExitUsage;
  }
  if (!action) {
    fmt::print("{}", app.help());
    return kExitOk;
  }
  return action();
}

}  // namespace
}  // namespace dtw::cli

namespace {

int guarded_main(int argc, char** argv) {
  using namespace dtw::cli;
  try {
    return run_main(argc, argv);
  } catch (const UsageError& e) {
    print_error(e.what());
    return kExitUsage;
  } catch (const dtw::InvalidArgument& e) {
    print_error(usage_text(e));
    return kExitUsage;
  } catch (const std::exception& e) {
    print_error(e.what());
    return kExitRunFailed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Progress lines must reach a pipe (`dtw train ... | tee log`) as they are
  // printed, not when a 4 KiB block fills or the program ends.
  std::setvbuf(stdout, nullptr, _IOLBF, 1 << 16);
  // A rank of `dtw run --backend mpi` marks its status as dtw's (mpi_launch.h).
  return dtw::cli::rank_process_status(guarded_main(argc, argv));
}
