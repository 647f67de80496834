#pragma once
// The `run` and `train` subcommands' options, shared by the dtw program and
// each chapter's lab-run program (dtw_chNN_lab_run: the demos and strategies
// linked with the learner's library, which `dtw run DEMO --lab` and
// `dtw train --strategy NAME --lab` hand over to).
#include <CLI/CLI.hpp>

#include "commands.h"

namespace dtw::cli {

/// Adds `run` and its options to `app`, filling `options`; returns the subcommand.
CLI::App* add_run_subcommand(CLI::App& app, RunOptions& options);

/// Adds `train` and its options to `app`, filling `options`; returns the subcommand.
CLI::App* add_train_subcommand(CLI::App& app, TrainCommandOptions& options);

}  // namespace dtw::cli
