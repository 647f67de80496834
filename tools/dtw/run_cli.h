#pragma once
// The `run` subcommand's options, shared by the dtw program and each
// chapter's lab-run program (dtw_chNN_lab_run: the demos linked with the
// learner's library, which `dtw run DEMO --lab` hands over to).
#include <CLI/CLI.hpp>

#include "commands.h"

namespace dtw::cli {

/// Adds `run` and its options to `app`, filling `options`; returns the subcommand.
CLI::App* add_run_subcommand(CLI::App& app, RunOptions& options);

}  // namespace dtw::cli
