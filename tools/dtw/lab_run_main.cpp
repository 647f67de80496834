// dtw_chNN_lab_run: one chapter's demos and training strategies linked with
// the learner's library (labs/NN-x) instead of the solution. `dtw run DEMO
// --lab` and `dtw train --strategy NAME --lab` hand over to it; it takes the
// same `run DEMO [options]` or `train [options]` arguments (mpirun starts it
// again that way for --backend mpi).
#include <fmt/core.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "cli_values.h"
#include "dtw/errors.h"
#include "exit_codes.h"
#include "lab_run.h"
#include "mpi_launch.h"
#include "run_cli.h"
#include "style.h"

namespace {

int guarded_main(int argc, char** argv) {
  using dtw::cli::print_error;
  std::setvbuf(stdout, nullptr, _IOLBF, 1 << 16);  // progress reaches a pipe line by line
  try {
    CLI::App app{"The demos and strategies of one chapter with your lab; run it as `dtw run DEMO "
                 "--lab` or `dtw train --strategy NAME --lab`.",
                 "dtw-lab-run"};
    app.require_subcommand(1, 1);
    dtw::cli::RunOptions run;
    CLI::App* run_cmd = dtw::cli::add_run_subcommand(app, run);
    dtw::cli::TrainCommandOptions train;
    dtw::cli::add_train_subcommand(app, train);
    train.words.assign(argv + 1, argv + argc);  // mpirun runs them again (--backend mpi)
    // A chapter's own subcommands (chapter 08's `plan`).
    std::vector<std::pair<CLI::App*, const dtw::cli::LabRunCommand*>> extra;
    for (const dtw::cli::LabRunCommand& c : dtw::cli::lab_run_commands())
      extra.emplace_back(c.add(app), &c);
    try {
      app.parse(argc, argv);
    } catch (const CLI::Success& e) {
      return app.exit(e);  // --help
    } catch (const CLI::ParseError& e) {
      // dtw's exit-code convention, not CLI11's own codes.
      print_error(fmt::format("{} (dtw run --help lists the options)",
                              dtw::cli::parse_error_text(e)));
      return dtw::cli::kExitUsage;
    }
    for (const auto& [cmd, command] : extra)
      if (cmd->parsed()) return command->run();
    if (run_cmd->parsed()) {
      run.lab = true;
      run.lab_program = true;
      return dtw::cli::run_command(run);
    }
    train.lab = true;
    train.lab_program = true;
    return dtw::cli::train_command(train);
  } catch (const dtw::cli::UsageError& e) {
    print_error(e.what());
    return dtw::cli::kExitUsage;
  } catch (const dtw::InvalidArgument& e) {
    print_error(dtw::cli::usage_text(e));
    return dtw::cli::kExitUsage;
  } catch (const std::exception& e) {
    print_error(e.what());
    return dtw::cli::kExitRunFailed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A rank of `dtw run --backend mpi --lab` marks its status as dtw's (mpi_launch.h).
  return dtw::cli::rank_process_status(guarded_main(argc, argv));
}
